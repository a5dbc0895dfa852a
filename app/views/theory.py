"""Theory: the K advisor fitted to stored results first; then the speedup model (alpha, K, c) as an illustration."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from specscope.advice import advisor, calibrate, deploy, fitting, speedup_curves, theory
from specscope.errors import SpecScopeError
from specscope.schema import BASELINE_METHOD
from ui import anatomy, cache, theory_charts
from ui.common import fragment, or_stop, plain, show_error

K_MAX = 16

st.title("Theory")
st.caption(
    "Each step, a cheap drafter guesses K tokens and the model checks them all at once: every "
    "accepted guess is a token without a step of its own. Speed comes from guesses accepted "
    "often (α) and cheap to make (c)."
)
with st.expander("Formulas"):
    st.markdown(
        "- Tokens per step, each guess accepted with chance α: (1 − α^(K+1)) / (1 − α)\n"
        "- Speedup (Leviathan et al. 2023): tokens per step / (K·c + 1), where c = the draft's "
        "step cost / the model's step cost\n"
        "- Fitted to measurements: speedup = tokens per step / (d0 + d1·K), with d0 and d1 "
        "measured per concurrency"
    )


def _load_fit_into_sliders(alpha: float, c: float) -> None:
    st.session_state["theory_illustration_open"] = True
    st.session_state["theory_alpha"] = round(min(0.99, max(0.05, alpha)), 2)
    st.session_state["theory_c"] = round(min(1.0, max(0.0, c)), 3)


@fragment
def _illustration(opened: bool = False) -> None:
    """The model with α, K and c the viewer picks: an illustration below the fitted advice, drawn once its
    expander is open (``opened``: open at first, where nothing fitted is drawn above); a slider moved reruns
    only this."""
    drawn = st.expander(
        "Illustration: the model with values you pick",
        expanded=opened,
        key="theory_illustration_open",
        on_change="rerun",
        icon=":material/tune:",
    )
    if drawn.open:
        with drawn:
            _model()


def _model() -> None:
    """The sliders, their figures and the two model curves."""
    st.caption(
        "Not advice: the sliders show what the formulas give for any α, K and c. The advice above is "
        "fitted to measured results; “Load this fit into the sliders” starts them from it."
    )
    left, mid, right = st.columns(3)
    alpha = left.slider("Acceptance rate α", 0.05, 0.99, 0.80, 0.01, key="theory_alpha")
    k = mid.slider("Speculative tokens K", 1, K_MAX, 4, 1, key="theory_k")
    cost = right.slider("Draft cost c", 0.0, 1.0, 0.05, 0.005, key="theory_c", format="%.3f")

    curves = speedup_curves.model_curves(alpha, cost, K_MAX)
    best_k = theory.optimal_k(dict(zip(curves["k"][1:], curves["speedup"][1:])))
    cols = st.columns(3)
    cols[0].metric("Tokens per step at K", f"{theory.tokens_per_step(alpha, k):.3f}")
    cols[1].metric("Speedup at K", f"{theory.leviathan_speedup(alpha, k, cost):.3f}×")
    cols[2].metric("Best K for this α and c", best_k)
    model_curves = curves.assign(curve=f"α={alpha:.2f}, c={cost:.3f}")
    left, right = st.columns(2)
    left.vega_lite_chart(
        spec=cache.vega_lite(
            "theory_model_tokens",
            lambda: theory_charts.tokens_per_step_figure(model_curves, marker_k=k, title="Model: tokens per step vs K"),
            alpha,
            cost,
            k,
        ),
        width="stretch",
        key="theory_fig_tokens",
    )
    right.vega_lite_chart(
        spec=cache.vega_lite(
            "theory_model_speedup",
            lambda: theory_charts.speedup_vs_k_figure(model_curves, marker_k=k, title="Model: speedup vs K"),
            alpha,
            cost,
            k,
        ),
        width="stretch",
        key="theory_fig_speedup",
    )


def _unfitted(frame) -> None:
    """The groups the advisor cannot fit, and what each lacks."""
    unfit = cache.unfitted(frame)
    if not unfit:
        return
    missing = st.expander(
        f"Not fitted: {len(unfit)} groups lack what the advisor needs", key="theory_unfitted_open", on_change="rerun"
    )
    if not missing.open:
        return
    with missing:
        st.caption(
            "A fit needs speedups measured at a known K and concurrency, with an acceptance "
            "rate or length. Import or run results that have them to get advice here."
        )
        st.dataframe(
            pd.DataFrame(
                {
                    "group": [fitting.family_label(keys) for keys, _ in unfit],
                    "what is missing": [problem for _, problem in unfit],
                }
            ),
            hide_index=True,
            width="stretch",
        )


def _what_if(calibration: calibrate.Calibration) -> None:
    """The speedup a drafter of the chosen α would reach on ``calibration``'s measured step cost."""
    what_alpha = st.slider("What if the drafter accepted α", 0.05, 0.99, 0.70, 0.01, key="theory_whatif_alpha")
    k_calibrated = int(calibration.cells["k"].max())
    what = calibrate.what_if(calibration, what_alpha, range(1, max(8, k_calibrated) + 1))
    st.vega_lite_chart(
        spec=cache.vega_lite(
            "theory_fig_what_if",
            lambda: theory_charts.measured_cost_figure(
                what, f"Predicted on the measured step cost, α={what_alpha:.2f}"
            ),
            what,
        ),
        width="stretch",
        key="theory_fig_what_if",
    )
    st.caption(
        "Predicted, not measured: tokens per step from α, over the step cost measured at each "
        "calibrated K and concurrency (dots) and interpolated between them (lines). "
        + (
            "The cost was measured with drafts accepted synthetically, so it does not depend on the drafter's quality."
            if calibration.synthetic
            else "The cost was measured at the drafter's own acceptance (this vLLM has no synthetic sampler); "
            "a drafter that drafts every step costs the same whatever is accepted."
        )
    )


def _schedule_table(ranges) -> str:
    """The K schedule's ranges as a Markdown table (batch sizes, K, where each K comes from)."""
    lines = ["| batch sizes | K | source |", "|---|---:|---|"]
    return "\n".join(lines + [f"| {plain(r.text())} | {r.k} | {plain(r.source)} |" for r in ranges])


st.subheader("Fitted to measured results")
frame = or_stop(cache.speedup_rows)
if frame.empty or (frame["method"] != BASELINE_METHOD).sum() == 0:
    st.info("No speculative results yet. Import results on the Explorer page or run a sweep.")
    _illustration(opened=True)
    st.stop()

left, mid, right = st.columns([3, 1, 1])
train_choice = right.selectbox("Fit on", ["all measured K", "3 smallest K per concurrency"], key="theory_train")
train_smallest = 3 if train_choice.startswith("3") else None
try:
    fits = cache.fits(train_smallest)
except SpecScopeError as exc:
    show_error(exc)
    _unfitted(frame)
    _illustration(opened=True)
    st.stop()
fits = sorted(fits, key=lambda f: -f.fitted_points)  # the family measured most first
labels = fitting.family_labels([f.keys for f in fits])
chosen = left.selectbox("Group (model · method · prompt set · hardware (source))", labels, key="theory_group")
fit = fits[labels.index(chosen)]
concs = sorted(int(c) for c in fit.rows["concurrency"].unique())
conc = mid.selectbox("Concurrency", concs, key="theory_conc")
k_top = int(fit.rows["k"].max())
candidates = list(range(1, k_top + 1))

try:
    family = cache.built("theory_family_rows", lambda: fitting.family_rows(frame, fit.keys), fit.rows, frame)
    found = cache.built("theory_answer", lambda: deploy.answer(fit, ks=candidates, rows=family), fit.rows, family)
    answer = cache.built("theory_advice", lambda: advisor.advise(fit, float(conc), ks=candidates), fit.rows, conc)
except SpecScopeError as exc:
    show_error(exc)
    _illustration(opened=True)
    st.stop()

# green only where the answer beats the baseline beyond noise wherever it was measured (``Answer.gain``)
_BOX = {"everywhere": st.success, "somewhere": st.warning, "nowhere": st.info, "unmeasured": st.info}
(_BOX[found.gain] if found.config else st.warning)(plain(found.sentence()))
if found.config:
    # Drawn when opened: the code block's highlighter is the page's largest script.
    config = st.expander(
        "speculative_config to deploy"
        + (" (extrapolated: measure it first)" if found.use_schedule and found.extrapolated else ""),
        key="theory_config_open",
        on_change="rerun",
        icon=":material/content_copy:",
    )
    if config.open:
        with config:
            st.code(json.dumps(found.config), language="json", wrap_lines=True)
st.markdown(f"**At concurrency {conc}:** " + plain(found.here(float(conc)) or answer.summary()))
st.markdown("**Why:** " + plain(answer.reason))
(st.caption if answer.validated else st.warning)(
    answer.validation()
    + (
        ""
        if answer.evidence.here_median_rel_err is not None
        else " Nothing was measured at this concurrency: the advice rests on the fit alone."
    )
)
with st.expander("The formulas behind this advice"):
    st.markdown("\n".join(f"- {line}" for line in answer.details))
st.button(
    "Load this fit into the sliders",
    key="theory_load_fit",
    on_click=_load_fit_into_sliders,
    args=(fit.alpha, answer.evidence.d1),
)

fit_lines, points = cache.built(
    "theory_fit_curves", lambda: speedup_curves.fit_curves(fit, float(conc), max(k_top, K_MAX // 2)), fit.rows, conc
)
left, right = st.columns(2)
left.vega_lite_chart(
    spec=cache.vega_lite(
        "theory_fit_tokens",
        lambda: theory_charts.tokens_per_step_figure(
            fit_lines, points, marker_k=answer.k, title=f"Fitted at concurrency {conc}: tokens per step vs K"
        ),
        fit.rows,
        conc,
    ),
    width="stretch",
    key="theory_fig_fit_tokens",
)
right.vega_lite_chart(
    spec=cache.vega_lite(
        "theory_fit_speedup",
        lambda: theory_charts.speedup_vs_k_figure(
            fit_lines, points, marker_k=answer.k, title=f"Fitted at concurrency {conc}: speedup vs K"
        ),
        fit.rows,
        conc,
    ),
    width="stretch",
    key="theory_fig_fit_speedup",
)
st.vega_lite_chart(
    spec=cache.vega_lite(
        "theory_concurrency",
        lambda: theory_charts.speedup_vs_concurrency_figure(
            *speedup_curves.concurrency_curves(fit, candidates), answer.crossover
        ),
        fit.rows,
    ),
    width="stretch",
    key="theory_fig_concurrency",
)

st.subheader("K by batch size")
st.markdown(plain(found.schedule_sentence()))
if found.use_schedule and found.extrapolated:
    st.warning(found.note, icon=":material/warning:")
st.markdown(_schedule_table(found.ranges))
st.caption(
    "Each range's K: measured (the fastest measured K at that batch size as concurrency, a tie within noise "
    "going to the smaller K), predicted by the fit between measured concurrencies (never above the K of a "
    f"smaller batch), or extrapolated past them. A range drafts 0 where that beats every K; drafting 0 is "
    f"{found.drafting_zero}."
)

calibrations = cache.calibrations(frame)
st.subheader("Step cost measured on this machine" if any(c.here for c in calibrations) else "Step cost calibrations")
if calibrations and not any(c.here for c in calibrations):
    st.caption(
        "None was measured on this machine: each below says the hardware it is from. `specscope calibrate "
        "--preset PRESET --method draft_model --prompts FILE` measures this machine's."
    )
if not calibrations:
    st.caption(
        "No step-cost calibration is stored. `specscope calibrate --preset PRESET --method draft_model "
        "--prompts FILE` measures what a speculative step costs here, with vLLM accepting drafts "
        "synthetically, so speedups can be predicted for a drafter of any acceptance."
    )
else:
    matched = calibrate.find(calibrations, fit.keys)
    names = [f"{c.label} · {'this machine' if c.here else 'host ' + str(c.keys.get('host'))}" for c in calibrations]
    name = st.selectbox(
        "Calibration (model · method · hardware · where measured)",
        names,
        key="theory_calibration",
        index=calibrations.index(matched) if matched else 0,
    )
    calibration = calibrations[names.index(name)]
    st.caption(f"Measured on {calibration.measured_on()}.")
    what_if = st.expander(
        "What if the drafter accepted α: speedup predicted on this step cost",
        key="theory_whatif_open",
        on_change="rerun",
        icon=":material/query_stats:",
    )
    if what_if.open:  # drawn when opened, like the other figures below the advice
        with what_if:
            _what_if(calibration)
    if calibration is matched:
        checked = cache.built(
            "theory_calibration_check", lambda: calibrate.compare(fit, calibration), fit.rows, calibration.cells
        )
        st.markdown("**The chosen group's acceptance on the measured step cost**, predicted beside measured:")
        st.dataframe(
            checked,
            hide_index=True,
            width="stretch",
            column_config={
                "measured": st.column_config.NumberColumn("measured ×", format="%.3f"),
                "predicted": st.column_config.NumberColumn("predicted ×", format="%.3f"),
                "rel_err": st.column_config.NumberColumn("error", format="percent"),
            },
        )

anatomy.section("theory")  # where a step goes: verify, draft, overhead

evidence = st.expander("Evidence: fit and measured points", key="theory_evidence_open", on_change="rerun")
if evidence.open:
    with evidence:
        ev = answer.evidence
        cols = st.columns(4)
        cols[0].metric("i.i.d. α", f"{ev.alpha_iid:.3f}", help=f"RMSE {ev.alpha_rmse_tokens} tokens")
        cols[1].metric(
            "Rates", f"{ev.rates_first:.3f}·{ev.rates_decay:.3f}^(i−1)", help=f"RMSE {ev.rates_rmse_tokens} tokens"
        )
        cols[2].metric(
            "Step cost D(K)",
            f"{ev.d0:.3f} + {ev.d1:.3f}·K",
            help="SD step time over the baseline step time at this concurrency",
        )
        cols[3].metric(
            "Leave-one-out error",
            "not validated" if ev.held_out_median_rel_err is None else f"{ev.held_out_median_rel_err:.1%}",
            help=f"Fitted on {ev.fitted_points} points; {ev.train_median_rel_err:.1%} on those points "
            "themselves (in-sample, not a check)",
        )
        st.dataframe(
            points,
            hide_index=True,
            width="stretch",
            column_config={
                "speedup": st.column_config.NumberColumn(format="%.3f×"),
                "predicted": st.column_config.NumberColumn(format="%.3f×"),
            },
        )
        st.caption("Cost per concurrency (d1 grows as the batch leaves the memory-bound regime):")
        st.dataframe(fit.groups, hide_index=True, width="stretch")

_unfitted(frame)
_illustration()
