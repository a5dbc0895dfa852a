"""What to deploy, verified: a measured K schedule against the fixed K of the same setup.

The closed loop ends here. The choice is one server: the schedule or the single K with the best
mean speedup over the concurrencies both measured. The schedule is deployed if it measured faster
than that K somewhere and slower nowhere; a schedule that merely ties is left out for the fixed
K, the simpler server; faster at some loads and slower at others is decided by the mean speedup,
and said. Faster and slower are the one rule's (``specscope.ties``); a single run compares the
points, says so, and deploys the fixed K: points alone never pick a schedule. Each concurrency also keeps the
schedule's ratio to the best fixed K there (the envelope a schedule tries to follow).

    for v in verdicts(explore.curves_vs_concurrency(store)):
        print(v.sentence(), v.speculative_config())
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from specscope import ties
from specscope.engine import k_schedule
from specscope.errors import ConfigError

__all__ = ["Comparison", "Verdict", "verdicts", "verdict_of", "bounded", "compare_speedups"]


def bounded(row) -> bool:
    """Whether a row's speedup has both ends of its 95% interval."""
    return pd.notna(row["speedup_lo"]) and pd.notna(row["speedup_hi"])


def compare_speedups(mine, other) -> tuple[str, bool]:
    """``faster``, ``slower`` or ``tie`` for ``mine`` against ``other`` by the one rule (``ties.outcome``), and
    whether intervals decided it; without them the points are compared, to be said, never to pick a schedule."""
    found = ties.outcome(ties.Figure.of(mine), ties.Figure.of(other))
    if found != ties.NO_INTERVAL:
        return found, True
    return (
        "faster" if mine["speedup"] > other["speedup"] else "slower" if mine["speedup"] < other["speedup"] else "tie"
    ), False


@dataclass(frozen=True)
class Comparison:
    """The schedule at one concurrency against the deployable fixed K and the best fixed K there
    (speedups over the same baseline, so their ratios are throughput ratios)."""

    concurrency: int
    fixed: float  # the verdict's fixed K (best mean over concurrency)
    scheduled: float
    outcome: str  # against that fixed K: "faster", "slower" or "tie" (``ties.outcome``)
    intervals: bool  # both points have a 95% interval
    best_k: int  # the best fixed K at this concurrency
    best: float

    @property
    def ratio(self) -> float:
        """The schedule's speedup over the verdict's fixed K's."""
        return self.scheduled / self.fixed

    @property
    def envelope_ratio(self) -> float:
        """The schedule's speedup over the best fixed K's at this concurrency."""
        return self.scheduled / self.best


@dataclass(frozen=True)
class Verdict:
    """One schedule of one setup against that setup's fixed K at the concurrencies both measured."""

    setup: str
    method: str
    k_schedule: str
    comparisons: tuple[Comparison, ...]
    fixed_k: int  # the single K with the best mean speedup over those concurrencies
    fixed_mean: float
    schedule_mean: float

    def _at(self, outcome: str) -> list[Comparison]:
        return [c for c in self.comparisons if c.outcome == outcome]

    @property
    def deploy_schedule(self) -> bool:
        """Faster than the fixed K somewhere and slower nowhere; when both, the higher mean speedup. Only with
        intervals on every comparison: points compared cannot pick a schedule over the simpler server."""
        faster, slower = self._at("faster"), self._at("slower")
        return self.intervals and bool(faster) and (not slower or self.schedule_mean > self.fixed_mean)

    @property
    def deploy(self) -> str:
        """``schedule 1-2:4,3-256:1`` or ``K=4``."""
        return f"schedule {self.k_schedule}" if self.deploy_schedule else f"K={self.fixed_k}"

    @property
    def intervals(self) -> bool:
        """Every comparison had 95% intervals on both sides (else points were compared)."""
        return all(c.intervals for c in self.comparisons)

    def speculative_config(self) -> dict:
        """The ``speculative_config`` to deploy (the method's own options, e.g. ngram's lookup sizes, to add)."""
        if self.deploy_schedule:
            return k_schedule.parse(self.k_schedule).speculative_config({"method": self.method})
        return {"method": self.method, "num_speculative_tokens": self.fixed_k}

    def sentence(self, deployed_k: int | None = None) -> str:
        """The verdict and its evidence in one sentence; ``deployed_k``: the fixed K an answer deploys instead of
        the schedule where it is not the K the schedule was measured against."""

        def where(picked: list[Comparison]) -> str:
            return ", ".join(f"{c.concurrency} ({c.ratio:.3f}×)" for c in picked)

        faster, slower = self._at("faster"), self._at("slower")
        noise = (
            "single run: points compared, no interval"
            if not self.intervals
            else "beyond the 95% intervals"
            if faster or slower
            else "within the 95% intervals"
        )
        concs = [c.concurrency for c in self.comparisons]
        means = (
            f"mean speedup over concurrency {concs[0]}–{concs[-1]}: schedule {self.schedule_mean:.3f}×, "
            f"K={self.fixed_k} {self.fixed_mean:.3f}×"
        )
        envelope = min(self.comparisons, key=lambda c: c.envelope_ratio)
        follows = (
            f"; against the best fixed K at each concurrency the schedule keeps at least "
            f"{envelope.envelope_ratio:.3f} (K={envelope.best_k} at {envelope.concurrency})"
        )
        sides = [
            f"{word} at concurrency {where(picked)}"
            for word, picked in (("faster", faster), ("slower", slower))
            if picked
        ]
        if len(sides) == 1:
            sides.append("slower nowhere" if faster else "faster nowhere")
        against = f"against K={self.fixed_k} it was {' and '.join(sides)} ({noise})"
        named = (
            f"the schedule {self.k_schedule}"
            if self.deploy_schedule
            else f"K={deployed_k or self.fixed_k} rather than the schedule {self.k_schedule}"
        )
        if not self.intervals and faster:  # a single run's points: said, not acted on
            head = f"Deploy {named}, the simpler server: a single run cannot tell them apart; "
        elif faster and slower:
            head = f"Deploy {named}, by mean speedup: "
        elif faster or slower:
            head = f"Deploy {named}: "
        else:
            head = f"Deploy {named}, the simpler server: "
            against = f"it tied K={self.fixed_k} everywhere ({noise})"
        return f"{head}{against}; {means}{follows}.{self.unmeasured()}"

    def unmeasured(self) -> str:
        """What the comparison does not cover: the batch sizes above the largest concurrency measured
        (vLLM keeps a schedule's last K past its last range), '' when the schedule deployed is a fixed K."""
        top = self.comparisons[-1].concurrency
        if not self.deploy_schedule:
            return ""
        return (
            f" Measured up to concurrency {top} only: at batch sizes above {top} the schedule's K is an "
            "extrapolation, not compared."
        )


def verdicts(curves: pd.DataFrame) -> list[Verdict]:
    """A verdict per (setup, schedule) of ``curves`` (``explore.curves_vs_concurrency``), over the
    concurrencies where the schedule and every fixed K of the verdict were measured."""
    found = []
    for setup, rows in curves.dropna(subset=["speedup", "concurrency"]).groupby("setup", sort=False):
        fixed = rows[~rows["scheduled"].astype(bool)]
        for text, mine in rows[rows["scheduled"].astype(bool)].groupby("k_schedule", sort=False):
            one = verdict_of(str(setup), str(rows["method"].iloc[0]), str(text), mine, fixed)
            if one is not None:
                found.append(one)
    return found


def verdict_of(setup: str, method: str, text: str, mine: pd.DataFrame, fixed: pd.DataFrame) -> Verdict | None:
    """One schedule's verdict: ``mine`` (its points) against ``fixed`` (the setup's fixed-K points), each a
    frame of ``concurrency, k, speedup, speedup_lo, speedup_hi`` with one row per point; None where no fixed
    K was measured at every concurrency the schedule was, or vLLM would refuse the schedule."""
    try:
        text = k_schedule.parse(text).text()
    except ConfigError:
        return None  # an imported row's schedule vLLM would refuse: nothing to deploy
    concs = sorted(set(mine["concurrency"]) & set(fixed["concurrency"]))
    shared = fixed[fixed["concurrency"].isin(concs)]
    by_k = shared.groupby("k")["speedup"].agg(["mean", "size"])
    by_k = by_k[by_k["size"] == len(concs)]["mean"]  # a K measured at every one of them
    if not concs or by_k.empty:
        return None
    k = int(by_k.idxmax())
    comparisons = []
    for conc in concs:
        here, point = shared[shared["concurrency"] == conc], mine[mine["concurrency"] == conc].iloc[0]
        chosen, best = here[here["k"] == k].iloc[0], here.loc[here["speedup"].idxmax()]
        outcome, decided = compare_speedups(point, chosen)
        comparisons.append(
            Comparison(
                int(conc),
                float(chosen["speedup"]),
                float(point["speedup"]),
                outcome,
                decided,
                int(best["k"]),
                float(best["speedup"]),
            )
        )
    return Verdict(
        setup=setup,
        method=method,
        k_schedule=text,
        comparisons=tuple(comparisons),
        fixed_k=k,
        fixed_mean=float(by_k.max()),
        schedule_mean=float(mine[mine["concurrency"].isin(concs)]["speedup"].mean()),
    )
