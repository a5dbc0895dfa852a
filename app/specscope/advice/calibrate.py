"""Step-cost calibration: what a speculative step costs on this hardware, apart from the drafter.

vLLM's synthetic rejection sampler (``rejection_sample_method: "synthetic"``) accepts draft
position i with a set probability, whatever the drafter proposed. A sweep with it measures, at
each K and concurrency, the speedup S a known acceptance buys, so the step cost is measured:

    D(K, conc) = AL / S        (SD step time over the baseline step time, AL from /metrics)

fitted per concurrency as ``d0 + d1 * K`` (``fitting.fit_cost``) and interpolated in log2 of the
concurrency (``theory.CostCurve``). Joined with the acceptance measured on a prompt set (the
per-position rates of real runs of the same model and method), it predicts the speedup at K and
concurrencies never run: ``S = AL(K) / D(K, conc)``. Calibration rows are stored under their own
source (``CALIBRATION_SOURCE``) and never enter the advisor's fits of real results.

The calibration sweep itself is ``specscope.loop.calibration_sweep``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specscope.advice import fitting, theory
from specscope.engine import provenance
from specscope.errors import InputError
from specscope.results import identity, writing
from specscope.schema import BASELINE_METHOD, CALIBRATION_SOURCE

__all__ = [
    "CALIBRATION_SOURCE",
    "Calibration",
    "calibrated",
    "fit_cells",
    "calibrations",
    "find",
    "with_measured_cost",
    "what_if",
    "compare",
]

KEYS = ("model", "draft_model", "method", "hardware", "host")


@dataclass(frozen=True)
class Calibration:
    """Measured step cost of one (model, draft, method, hardware, host): per-cell costs and their fit."""

    keys: dict
    cells: pd.DataFrame  # concurrency, k, al, speedup, cost (= al / speedup)
    groups: pd.DataFrame  # per concurrency: d0, d1, ks
    curve: theory.CostCurve
    synthetic: bool = True  # drafts accepted synthetically (else at the drafter's own acceptance)
    origin: str = ""  # "": measured by SpecScope; else where the prior comes from (``forward_prior.ORIGIN``)

    @property
    def here(self) -> bool:
        """Whether this calibration was measured on this machine (its host is this machine's)."""
        return self.keys.get("host") == writing.host_of()

    def measured_on(self) -> str:
        """Where it was measured: ``1xH100-80GB (host bundled:vm), not on this machine`` or ``... this machine``."""
        where = f"{self.keys.get('hardware') or 'unknown hardware'} (host {self.keys.get('host') or 'unknown'})"
        return f"{where}, this machine" if self.here else f"{where}, not on this machine"

    @property
    def label(self) -> str:
        """``model · method [+ draft] · hardware``, for menus (a local draft path by its folder name)."""
        draft = self.keys.get("draft_model")
        method = self.keys["method"] + (f" + {Path(draft).name if draft.startswith('/') else draft}" if draft else "")
        return f"{self.keys['model']} · {method} · {self.keys.get('hardware') or 'no hardware'}"

    def cost(self, k: int, concurrency: float) -> float:
        """D(K, conc): a step's time in baseline steps, from the fit (interpolated between measured K)."""
        d0, d1 = self.curve.at(concurrency)
        return theory.step_cost(k, d0, d1)

    def measured(self, k: int, concurrency: float) -> bool:
        """Whether (K, concurrency) was itself calibrated (not interpolated or extrapolated)."""
        cells = self.cells
        return bool(((cells["k"] == k) & (cells["concurrency"] == concurrency)).any())


def calibrated(frame: pd.DataFrame) -> pd.Series:
    """Which of ``frame``'s rows ``calibrations`` reads: speculative rows whose drafts were accepted synthetically."""
    return provenance.engine_only(frame) & (frame["method"] != BASELINE_METHOD)


def fit_cells(cells: pd.DataFrame) -> tuple[pd.DataFrame, theory.CostCurve]:
    """Per concurrency of ``cells`` (concurrency, k, cost), ``D(K) = d0 + d1 * K`` (``fitting.fit_cost``): the
    table of d0, d1 and the K fitted, and its CostCurve over concurrency."""
    groups = []
    for conc, c in cells.groupby("concurrency"):
        d0, d1 = fitting.fit_cost(c["k"].to_numpy(), c["cost"].to_numpy())
        groups.append(
            {"concurrency": float(conc), "d0": d0, "d1": d1, "ks": ", ".join(str(int(k)) for k in sorted(c["k"]))}
        )
    table = pd.DataFrame(groups)
    return table, theory.CostCurve(tuple(table["concurrency"]), tuple(table["d0"]), tuple(table["d1"]))


def calibrations(frame: pd.DataFrame) -> list[Calibration]:
    """One Calibration per (model, draft, method, hardware, host) among ``frame``'s calibration rows and
    other rows whose drafts were accepted synthetically, e.g. engine-only GPU runs (columns of ``Store.speedup``)."""
    rows = frame[calibrated(frame)]
    rows = fitting.with_acceptance_length(rows).dropna(subset=["speedup", "k", "concurrency", "al"])
    rows = rows[(rows["k"] > 0) & (rows["speedup"] > 0)]
    out = []
    for values, g in identity.keyed(rows, KEYS).groupby(list(KEYS), sort=True):
        cells = (
            g.assign(cost=g["al"] / g["speedup"])
            .groupby(["concurrency", "k"], as_index=False)[["al", "speedup", "cost"]]
            .mean()
        )
        table, curve = fit_cells(cells)
        keys = {k: (v if v != "" else None) for k, v in zip(KEYS, values)}
        synthetic = bool(g["method_params"].map(provenance.is_synthetic).all())
        out.append(Calibration(keys, cells, table, curve, synthetic))
    return out


def find(found: Sequence[Calibration], keys: dict) -> Calibration | None:
    """The calibration of a family's model, draft, method and hardware (host too where both say it)."""
    for calibration in found:
        same = all(calibration.keys.get(k) == keys.get(k) for k in ("model", "draft_model", "method", "hardware"))
        host = calibration.keys.get("host"), keys.get("host")
        if same and (None in host or host[0] == host[1]):
            return calibration
    return None


def with_measured_cost(fit: fitting.FamilyFit, calibration: Calibration) -> fitting.FamilyFit:
    """The family's fit (its measured acceptance) with the calibrated step cost in place of its own."""
    return dataclasses.replace(fit, cost=calibration.curve)


def what_if(
    calibration: Calibration, alpha: float, ks: Sequence[int], concurrencies: Sequence[float] | None = None
) -> pd.DataFrame:
    """Predicted speedup of a drafter with i.i.d. acceptance ``alpha`` on the measured step cost:
    one row per (concurrency, K) with ``tokens_per_step``, ``cost``, ``speedup`` and ``measured_cost``
    (whether that K and concurrency were calibrated, or interpolated)."""
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"The acceptance rate must lie in [0, 1], got {alpha}.")
    concs = concurrencies or list(calibration.curve.concurrencies)
    rows = []
    for conc in concs:
        for k in ks:
            al = theory.tokens_per_step(alpha, k)
            cost = calibration.cost(k, conc)
            rows.append(
                {
                    "concurrency": float(conc),
                    "k": int(k),
                    "tokens_per_step": al,
                    "cost": cost,
                    "speedup": al / cost,  # cost >= 0.5: CostCurve keeps d0 there
                    "measured_cost": calibration.measured(k, conc),
                }
            )
    return pd.DataFrame(rows)


def compare(fit: fitting.FamilyFit, calibration: Calibration) -> pd.DataFrame:
    """Each measured (concurrency, K) of a family beside its prediction from the family's measured
    acceptance and the calibrated step cost: ``concurrency, k, measured, predicted, rel_err``."""
    predicting = with_measured_cost(fit, calibration)
    cells = fit.rows.groupby(["concurrency", "k"], as_index=False)["speedup"].mean()
    cells = cells.rename(columns={"speedup": "measured"})
    cells["predicted"] = [predicting.predict(int(k), float(c)) for c, k in zip(cells["concurrency"], cells["k"])]
    cells["rel_err"] = cells["predicted"] / cells["measured"] - 1.0
    return cells
