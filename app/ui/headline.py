"""The Explorer's headline: its counts and best speedup as one markdown sentence and a caption.

One text element instead of four metric tiles: the tiles' scripts would load ahead of the landing
figure. Names come from result files, so they are shown literally (``plain``)."""

from __future__ import annotations

import pandas as pd

from specscope import explore, intervals
from ui.common import plain

__all__ = ["sentence", "caption"]


def sentence(rows: int, counts: dict[str, int], top: pd.Series | None) -> str:
    """``Best speedup **2.318×** [2.2, 2.4] 95% interval over repeats on H100 · model · ... · **1,234** result
    rows`` in markdown."""
    parts = []
    if top is not None:
        spread = intervals.bounds(top["speedup_lo"], top["speedup_hi"])
        parts.append(f"best speedup **{top['speedup']:.3f}×** "
                     f"{f'{spread} 95% interval over repeats' if spread else f'({intervals.ONE_RUN})'} "
                     f"on {plain(top['hardware'])} · {plain(str(top['model']).rsplit('/', 1)[-1])}")
    parts += [f"**{counts['setups']}** speculative setups with a baseline",
              f"**{counts['slower']} of {counts['setups']}** slower than their baseline at some concurrency",
              f"**{rows:,}** result rows"]
    text = " · ".join(parts)
    return text[0].upper() + text[1:]


def caption(counts: dict[str, int], top: pd.Series | None) -> str:
    """What the headline counts, and where its best speedup was measured."""
    best = (f"Best: {plain(explore.point_label(top))} (a real drafter; synthetic acceptance and step-cost "
            "calibrations are left out). ") if top is not None else ""
    return (best + "A setup is one model · method (draft) · dataset · hardware of one source, with one vLLM and "
            f"torch version, real or dummy weights, real or synthetic acceptance ({counts['baselines']} baseline "
            "setups besides).")
