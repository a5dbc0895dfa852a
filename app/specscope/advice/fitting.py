"""Fits of the speedup model to measured rows: a family's acceptance and step cost.

A *family* is one (source, model, draft_model, method, dataset, response format, hardware, vLLM, weights,
acceptance); a *group* is a family at one concurrency. ``fit_family`` fits, from the family's SD rows
(any store rows: bundled, imported, own runs):

- acceptance, pooled over concurrencies (acceptance does not depend on load): a single
  i.i.d. alpha, and geometric per-position rates ``first * decay^(i-1)`` (the model used,
  since acceptance falls off with position differently from what the first position says);
  measured per-position rates are used directly when the rows carry them; or, in place of all
  of it, a named acceptance curve (``FamilyFit.with_acceptance``: a published prior, or another run's
  measured acceptance) for what-if answers on a measured step cost;
- cost, per concurrency: ``D(K) = AL / speedup = d0 + d1 * K`` by least squares, then a
  ``CostCurve`` over concurrency, so speedup is predicted at any K and concurrency (the least squares
  themselves, on arrays: ``estimate``).

``train_smallest=n`` fits each group only on its n smallest measured K (for honest
held-out checks). A fit is never called good on the points it was fitted to: ``FamilyFit.held_out``
refits the family without each measured point in turn and predicts that point (leave-one-out); with
at least ``MIN_HELD_OUT`` such predictions its median error is the fit's validated error.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from specscope.advice import priors, theory
from specscope.advice.estimate import Points, fit_alpha, fit_cost, fit_points, fit_rates
from specscope.analysis import anatomy, anatomy_cells
from specscope.engine import provenance
from specscope.errors import InputError
from specscope.results import hygiene, identity
from specscope.schema import BASELINE_METHOD, FAMILY_KEYS

__all__ = [
    "FamilyFit",
    "with_parts",
    "fit_alpha",
    "fit_rates",
    "fit_cost",
    "fit_family",
    "fit_families",
    "families",
    "family_positions",
    "family_rows",
    "family_label",
    "family_labels",
    "missing",
    "unfitted",
    "with_acceptance_length",
    "POOR_FIT",
    "MIN_HELD_OUT",
    "EXTRAPOLATE",
]

EXTRAPOLATE = 4  # how far past the largest measured concurrency a crossover is extrapolated
AL_ROUNDING = 0.01  # acceptance lengths published with two decimals
POOR_FIT = 0.10  # above this median error at a concurrency, the advice follows the measurements
MIN_HELD_OUT = 3  # held-out predictions a fit needs before its error is reported as validated


def with_acceptance_length(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with column ``al`` (tokens per step): the measured acceptance length, or
    ``1 + acceptance_rate * K`` where it agrees with it to rounding (rates carry more digits)
    or the length is missing. They disagree when steps draft fewer than K tokens (suffix)."""
    length = rows["acceptance_length"].astype(float)
    from_rate = 1.0 + rows["acceptance_rate"].astype(float) * rows["k"].astype(float)
    agrees = from_rate.notna() & (length.isna() | ((from_rate - length).abs() <= AL_ROUNDING))
    return rows.assign(al=from_rate.where(agrees, length))  # copy-on-write: the columns are shared, not copied


@dataclass
class FamilyFit:
    """The fitted model of one family, with the evidence behind it."""

    keys: dict
    alpha: float
    alpha_rmse: float
    first: float
    decay: float
    rates_rmse: float
    cost: theory.CostCurve
    groups: pd.DataFrame  # per concurrency: d0, d1, train_ks, baseline_step_ms, rmse
    rows: pd.DataFrame  # all SD rows of the family, with column `train`
    train_smallest: int | None
    measured_rates: list[float] = field(default_factory=list)
    acceptance: priors.Curve | None = None  # a named AL(K) curve in place of the fitted acceptance
    left_out: pd.DataFrame = field(default_factory=pd.DataFrame)  # cells a distorting check flags: not fitted

    def al(self, k: int) -> float:
        """Expected tokens per step at K: the named acceptance curve's, else from the measured
        per-position rates, and the fitted geometric rates past them."""
        if self.acceptance is not None:
            return self.acceptance.at(k)
        rates = theory.geometric_rates(self.first, self.decay, k)
        known = self.measured_rates[:k]
        return theory.acceptance_length(known + rates[len(known) :])

    def with_acceptance(self, curve: priors.Curve | None) -> FamilyFit:
        """This fit's measured step cost with ``curve``'s acceptance (None: the family's own)."""
        return replace(self, acceptance=curve)

    def acceptance_source(self) -> str:
        """Where the fit's AL(K) comes from, in words."""
        if self.acceptance is not None:
            return f"the acceptance curve {self.acceptance.name} ({self.acceptance.source})"
        if self.measured_rates:
            return (
                f"per-position rates measured up to position {len(self.measured_rates)}, fitted geometric rates past it"
            )
        return "geometric per-position rates fitted to the measured acceptance lengths"

    def predict(self, k: int, concurrency: float) -> float:
        """Predicted speedup at K and concurrency: tokens per step over the fitted step cost."""
        d0, d1 = self.cost.at(concurrency)
        return theory.speedup(self.al(k), k, d0, d1)

    @property
    def draft_cost(self) -> float:
        """Leviathan's c at the lowest measured concurrency (d1 there)."""
        return float(self.cost.d1[0])

    def train_error(self) -> float:
        """Median absolute relative error of predicted speedup on the training rows (in-sample)."""
        train = self.rows.loc[self.rows["train"], ["k", "concurrency", "speedup"]]
        pred = [self.predict(int(k), float(c)) for k, c in zip(train["k"], train["concurrency"])]
        return float(np.median(np.abs(np.asarray(pred) / train["speedup"].to_numpy() - 1.0)))

    @property
    def fitted_points(self) -> int:
        """How many measured points the fit was fitted to."""
        return int(self.rows["train"].sum())

    @functools.cached_property
    def held_out(self) -> pd.DataFrame:
        """Leave-one-out: each training point predicted by the family refitted without it
        (``concurrency, k, speedup, predicted, rel_err``); a point whose removal leaves nothing to
        fit has no row."""
        points = Points.of(self.rows)
        found = []
        for i in np.flatnonzero(self.rows["train"].to_numpy(dtype=bool)):
            try:
                refit = fit_points(points.without(i), self.train_smallest)
            except InputError:
                continue
            # only the refit's prediction is read: its acceptance and cost, with this fit's named curve if any
            predicted = replace(
                self,
                alpha=refit.alpha,
                first=refit.first,
                decay=refit.decay,
                cost=refit.cost,
                measured_rates=refit.measured,
            ).predict(int(points.k[i]), float(points.concurrency[i]))
            speedup = float(points.speedup[i])
            found.append(
                {
                    "concurrency": self.rows["concurrency"].iat[i],
                    "k": int(points.k[i]),
                    "speedup": speedup,
                    "predicted": predicted,
                    "rel_err": predicted / speedup - 1.0,
                }
            )
        return pd.DataFrame(found, columns=["concurrency", "k", "speedup", "predicted", "rel_err"])

    def held_out_error(self, concurrency: float | None = None) -> float | None:
        """Median |held-out prediction / measured − 1| (at ``concurrency``, or over all points); None
        with fewer than ``MIN_HELD_OUT`` held-out predictions overall, or none at that concurrency."""
        held = self.held_out
        if len(held) < MIN_HELD_OUT:
            return None
        if concurrency is not None:
            held = held[held["concurrency"] == concurrency]
        return float(np.median(np.abs(held["rel_err"]))) if len(held) else None

    @property
    def margin(self) -> float:
        """How far a prediction may be off: the validated (leave-one-out) error, else ``POOR_FIT``."""
        held = self.held_out_error()
        return POOR_FIT if held is None else held


def family_label(keys: Mapping) -> str:
    """A family's name for menus and CLI lines: its setup's name (``identity.setup_label``: model ·
    method (draft) · dataset · format · hardware · vLLM · weights/acceptance marks) and its source."""
    return f"{identity.setup_label(keys)} ({keys.get('source') or 'no source'})"


def family_labels(keys: Sequence[Mapping]) -> list[str]:
    """``family_label`` of each, with the key that tells two apart where two would read the same
    (``identity.unique_labels``), then numbered where two still would, so every menu entry is distinct."""
    labels = identity.unique_labels(list(keys), label=family_label)
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return out


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """SD rows with a speedup, K and concurrency, with their tokens per step (column ``al``)."""
    rows = with_acceptance_length(rows[rows["method"] != BASELINE_METHOD])
    rows = rows.dropna(subset=["speedup", "k", "concurrency"])
    return rows[(rows["k"] > 0) & (rows["speedup"] > 0)]


def _distorted(rows: pd.DataFrame) -> np.ndarray:
    """Which rows a check flags whose failure distorts the figure (``hygiene``): the fit leaves them out."""
    return np.array([bool(hygiene.distorting(ids)) for ids in hygiene.cell_checks(rows)], dtype=bool)


def _all_distorted(flagged: pd.DataFrame) -> str:
    """Why a family whose every usable cell is flagged cannot be fitted, and what to measure again."""
    ids = list(dict.fromkeys(i for found in hygiene.cell_checks(flagged) for i in hygiene.distorting(found)))
    return (
        f"every measured cell fails a check that distorts its figure ({hygiene.titles(ids)}), so none can "
        f"be trusted to advise from; measure them again: {hygiene.CHECKS[ids[0]].explanation}"
    )


def missing(rows: pd.DataFrame, usable: pd.DataFrame | None = None) -> str | None:
    """What one family's rows lack for a fit, in words, or None if they can be fitted (``usable``: their
    ``_usable`` rows, where the caller has them)."""
    sd = rows[rows["method"] != BASELINE_METHOD]
    if sd.empty:
        return "there is no speculative row"
    usable = _usable(sd) if usable is None else usable
    if not usable.empty and _distorted(usable).all():
        return _all_distorted(usable)
    if usable.empty:
        lacks = [
            what
            for column, what in (
                ("k", "K (speculative tokens)"),
                ("concurrency", "a concurrency (rate-limited runs, or not published)"),
                ("speedup", "a speedup (no baseline row with the same setup)"),
            )
            if sd[column].isna().all()
        ]
        return "no row states " + (" or ".join(lacks) if lacks else "a speedup, K and concurrency together")
    if usable["al"].isna().all():
        return (
            "no acceptance rate or length is given, so the tokens each step gains cannot be told "
            "apart from what drafting costs"
        )
    return None


def unfitted(frame: pd.DataFrame) -> list[tuple[dict, str]]:
    """The families of ``frame`` the advisor cannot fit, each with what it lacks (``missing``)."""
    out = []
    for keys, rows in families(frame):
        problem = missing(rows)
        if problem:
            out.append((keys, problem))
    return out


def families(frame: pd.DataFrame, engine_only: bool = False):
    """``(keys, rows)`` of each family with fixed-K speculative rows in ``frame`` (a K schedule's rows
    are what advice is checked against, not what it is fitted on: their K is the schedule's maximum).
    Drafts accepted synthetically (calibrations, engine-only GPU runs) measure the engine at a set
    acceptance, not a drafter, so no family is fitted on them unless ``engine_only`` asks for their step
    cost (a what-if answer, whose acceptance then comes from a named curve)."""
    for keys, at in family_positions(frame, engine_only):
        yield keys, frame.iloc[at]


def family_positions(frame: pd.DataFrame, engine_only: bool = False) -> list[tuple[dict, np.ndarray]]:
    """``(keys, positions)`` of each family of ``families``: where its rows lie in ``frame``, so a caller that
    has a family's answer takes none of its rows (a take of every column costs more than the grouping)."""
    keep = frame["method"] != BASELINE_METHOD
    if not engine_only:
        keep &= ~provenance.engine_only(frame)
    if "k_schedule" in frame:
        keep &= frame["k_schedule"].isna()
    at = np.flatnonzero(keep.to_numpy(dtype=bool, na_value=False))
    known = identity.keyed(frame[[k for k in FAMILY_KEYS if k in frame]].iloc[at].reset_index(drop=True), FAMILY_KEYS)
    return [
        ({k: (v if v != "" else None) for k, v in zip(FAMILY_KEYS, values)}, at[g.index.to_numpy()])
        for values, g in known.groupby(list(FAMILY_KEYS), sort=True)
    ]  # g.index: places in ``at``


def family_rows(frame: pd.DataFrame, keys: Mapping) -> pd.DataFrame:
    """The rows of ``frame`` in the family ``keys`` (a fit's ``keys``), schedules and baselines included."""
    known = identity.keyed(frame[[k for k in FAMILY_KEYS if k in frame]], FAMILY_KEYS)
    keep = np.ones(len(frame), dtype=bool)
    for k in FAMILY_KEYS:
        match = (known[k] == (keys.get(k) or "")).to_numpy().copy()
        if k == "acceptance":  # the baseline drafts nothing, so it has no acceptance kind
            match |= (known["method"] == BASELINE_METHOD).to_numpy()
        keep &= match
    return frame[keep]


def fit_family(rows: pd.DataFrame, train_smallest: int | None = None) -> FamilyFit:
    """Fit one family's SD rows (columns of ``Store.speedup``); see the module docstring."""
    usable = _usable(rows)
    problem = missing(rows, usable)
    if problem:
        raise InputError(f"These results cannot be fitted: {problem}.")
    flagged = _distorted(usable)
    left_out, usable = usable[flagged], usable[~flagged]
    rows = usable.sort_values(["concurrency", "k"]).reset_index(drop=True)
    found = fit_points(Points.of(rows), train_smallest)
    rows["train"] = found.train
    keys = {k: _scalar(rows[k].iloc[0]) if k in rows else None for k in FAMILY_KEYS}
    return FamilyFit(
        keys,
        found.alpha,
        found.alpha_rmse,
        found.first,
        found.decay,
        found.rates_rmse,
        found.cost,
        pd.DataFrame(found.groups),
        rows,
        train_smallest,
        found.measured,
        left_out=left_out,
    )


def _scalar(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def fit_families(
    frame: pd.DataFrame,
    train_smallest: int | None = None,
    fit: Callable[[np.ndarray, int | None], FamilyFit] | None = None,
    engine_only: bool = False,
    parts: pd.DataFrame | None = None,
    positions: list[tuple[dict, np.ndarray]] | None = None,
) -> list[FamilyFit]:
    """One fit per family in ``frame`` (rows of ``Store.speedup``); unfittable families are left out.

    ``fit(positions, train_smallest)`` fits the family whose rows lie at ``positions`` of ``frame`` (default
    ``fit_family`` of those rows; a cache may wrap it and take the rows only when it has no fit of them);
    ``engine_only`` fits families whose drafts were accepted synthetically too (their step cost);
    ``parts``: ``anatomy.table(frame)`` where the caller has it (a cache keeps it per setup); ``positions``:
    ``family_positions(frame, engine_only)`` likewise.
    """
    fit = fit or (lambda at, train: fit_family(frame.iloc[at], train))
    if (frame["method"] != BASELINE_METHOD).sum() == 0:
        raise InputError("No speculative rows match; widen the filters or import results first.")
    fits, skipped = [], []
    for _, at in family_positions(frame, engine_only) if positions is None else positions:
        try:
            fits.append(fit(at, train_smallest))
        except InputError as exc:
            skipped.append(str(exc))
    if not fits:
        raise InputError(
            skipped[0]
            if skipped
            else "Only step-cost calibration rows match; run or import results of a real drafter to fit."
        )
    if parts is None:
        parts = anatomy.table(frame) if anatomy_cells.NEEDED <= set(frame.columns) else pd.DataFrame()
    slopes = anatomy.all_cost_slopes(parts) if any(_one_k(f.groups) for f in fits) else {}
    return [
        with_parts(f, slopes.get(tuple(f.keys.get(k) or "" for k in anatomy.SLOPE_KEYS), {})) if _one_k(f.groups) else f
        for f in fits
    ]


def _one_k(groups: pd.DataFrame) -> list:
    """The labels of the ``groups`` (a fit's) fitted on one K only: where ``with_parts`` may use the measured parts."""
    return [i for i, ks in groups["train_ks"].items() if len(ks) == 1]


def with_parts(fit: FamilyFit, slopes: Mapping[float, float]) -> FamilyFit:
    """The fit with the cost per drafted token measured from the step's parts (``anatomy.cost_slopes``:
    the drafter's pass served alone, verify's growth with K) wherever the family was measured at one K only,
    in place of Leviathan's d0 = 1: the line still passes through the measured D(K)."""
    groups = fit.groups.copy()
    used = [i for i in _one_k(groups) if float(groups.at[i, "concurrency"]) in slopes]
    if not used:
        return fit
    groups["cost_from"] = "fit"
    for i in used:
        k, d1 = groups.at[i, "train_ks"][0], slopes[float(groups.at[i, "concurrency"])]
        measured = groups.at[i, "d0"] + groups.at[i, "d1"] * k
        groups.loc[i, ["d0", "d1", "cost_from"]] = [measured - d1 * k, d1, "measured parts"]
    cost = theory.CostCurve(tuple(float(c) for c in groups["concurrency"]), tuple(groups["d0"]), tuple(groups["d1"]))
    return replace(fit, cost=cost, groups=groups)
