"""Reading results: the Explorer's queries, intervals, per-prompt figures, versions, verdicts and the limits."""
