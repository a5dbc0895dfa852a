"""How a figure with its 95% interval reads, the same on every page, hover, table and CLI line.

The interval is written as its two bounds in brackets after the estimate, never as ``±``: a
speedup's Fieller interval is asymmetric, and ``1.32× ± 0.36`` reads as "maybe slower" where
``1.325× [1.054, 1.775]`` says "faster". Without bounds the brackets say why (one run, the
baseline, a baseline too noisy for an interval). JSON carries the same bounds as numbers
(``speedup_lo``/``speedup_hi``).

    text(1.325, 1.054, 1.775, unit="×")          # '1.325× [1.054, 1.775]'
    text(21.37, 19.8, 23.02, digits=1)           # '21.4 [19.8, 23.0]'
    row_text({"speedup": 1.3, "speedup_lo": None, "speedup_hi": None, "method": "ngram"})
                                                 # '1.300× (1 run: no interval)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["text", "bounds", "row_text", "times", "WORDS", "ONE_RUN", "TOO_NOISY", "NO_BASELINE", "TIMES"]

TIMES = "×"  # the one suffix of a speedup, on every page, hover, table and CLI line

WORDS = "95% interval in brackets"  # how a caption names the brackets
ONE_RUN = "1 run: no interval"
TOO_NOISY = "baseline too noisy for an interval"
NO_BASELINE = "no matching baseline"


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def times(value: float, digits: int = 3) -> str:
    """A speedup without an interval: ``1.325×``."""
    return f"{value:.{digits}f}{TIMES}"


def bounds(low, high, digits: int = 3) -> str:
    """``[1.054, 1.775]``; '' without both bounds."""
    low, high = _number(low), _number(high)
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def text(value, low=None, high=None, *, unit: str = "", digits: int = 3, why_none: str = ONE_RUN) -> str:
    """``1.325× [1.054, 1.775]``; without both bounds ``1.325× (why_none)``; '–' without a value."""
    value = _number(value)
    if value is None:
        return "–"
    shown, interval = f"{value:.{digits}f}{unit}", bounds(low, high, digits)
    if not interval:
        return f"{shown} ({why_none})" if why_none else shown
    if _number(low) <= 0.0 < value:  # a speedup or a throughput cannot be below 0
        return f"{shown} {interval} (low end clipped at 0)"
    return f"{shown} {interval}"


def row_text(row: Mapping, value: str = "speedup", unit: str = TIMES, short: bool = False,
             digits: int | None = None) -> str:
    """``text`` of a result row's ``value`` and its ``<value>_lo``/``_hi`` bounds, saying why a
    speedup has none (the baseline itself, no matching baseline, a noisy baseline, one run).
    ``short``: '1 run' instead of '1 run: no interval'."""
    speedup = value == "speedup"
    digits = digits if digits is not None else 3 if speedup else 1
    if _number(row.get(value)) is None:
        return NO_BASELINE if speedup else "–"
    if speedup and row.get("method") == "none":
        return text(row.get(value), unit=unit, digits=digits, why_none="baseline")
    why = TOO_NOISY if speedup and row.get("speedup_interval") == "unbounded" else \
        "1 run" if short else ONE_RUN
    return text(row.get(value), row.get(f"{value}_lo"), row.get(f"{value}_hi"), unit=unit, digits=digits,
                why_none=why)
