"""What a Live session's panes show, side by side: each pane's view at a moment (a replay's included), and
every view's figures against the baseline's (speedup, decode and TTFT ratios, the lossless check)."""

from __future__ import annotations

from dataclasses import replace

from specscope.live.figures import answer_problem, compare_lossless, decode_and_ttft, special_tokens
from specscope.live.pane import Pane, PaneView

__all__ = ["pane_view", "compare"]


def pane_view(pane: Pane, until: float | None, replay_length_s: float, replay_started_wall: float | None) -> PaneView:
    """What ``pane`` shows up to ``until`` seconds of its recorded stream (None: all it has, live); a replay
    (``until`` set) shows it complete from ``replay_length_s``, its times counting from ``replay_started_wall``."""
    chunks = pane.snapshot(until)
    provenance, figures = pane.view_chunks(chunks)
    complete = pane.done and (until is None or until >= replay_length_s)
    texts = pane.named(provenance)
    invalid = answer_problem(pane.request, chunks) if complete and not pane.error else None
    return PaneView(
        spec=pane.spec,
        provenance=provenance,
        metrics=figures,
        token_texts=texts,
        error=pane.error if complete or until is None else None,
        done=complete,
        t0=pane.started_at if until is None else replay_started_wall,
        special=special_tokens(chunks),
        warming=pane.warming,
        cold=pane.cold,
        freshness=pane.freshness,
        invalid_reason=invalid or None,
        valid=None if invalid is None else not invalid,
    )


def compare(views: list[PaneView], greedy: bool) -> None:
    """Set every view's figures against the baseline's (the first view without speculation, else the first):
    its speedup, decode and TTFT ratios, and, where decoding is ``greedy``, whether its tokens match."""
    baseline = next((v for v in views if not v.spec.speculative), views[0])
    base_ids = [t.id for t in baseline.provenance.tokens]
    base_rate = baseline.metrics.tokens_per_s
    for view in views:
        if view is baseline:
            if base_rate and not baseline.spec.speculative:  # the baseline is 1.000x by definition
                view.metrics = replace(view.metrics, speedup=1.0)
            continue
        rate = view.metrics.tokens_per_s
        if rate and base_rate:
            view.metrics = replace(
                view.metrics, speedup=rate / base_rate, **decode_and_ttft(baseline.metrics, view.metrics)
            )
        if view.spec.synthetic:
            view.lossless_note = (
                "not applicable: drafts are accepted synthetically, at set rates whatever "
                "they say, so the output differs from the target's by design"
            )
        elif greedy and not baseline.error and not view.error:
            view.lossless, view.divergence = compare_lossless(
                base_ids, [t.id for t in view.provenance.tokens], baseline.done and view.done
            )
