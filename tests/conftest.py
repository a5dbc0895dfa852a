"""Shared fixtures: a throwaway SpecScope home, and CI's rule that a skip of a real-part test is a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RUIZ_PARQUET = SHARED_DATA / "tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet"
IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def specscope_home(tmp_path, monkeypatch) -> Path:
    """An empty SPECSCOPE_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("SPECSCOPE_HOME", str(home))
    return home


@pytest.fixture
def ruiz_parquet() -> Path:
    if not RUIZ_PARQUET.exists():
        pytest.skip(f"{RUIZ_PARQUET} is missing; tests read the published Ruiz results from ../shared/data")
    return RUIZ_PARQUET


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true, .ci/run installs vLLM, Chromium and the data: a skip there hides a broken install."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and call.when in ("setup", "call"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which counts as a failure: {report.longrepr}"
