"""The Explorer's headline: its counts and best speedup as one markdown sentence and a caption.

One text element instead of four metric tiles: the tiles' scripts would load ahead of the landing
figure. Names come from result files, so they are shown literally (``plain``)."""

from __future__ import annotations

import pandas as pd

from specscope.analysis import explore_text, intervals
from specscope.results import hygiene
from ui.common import plain

__all__ = ["sentence", "caption"]


def sentence(rows: int, counts: dict[str, int], top: pd.Series | None) -> str:
    """``Best speedup **2.318×** [2.2, 2.4] 95% interval over repeats on H100 · model · ... · **1,234** result
    rows`` in markdown."""
    parts = []
    if top is not None:
        spread = intervals.bounds(top["speedup_lo"], top["speedup_hi"])
        flagged = hygiene.row_ids(top)
        distorting = hygiene.distorting(flagged)
        conditions = [i for i in flagged if i not in distorting]
        parts.append(
            f"best speedup **{top['speedup']:.3f}×** "
            f"{f'{spread} 95% interval over repeats' if spread else f'({intervals.ONE_RUN})'} "
            + (f"**⚠ fails hygiene checks: {hygiene.titles(distorting)}** " if distorting else "")
            + (f"(measured under: {hygiene.titles(conditions)}) " if conditions else "")
            + f"on {plain(top['hardware'])} · {plain(str(top['model']).rsplit('/', 1)[-1])}"
        )
    parts += [
        f"**{counts['setups']}** speculative setups with a baseline",
        f"**{counts['slower']} of {counts['setups']}** slower than their baseline at some concurrency",
        f"**{rows:,}** result rows",
    ]
    text = " · ".join(parts)
    return text[0].upper() + text[1:]


def caption(
    counts: dict[str, int],
    top: pd.Series | None,
    where: tuple[str | None, int, bool] = (None, 2, False),
    passed_over: pd.Series | None = None,
) -> str:
    """What the headline counts, where its best speedup was measured and is drawn (``explore.headline_setup``),
    and the higher figure it left out because hygiene flags its cell (``explore.flagged_above``)."""
    best = ""
    if top is not None:
        best = (
            f"Best: {plain(explore_text.point_label(top))} (a real drafter; synthetic acceptance and step-cost "
            "calibrations are left out). " + _drawn(top, *where)
        )
    if passed_over is not None:
        label = plain(explore_text.point_label(passed_over))
        best += (
            f"A higher figure, {intervals.value_text(passed_over)} ({label}), "
            f"is left out: its cell fails hygiene checks ({hygiene.titles(hygiene.row_ids(passed_over))}). "
        )
    return (
        best + "A setup is one model · method (draft) · dataset · hardware of one source, with one vLLM and "
        f"torch version, real or dummy weights, real or synthetic acceptance ({counts['baselines']} baseline "
        "setups besides)."
    )


def _drawn(top: pd.Series, label: str | None, ks: int, other_version: bool) -> str:
    """Where to find the headline's number: the figure below, or why not and where instead."""
    if label is not None and ks >= 2:
        return "The figure below draws it. "
    k = f"K={top['k']:.0f}" if pd.notna(top.get("k")) else "one K"
    return (
        f"It was measured at {k} only, so the speedup-vs-K figure below (setups measured at two or more K) "
        "has no line for it: the Best K per setup tab lists it"
        + (", and the vLLM versions section below draws it beside the other version. " if other_version else ". ")
    )
