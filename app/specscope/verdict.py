"""What to deploy, verified: a measured K schedule against every fixed K of the same setup.

The closed loop ends here. A schedule is worth deploying only if its servers measured faster
than the best fixed K somewhere and slower nowhere; a schedule that merely ties is left out
for the fixed K, which is the simpler server. With repeats, faster and slower mean beyond the
95% intervals (they do not overlap); a single run compares the points and says so.

    for v in verdicts(explore.curves_vs_concurrency(store)):
        print(v.sentence(), v.speculative_config())
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from specscope import schedule
from specscope.errors import ConfigError

__all__ = ["Comparison", "Verdict", "verdicts"]


def _bounded(lo, hi) -> bool:
    return lo is not None and hi is not None and pd.notna(lo) and pd.notna(hi)


@dataclass(frozen=True)
class Comparison:
    """The schedule and the best fixed K at one concurrency (speedups over the same baseline)."""

    concurrency: int
    best_k: int
    fixed: float
    scheduled: float
    outcome: str  # "faster", "slower" or "tie" (intervals overlap)
    intervals: bool  # both points have a 95% interval

    @property
    def ratio(self) -> float:
        """The schedule's speedup over the best fixed K's: its throughput over that server's."""
        return self.scheduled / self.fixed


@dataclass(frozen=True)
class Verdict:
    """One schedule of one setup against that setup's fixed K at the concurrencies both measured."""

    setup: str
    method: str
    schedule: str
    comparisons: tuple[Comparison, ...]
    fixed_k: int  # the single K with the best mean speedup over those concurrencies
    fixed_mean: float
    schedule_mean: float

    @property
    def deploy_schedule(self) -> bool:
        """Faster than the best fixed K at some concurrency and slower at none."""
        outcomes = {c.outcome for c in self.comparisons}
        return "faster" in outcomes and "slower" not in outcomes

    @property
    def deploy(self) -> str:
        """``schedule 1-2:4,3-256:1`` or ``K=4``."""
        return f"schedule {self.schedule}" if self.deploy_schedule else f"K={self.fixed_k}"

    @property
    def intervals(self) -> bool:
        """Every comparison had 95% intervals on both sides (else points were compared)."""
        return all(c.intervals for c in self.comparisons)

    def speculative_config(self) -> dict:
        """The ``speculative_config`` to deploy (the method's own options, e.g. ngram's lookup sizes, to add)."""
        if self.deploy_schedule:
            return schedule.parse(self.schedule).speculative_config({"method": self.method})
        return {"method": self.method, "num_speculative_tokens": self.fixed_k}

    def sentence(self) -> str:
        """The verdict and its evidence in one sentence."""
        def at(outcome: str) -> str:
            picked = [c for c in self.comparisons if c.outcome == outcome]
            return ", ".join(f"{c.concurrency} ({c.ratio:.3f}x of K={c.best_k})" for c in picked)

        noise = "beyond the 95% intervals" if self.intervals else "single run: points compared, no interval"
        concs = [c.concurrency for c in self.comparisons]
        means = (f"mean speedup over concurrency {concs[0]}–{concs[-1]}: schedule {self.schedule_mean:.3f}x, "
                 f"K={self.fixed_k} {self.fixed_mean:.3f}x")
        faster, slower = at("faster"), at("slower")
        if self.deploy_schedule:
            return (f"Deploy the schedule {self.schedule}: faster than the best fixed K at concurrency {faster} "
                    f"and slower at none ({noise}); {means}.")
        if slower:
            why = f"the schedule {self.schedule} was slower at concurrency {slower}"
            why += f" and faster at {faster}" if faster else " and faster at none"
        else:
            why = f"the schedule {self.schedule} tied the best fixed K everywhere, and a fixed K is the simpler server"
            noise = "within the 95% intervals" if self.intervals else noise
        return f"Deploy K={self.fixed_k}: {why} ({noise}); {means}."


def _compare(conc: int, fixed: pd.DataFrame, mine: pd.Series) -> Comparison:
    best = fixed.loc[fixed["speedup"].idxmax()]
    intervals = _bounded(best["speedup_lo"], best["speedup_hi"]) and _bounded(mine["speedup_lo"], mine["speedup_hi"])
    if intervals:
        outcome = ("faster" if mine["speedup_lo"] > best["speedup_hi"] else
                   "slower" if mine["speedup_hi"] < best["speedup_lo"] else "tie")
    else:
        outcome = ("faster" if mine["speedup"] > best["speedup"] else
                   "slower" if mine["speedup"] < best["speedup"] else "tie")
    return Comparison(conc, int(best["k"]), float(best["speedup"]), float(mine["speedup"]), outcome, intervals)


def verdicts(curves: pd.DataFrame) -> list[Verdict]:
    """A verdict per (setup, schedule) of ``curves`` (``explore.curves_vs_concurrency``), over the
    concurrencies where the schedule and at least one fixed K were measured."""
    found = []
    for setup, rows in curves.dropna(subset=["speedup", "concurrency"]).groupby("setup", sort=False):
        fixed = rows[~rows["scheduled"].astype(bool)]
        for text, mine in rows[rows["scheduled"].astype(bool)].groupby("k_schedule", sort=False):
            concs = sorted(set(mine["concurrency"]) & set(fixed["concurrency"]))
            try:
                text = schedule.parse(str(text)).text()
            except ConfigError:
                continue  # an imported row's schedule vLLM would refuse: nothing to deploy
            if not concs:
                continue
            comparisons = tuple(
                _compare(int(c), fixed[fixed["concurrency"] == c], mine[mine["concurrency"] == c].iloc[0])
                for c in concs)
            shared = fixed[fixed["concurrency"].isin(concs)]
            by_k = shared.groupby("k")["speedup"].agg(["mean", "size"])
            by_k = by_k[by_k["size"] == len(concs)]["mean"]  # a K measured at every one of them
            if by_k.empty:
                continue
            found.append(Verdict(
                setup=str(setup), method=str(rows["method"].iloc[0]), schedule=str(text),
                comparisons=comparisons, fixed_k=int(by_k.idxmax()), fixed_mean=float(by_k.max()),
                schedule_mean=float(mine[mine["concurrency"].isin(concs)]["speedup"].mean())))
    return found
