"""launchers/wheelset.py: an offline wheel set for a GPU machine, walked from vLLM's requirements level by level,
leaving out what the machine has at a fitting version, split into parts that fit a transfer limit."""

from __future__ import annotations

import importlib.util
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from helpers.paths import LAUNCHERS

spec = importlib.util.spec_from_file_location("wheelset", LAUNCHERS / "wheelset.py")
wheelset = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wheelset)


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A wheel file with a METADATA of ``requires`` (enough for the walk, which reads only that)."""
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = "\n".join([f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)])
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    return path


def test_requirements_follow_the_gpu_machines_markers_and_the_extras_asked_for(tmp_path):
    wheel = _wheel(
        tmp_path,
        "vllm",
        "0.32.0",
        [
            "numba==0.65.0",
            'xgrammar==0.2.8; platform_machine == "x86_64"',
            'pywin32; sys_platform == "win32"',
            'six>=1.16.0; python_version > "3.11"',
            'ray; extra == "cluster"',
        ],
    )
    env = wheelset.environment("3.12")
    assert [r.name for r in wheelset.requirements(wheel, env)] == ["numba", "xgrammar", "six"]
    assert [r.name for r in wheelset.requirements(wheel, env, {"cluster"})][-1] == "ray"
    assert "six" not in [r.name for r in wheelset.requirements(wheel, wheelset.environment("3.11"))]


def test_the_walk_fetches_only_what_the_machine_lacks_and_leaves_out_skipped_kernels(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    _wheel(index, "numba", "0.65.0", ["llvmlite<0.48,>=0.47"])
    _wheel(index, "llvmlite", "0.47.0", [])
    _wheel(index, "depyf", "0.20.0", ["astor", "dill"])
    _wheel(index, "astor", "0.8.1", [])
    fetched: list[list[str]] = []

    def download(specs, into, python):  # the index: a folder of wheels, newest fitting version
        fetched.append(sorted(specs))
        into.mkdir(parents=True, exist_ok=True)
        for spec in specs:
            name = spec.split("=")[0].split("<")[0].split(">")[0].replace("-", "_")
            for wheel in index.glob(f"{name}-*.whl"):
                (into / wheel.name).write_bytes(wheel.read_bytes())

    monkeypatch.setattr(wheelset, "download", download)
    machine = wheelset.have(_freeze(tmp_path, "numba==0.68.0\ndill==0.4.1\nastor==0.8.1\n"))
    roots = [
        wheelset.Requirement(r) for r in ("numba==0.65.0", "depyf==0.20.0", "flashinfer-python==0.7.0", "torch==2.13.0")
    ]
    kept, skipped = wheelset.walk(roots, machine, tmp_path / "set", "3.12", {"flashinfer-python"}, {"torch"})
    assert fetched == [["depyf==0.20.0", "numba==0.65.0"], ["llvmlite<0.48,>=0.47"]]  # level by level
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "set").glob("*.whl")) == ["depyf", "llvmlite", "numba"]
    assert kept == ["astor", "dill"] and skipped == ["flashinfer-python"]  # numba 0.68 does not fit ==0.65.0


def _freeze(folder: Path, text: str) -> Path:
    path = folder / "freeze.txt"
    path.write_text(text)
    return path


@pytest.mark.parametrize("part_bytes", [700, 4096, 10**6])
def test_parts_fit_the_limit_and_join_back_into_the_set(tmp_path, part_bytes):
    staging = tmp_path / "staging"
    (staging / "wheels").mkdir(parents=True)
    for i in range(3):
        _wheel(staging / "wheels", f"pkg{i}", "1.0", ["x" * 400])
    (staging / "install.sh").write_text("#!/bin/sh\n")
    out = tmp_path / "out"
    out.mkdir()
    parts = wheelset.pack(staging, out, part_bytes)
    assert all(p.stat().st_size <= part_bytes for p in parts)
    joined = b"".join(p.read_bytes() for p in parts)
    with tarfile.open(fileobj=io.BytesIO(joined)) as tar:
        names = tar.getnames()
    assert "install.sh" in names and sum(n.endswith(".whl") for n in names) == 3
