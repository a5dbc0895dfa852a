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
    value_text({"speedup": 1.3, "speedup_lo": None, "speedup_hi": None, "method": "ngram"})
                                                 # '1.300× (1 run: no interval)'
    value_text({"speedup": 1.587, "speedup_lo": 0.679, "speedup_hi": 2.495, "runs": 2})
                                                 # '1.587× [0.679, 2.495] (mean of 2 runs)'

An imported benchmark tool's single run (guidellm, AIPerf) takes its interval from the spread of its
requests, which covers how requests differ and not how a rerun would: it says so, ``(over one run's
requests)``.

A speedup measured in the same rounds as its run's baseline has a paired interval (``PAIRED``): on the log
scale, so it never reaches 0 and needs no "(low end clipped at 0)". How wide an interval is for a number of
repeats, and what 2 buy against the default 3 (``repeats_note``). A chart draws an interval bar no further
than a margin around its points (``drawn``): a bar that reaches past it is cut at the edge and marked, so one
huge interval does not flatten every line; the hover keeps its true bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from specscope import distributions, stats
from specscope.results import identity, tool_exports
from specscope.schema import BASELINE_METHOD

__all__ = [
    "text",
    "bounds",
    "value_text",
    "times",
    "too_few",
    "WORDS",
    "ONE_RUN",
    "TOO_NOISY",
    "NO_BASELINE",
    "MIN_GROUP",
    "TOO_FEW",
    "OVER_REQUESTS",
    "TIMES",
    "PAIRED",
    "SPEEDUP_INTERVALS",
    "DEFAULT_REPEATS",
    "width_factor",
    "repeats_note",
    "drawn",
]

TIMES = "×"  # the one suffix of a speedup, on every page, hover, table and CLI line

WORDS = "95% interval in brackets"  # how a caption names the brackets
ONE_RUN = "1 run: no interval"
TOO_NOISY = "baseline too noisy for an interval"
NO_BASELINE = "no matching baseline"
MIN_GROUP = 3  # prompts a group needs for an interval
TOO_FEW = "too few prompts"  # a group's verdict without an interval
OVER_REQUESTS = "over one run's requests"  # an imported run's interval: how requests differ, not reruns
PAIRED = "paired"  # ``speedup_interval`` of a speedup whose rounds pair with its own run's baseline's
# how a speedup's interval is made, for a page's caption
SPEEDUP_INTERVALS = (
    "paired over the rounds a cell shares with its run's baseline (each round's ratio, so a "
    "slowdown the round shares cancels), Fieller where rounds cannot pair"
)
DEFAULT_REPEATS = 3  # rounds a sweep measures by default: 2 degrees of freedom for a paired interval


def width_factor(repeats: int, than: int = DEFAULT_REPEATS) -> float:
    """How many times as wide a 95% interval over ``repeats`` is as one over ``than`` of the same spread:
    t(0.975, n - 1) / sqrt(n), the one over the other."""

    def half(n: int) -> float:
        return distributions.t_quantile(0.975, n - 1) / math.sqrt(n)

    return half(repeats) / half(than)


def repeats_note(repeats: int) -> str:
    """What a sweep's repeats buy, in one sentence, where it is fewer than the default ('' otherwise)."""
    if repeats >= DEFAULT_REPEATS:
        return ""
    if repeats <= 1:
        return "With 1 repeat no cell gets an interval: its figures stand alone."
    t = distributions.t_quantile(0.975, repeats - 1)
    return (
        f"With {repeats} repeats an interval rests on {repeats - 1} degree of freedom (t = {t:.1f}): about "
        f"{width_factor(repeats):.1f}x as wide as with {DEFAULT_REPEATS}, for one round less."
    )


def drawn(values, lows, highs, reference: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Interval bars as a chart draws them: within the points (and ``reference``, e.g. the no-gain line
    at 1) and a margin as wide as their range, at least half the largest of them, never below 0. Returns
    the drawn lows and highs (NaN where a point has none) and where each was cut at that edge."""
    values, lows, highs = (np.asarray(v, dtype=float) for v in (values, lows, highs))
    shown = values[np.isfinite(values)]
    if reference is not None:
        shown = np.append(shown, reference)
    if shown.size == 0:
        return lows, highs, np.zeros(lows.shape, bool), np.zeros(highs.shape, bool)
    top, bottom = float(shown.max()), float(shown.min())
    margin = max(top - bottom, abs(top) / 2)
    floor, ceiling = max(bottom - margin, 0.0), top + margin
    with np.errstate(invalid="ignore"):
        cut_low, cut_high = lows < floor, highs > ceiling
    return np.where(cut_low, floor, lows), np.where(cut_high, ceiling, highs), cut_low, cut_high


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


def value_text(
    row: Mapping, value: str = "speedup", unit: str = TIMES, short: bool = False, digits: int | None = None
) -> str:
    """``text`` of a result row's ``value`` and its ``<value>_lo``/``_hi`` bounds, saying why a
    speedup has none (the baseline itself, no matching baseline, a noisy baseline, one run), and
    ``(mean of 2 runs)`` where the row folds several runs (its ``runs``). ``short``: '1 run' instead of
    '1 run: no interval'."""
    speedup = value == "speedup"
    digits = digits if digits is not None else 3 if speedup else 1
    if stats.finite(row.get(value)) is None:
        return NO_BASELINE if speedup else "–"
    if speedup and row.get("method") == BASELINE_METHOD:
        return text(row.get(value), unit=unit, digits=digits, why_none="baseline")
    why = TOO_NOISY if speedup and row.get("speedup_interval") == "unbounded" else "1 run" if short else ONE_RUN
    shown = text(row.get(value), row.get(f"{value}_lo"), row.get(f"{value}_hi"), unit=unit, digits=digits, why_none=why)
    folded = identity.folded_text(row.get("runs"))
    imported = row.get("source") in tool_exports.MARKS and (stats.finite(row.get("repeats")) or 1) <= 1
    if not folded and imported and bounds(row.get(f"{value}_lo"), row.get(f"{value}_hi")):
        folded = OVER_REQUESTS  # an imported tool's one run: its spread over requests, not over reruns
    return f"{shown} ({folded})" if folded else shown
