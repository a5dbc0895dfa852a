"""An offline wheel set for a GPU machine without an index: vLLM VERSION, the torch stack it pins, the Python
packages both need that the machine lacks, and SpecScope's own needs, split into parts that fit a transfer limit.

    python launchers/wheelset.py --vllm 0.32.0 --have docs/gpu-image-freeze.txt --out /work/ws
    # then on the GPU machine, the parts gathered in one folder:
    cat PARTS/wheelset.tar.part* | tar -x -C /root/ws && bash /root/ws/install.sh

``--have`` is the machine's ``pip freeze``: what it has at the same version is left out. The set is walked from
vLLM's own requirements one level at a time (one ``pip download --no-deps`` per level), not solved whole: the
torch stack of a CUDA build cannot be resolved from an index that lacks some of its NVIDIA wheels, and the
machine's own CUDA libraries serve (torch names the ones it wants; ``--torch-needs`` lists those carried anyway:
NCCL, since torch imports symbols only its own release has). GPU kernel packages vLLM imports only when a
feature asks for them (``--skip``) stay out; the manifest names each. ``install.sh`` in the set installs it with
``pip install --no-index --no-deps`` into the Python it is run with, and SpecScope with ``launchers/install.sh
--use-installed --wheels``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_18_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
    "any",
)
TORCH_STACK = ("torch", "torchvision", "torchaudio")
# imported by vLLM only when a kernel, a backend or a modality asks for it: the shapes SpecScope serves need none
SKIP = (
    "flashinfer-python",
    "flashinfer-cubin",
    "tilelang",
    "nvidia-cutlass-dsl",
    "quack-kernels",
    "tokenspeed-mla",
    "humming-kernels",
    "pynvvideocodec",
    "torchcodec",
    "torchaudio",
    "instanttensor",
    "fastsafetensors",
)
TORCH_NEEDS = ("triton", "nvidia-nccl-cu13", "nvidia-nccl-cu12")
PART_BYTES = 56_000_000  # a part and the checkout travel together under a 64 MiB limit


def environment(python: str) -> dict[str, str]:
    """Marker values of a Linux x86_64 CPython ``python`` (e.g. 3.12)."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "sys_platform": "linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def requirements(wheel: Path, env: dict[str, str], extras: set[str] = frozenset()) -> list[Requirement]:
    """A wheel's Requires-Dist that apply on ``env`` with ``extras`` asked for."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode().splitlines()
    found = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
            found.append(req)
    return found


def project_requirements() -> list[Requirement]:
    """SpecScope's own dependencies (pyproject.toml), which ``install.sh --wheels`` installs from the set."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [Requirement(r) for r in data["project"]["dependencies"]]


def have(freeze: Path | None) -> dict[str, Version]:
    """``name==version`` lines of a ``pip freeze``, by canonical name."""
    found = {}
    for line in freeze.read_text().splitlines() if freeze else []:
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            found[canonicalize_name(name.strip())] = Version(version.strip())
    return found


def download(specs: list[str], into: Path, python: str) -> None:
    """``pip download --no-deps`` of ``specs`` for the GPU machine's platform."""
    if not specs:
        return
    into.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python,
            "--implementation",
            "cp",
            *platforms,
            "-d",
            str(into),
            *specs,
        ],
        check=True,
    )


def wheels(folder: Path) -> dict[str, Path]:
    """The wheels of ``folder`` by canonical name."""
    return {canonicalize_name(parse_wheel_filename(p.name)[0]): p for p in folder.glob("*.whl")}


def walk(
    roots: list[Requirement], machine: dict[str, Version], into: Path, python: str, skip: set[str], provided: set[str]
) -> tuple[list[str], list[str]]:
    """Download what ``roots`` need that ``machine`` lacks, level by level; returns the names left to the
    machine (it has a version that fits) and those skipped."""
    env = environment(python)
    kept, skipped, seen = [], [], set(provided)
    level = roots
    while level:
        wanted: dict[str, Requirement] = {}
        for req in level:
            name = canonicalize_name(req.name)
            if name in seen:
                continue
            seen.add(name)
            if name in skip:
                skipped.append(name)
            elif name in machine and req.specifier.contains(machine[name], prereleases=True):
                kept.append(name)
            else:
                wanted[name] = req
        download([f"{r.name}{r.specifier}" for r in wanted.values()], into, python)
        got = wheels(into)
        level = [dep for name, req in wanted.items() for dep in requirements(got[name], env, set(req.extras))]
    return sorted(kept), sorted(skipped)


def pack(folder: Path, out: Path, part_bytes: int) -> list[Path]:
    """``folder`` as one uncompressed tar split into parts of at most ``part_bytes``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    data = buffer.getvalue()
    parts = []
    for index, start in enumerate(range(0, len(data), part_bytes)):
        part = out / f"wheelset.tar.part{index:02d}"
        part.write_bytes(data[start : start + part_bytes])
        parts.append(part)
    return parts


INSTALL = """#!/usr/bin/env bash
# Installs this wheel set into the Python that runs it (PYTHON, default python3), without an index, then SpecScope.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${{PYTHON:-python3}}"
"$py" -m pip install -q --no-index --no-deps --no-compile {stack}
echo "wheelset: installed vLLM {vllm} and its torch stack into $py"
if [ -n "${{SPECSCOPE:-}}" ]; then
  PYTHON="$py" bash "$SPECSCOPE/launchers/install.sh" --use-installed --wheels "$here/wheels"
fi
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", required=True, help="the vLLM release, e.g. 0.32.0")
    parser.add_argument("--have", type=Path, help="the GPU machine's `pip freeze` (what it has is left out)")
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the set and its parts")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python (default 3.12)")
    parser.add_argument("--skip", default=",".join(SKIP), help="packages left out (comma-separated)")
    parser.add_argument(
        "--torch-needs",
        default=",".join(TORCH_NEEDS),
        help="torch's own requirements carried even where the machine has another version",
    )
    parser.add_argument("--part-mb", type=float, default=PART_BYTES / 1e6, help="largest part, in MB")
    args = parser.parse_args(argv)
    folder, env = args.out / "wheels", environment(args.python)
    if folder.exists() and any(folder.iterdir()):
        print(f"wheelset: {folder} is not empty; give a new --out", file=sys.stderr)
        return 2
    machine = have(args.have)
    download([f"vllm=={args.vllm}"], folder, args.python)
    vllm_reqs = requirements(wheels(folder)["vllm"], env)
    stack = {canonicalize_name(r.name): r for r in vllm_reqs if canonicalize_name(r.name) in TORCH_STACK}
    skip = {canonicalize_name(n) for n in args.skip.split(",") if n}
    download([f"{r.name}{r.specifier}" for n, r in stack.items() if n not in skip], folder, args.python)
    torch = wheels(folder)["torch"]
    needs = {canonicalize_name(n) for n in args.torch_needs.split(",") if n}
    carried = [r for r in requirements(torch, env) if canonicalize_name(r.name) in needs]
    download([f"{r.name}{r.specifier}" for r in carried], folder, args.python)
    stack_names = {"vllm", *stack, *(canonicalize_name(r.name) for r in carried)}
    torch_left = sorted(
        f"{r.name}{r.specifier}" for r in requirements(torch, env) if canonicalize_name(r.name) not in needs
    )
    others = [r for r in vllm_reqs if canonicalize_name(r.name) not in stack]
    kept, skipped = walk(others, machine, folder, args.python, skip, stack_names)
    specscope = folder.parent / "specscope"  # SpecScope's needs, installed after vLLM by install.sh --wheels
    kept_too, _ = walk(project_requirements(), {**machine, **_versions(folder)}, specscope, args.python, skip, set())
    for wheel in specscope.glob("*.whl"):
        shutil.move(str(wheel), folder / wheel.name)
    specscope.rmdir()
    names = sorted(p.name for p in folder.glob("*.whl"))
    stack_files = " ".join(f'"$here/wheels/{n}"' for n in names)
    (args.out / "install.sh").write_text(INSTALL.format(stack=stack_files, vllm=args.vllm))
    manifest = {
        "vllm": args.vllm,
        "python": args.python,
        "wheels": {
            n: {"bytes": (folder / n).stat().st_size, "sha256": hashlib.sha256((folder / n).read_bytes()).hexdigest()}
            for n in names
        },
        "left_to_the_machine": sorted((set(kept) | set(kept_too)) - set(_versions(folder))),
        "skipped": skipped,
        "torch_requires_not_carried": torch_left,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    staging = args.out / "staging"
    staging.mkdir()
    shutil.move(str(folder), staging / "wheels")
    for name in ("install.sh", "manifest.json"):
        shutil.copy(args.out / name, staging / name)
    parts = pack(staging, args.out, int(args.part_mb * 1e6))
    shutil.move(str(staging / "wheels"), folder)
    shutil.rmtree(staging)
    total = sum(p.stat().st_size for p in parts)
    print(
        f"wheelset vllm={args.vllm} wheels={len(names)} bytes={total} parts={len(parts)} "
        f"skipped={','.join(skipped) or 'none'} torch_requires_not_carried={len(torch_left)}"
    )
    return 0


def _versions(folder: Path) -> dict[str, Version]:
    """The versions of the wheels already in the set (SpecScope's walk need not fetch them again)."""
    found = {}
    for path in folder.glob("*.whl"):
        name, version, *_ = parse_wheel_filename(path.name)
        found[canonicalize_name(name)] = version
    return found


if __name__ == "__main__":
    sys.exit(main())
