"""How a figure with its 95% interval reads, the same on every page, hover, table and CLI line.

The interval is written as its two bounds in brackets after the estimate, never as ``±``: a
speedup's Fieller interval is asymmetric, and ``1.32× ± 0.36`` reads as "maybe slower" where
``1.325× [1.054, 1.775]`` says "faster". Without bounds the brackets say why (one run, the
baseline, a baseline too noisy for an interval, a group of too few prompts). JSON carries the
same bounds as numbers (``speedup_lo``/``speedup_hi``).

A group of fewer than ``MIN_GROUP`` prompts gets no interval at all: with two, Student's t has one
degree of freedom (t = 12.7) and the "interval" spans two orders of magnitude, so it is not drawn
and its verdict reads ``too few prompts``, never ``tie`` (``too_few``).

    text(1.325, 1.054, 1.775, unit="×")          # '1.325× [1.054, 1.775]'
    text(21.37, 19.8, 23.02, digits=1)           # '21.4 [19.8, 23.0]'
    text(1.7, why_none=too_few(2), unit="×")     # '1.700× (2 prompts: too few for an interval)'
    row_text({"speedup": 1.3, "speedup_lo": None, "speedup_hi": None, "method": "ngram"})
                                                 # '1.300× (1 run: no interval)'
    row_text({"speedup": 1.587, "speedup_lo": 0.679, "speedup_hi": 2.495, "runs": 2})
                                                 # '1.587× [0.679, 2.495] (mean of 2 runs)'

An imported benchmark tool's single run (guidellm, AIPerf) takes its interval from the spread of its
requests, which covers how requests differ and not how a rerun would: it says so, ``(over one run's
requests)``.
"""

from __future__ import annotations

from collections.abc import Mapping

from specscope import stats
from specscope.results import identity, tool_exports

__all__ = ["text", "bounds", "row_text", "times", "too_few", "WORDS", "ONE_RUN", "TOO_NOISY", "NO_BASELINE",
           "MIN_GROUP", "TOO_FEW", "OVER_REQUESTS", "TIMES"]

TIMES = "×"  # the one suffix of a speedup, on every page, hover, table and CLI line

WORDS = "95% interval in brackets"  # how a caption names the brackets
ONE_RUN = "1 run: no interval"
TOO_NOISY = "baseline too noisy for an interval"
NO_BASELINE = "no matching baseline"
MIN_GROUP = 3  # prompts a group needs for an interval
TOO_FEW = "too few prompts"  # a group's verdict without an interval
OVER_REQUESTS = "over one run's requests"  # an imported run's interval: how requests differ, not reruns


def too_few(prompts: int) -> str:
    """Why a group has no interval: ``2 prompts: too few for an interval``."""
    return f"{prompts} prompt{'' if prompts == 1 else 's'}: too few for an interval"


def times(value: float, digits: int = 3) -> str:
    """A speedup without an interval: ``1.325×``."""
    return f"{value:.{digits}f}{TIMES}"


def bounds(low, high, digits: int = 3) -> str:
    """``[1.054, 1.775]``; '' without both bounds."""
    low, high = stats.finite(low), stats.finite(high)
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def text(value, low=None, high=None, *, unit: str = "", digits: int = 3, why_none: str = ONE_RUN) -> str:
    """``1.325× [1.054, 1.775]``; without both bounds ``1.325× (why_none)``; '–' without a value."""
    value = stats.finite(value)
    if value is None:
        return "–"
    shown, interval = f"{value:.{digits}f}{unit}", bounds(low, high, digits)
    if not interval:
        return f"{shown} ({why_none})" if why_none else shown
    if stats.finite(low) == 0.0 < value:  # a Fieller low end below 0 is raised to 0: a speedup cannot be less
        return f"{shown} {interval} (low end clipped at 0)"
    return f"{shown} {interval}"


def row_text(row: Mapping, value: str = "speedup", unit: str = TIMES, short: bool = False,
             digits: int | None = None) -> str:
    """``text`` of a result row's ``value`` and its ``<value>_lo``/``_hi`` bounds, saying why a
    speedup has none (the baseline itself, no matching baseline, a noisy baseline, one run), and
    ``(mean of 2 runs)`` where the row folds several runs (its ``runs``). ``short``: '1 run' instead of
    '1 run: no interval'."""
    speedup = value == "speedup"
    digits = digits if digits is not None else 3 if speedup else 1
    if stats.finite(row.get(value)) is None:
        return NO_BASELINE if speedup else "–"
    if speedup and row.get("method") == "none":
        return text(row.get(value), unit=unit, digits=digits, why_none="baseline")
    why = TOO_NOISY if speedup and row.get("speedup_interval") == "unbounded" else \
        "1 run" if short else ONE_RUN
    shown = text(row.get(value), row.get(f"{value}_lo"), row.get(f"{value}_hi"), unit=unit, digits=digits,
                 why_none=why)
    folded = identity.folded_text(row.get("runs"))
    imported = row.get("source") in tool_exports.MARKS and (stats.finite(row.get("repeats")) or 1) <= 1
    if not folded and imported and bounds(row.get(f"{value}_lo"), row.get(f"{value}_hi")):
        folded = OVER_REQUESTS  # an imported tool's one run: its spread over requests, not over reruns
    return f"{shown} ({folded})" if folded else shown
