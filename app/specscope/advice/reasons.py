"""Why the model picks a K and where it stops paying, in plain words and as the formulas behind them."""

from __future__ import annotations

from specscope.advice import theory
from specscope.advice.fitting import EXTRAPOLATE, FamilyFit

__all__ = ["why_k", "why_concurrency"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def why_k(fit: FamilyFit, k: int, largest: bool, d0: float, d1: float) -> tuple[str, str]:
    """Why K = k, in plain words and as the formula: one more token pays iff it adds a larger
    share of tokens per step than of step time (``ΔAL / AL > d1 / D``, i.e. ``ΔAL > d1 · S``)."""
    al, gain, cost = fit.al(k), fit.al(k + 1) - fit.al(k), theory.step_cost(k, d0, d1)
    more_tokens, more_time = gain / al, d1 / cost
    pays = more_tokens > more_time
    rule = (
        "One more draft token pays only if it adds a larger share of tokens per step than it "
        "adds to the time of a step."
    )
    step = (
        f"A {_ordinal(k + 1)} draft token would be accepted {gain:.0%} of the time, adding "
        f"{more_tokens:.0%} more tokens per step for {more_time:.0%} more time"
    )
    if largest:
        plain = f"{rule} K = {k} is the largest K considered. {step}, so a larger K " + (
            "may pay: measure one." if pays else "would not pay either."
        )
    else:
        plain = (
            f"{rule} {step}, "
            + ("so it does not pay: " if not pays else "and the tokens after it add less, so overall ")
            + f"K = {k} gives the most tokens per second."
        )
    speedup = al / cost
    formula = (
        f"At K = {k}: AL = {al:.3f} tokens per step, D = d0 + d1·K = {d0:.3f} + {d1:.3f}·{k} = "
        f"{cost:.3f} baseline steps, S = AL / D = {speedup:.3f}. K + 1 pays iff ΔAL > d1·S: "
        f"{gain:.3f} {'>' if pays else '≤'} {d1:.3f} × {speedup:.3f} = {d1 * speedup:.3f}."
    )
    return plain, formula


def why_concurrency(fit: FamilyFit, crossover: float | None, beyond: float | None) -> tuple[str, str]:
    """Where speculation stops paying, in plain words and as the cost figures behind it."""
    lo = fit.groups.iloc[0]
    top = fit.cost.concurrencies[-1]
    if crossover is None:
        plain = f" The fit predicts a gain at every measured concurrency up to {top:g}" + (
            f"; if the cost keeps growing as measured, it stops near {beyond:.0f} (not measured)."
            if beyond is not None
            else f" and, if the cost keeps growing as measured, still up to {EXTRAPOLATE * top:g} (not measured)."
        )
        return plain, f"d1 (draft cost per token, in baseline steps) = {lo.d1:.3f} at concurrency {lo.concurrency:g}."
    x0, x1 = fit.cost.at(crossover)
    plain = (
        f" Above about {crossover:.0f} concurrent requests speculation stops paying: with that "
        "many requests in each batch the hardware is busy anyway, so checking draft tokens is "
        "no longer almost free and costs more than the accepted tokens return."
    )
    formula = (
        f"At concurrency {crossover:.0f}: d0 = {x0:.3f}, d1 = {x1:.3f}, against d1 = {lo.d1:.3f} "
        f"at concurrency {lo.concurrency:g}; the best K's S = AL / D falls below 1 there."
    )
    return plain, formula
