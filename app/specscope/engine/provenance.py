"""Where a row was measured: the accelerator, the vLLM and torch it ran on, dummy or real weights,
drafts accepted by the target or synthetically.

    hardware_label()                    # '1xH100-80GB' on an H100 box, 'cpu-16core' without a GPU
    gpu_label("NVIDIA H100 80GB HBM3, 81559\\n")   # '1xH100-80GB'
    torch_version()                     # '2.11.0+cu130', '2.13.0+cpu'
    weights_kind(argv)                  # 'dummy' when the server ran --load-format dummy, else 'real'
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path

from specscope.schema import BASELINE_METHOD, CALIBRATION_SOURCE

__all__ = [
    "gpu_label",
    "gpu_count",
    "on_gpu",
    "nvidia_smi",
    "hardware_label",
    "torch_version",
    "torch_label",
    "weights_kind",
    "acceptance_kind",
    "synthetic_rows",
    "is_synthetic",
    "engine_only",
    "marks",
    "NVIDIA_SMI_QUERY",
    "SYNTHETIC",
    "DUMMY",
]

NVIDIA_SMI_QUERY = ("--query-gpu=name,memory.total", "--format=csv,noheader,nounits")
# the ``acceptance`` and ``weights`` that measure the engine only; SYNTHETIC is also the rejection_sample_method
# of vLLM's sampler that accepts drafts at set rates, whatever they are
SYNTHETIC, DUMMY = "synthetic", "dummy"


def _gpu_name(name: str, mib: float) -> str:
    """'NVIDIA H100 80GB HBM3', 81559 -> 'H100-80GB'; the memory from the name where it says it."""
    name = re.sub(r"^(NVIDIA|Tesla)\s+", "", name.strip())
    stated = re.search(r"(\d+)\s*GB", name)
    memory = f"{stated.group(1) if stated else round(mib / 1024)}GB"
    model = re.split(r"[\s\-]", name, maxsplit=1)[0] or "GPU"
    return f"{model}-{memory}"


def gpu_label(smi_csv: str) -> str | None:
    """The accelerator label from ``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits``:
    ``1xH100-80GB``, ``8xA100-40GB``, mixed cards joined by ``+``; None when it lists no GPU."""
    cards: Counter[str] = Counter()
    for line in smi_csv.strip().splitlines():
        name, _, memory = line.rpartition(",")
        try:
            cards[_gpu_name(name, float(memory))] += 1
        except ValueError:
            continue
    return "+".join(f"{count}x{card}" for card, count in cards.items()) or None


def gpu_count(hardware: str | None) -> int | None:
    """The GPUs a hardware label names (``gpu_label``'s ``2xH200-140GB``: 2); None for a CPU (``cpu-2core``)."""
    found = re.match(r"^(\d+)\s*x", str(hardware or ""))
    return int(found.group(1)) if found else None


def on_gpu(hardware: str | None) -> bool:
    """Whether a hardware label names GPUs (``gpu_label``'s ``1xH200-140GB``), not a CPU (``cpu-2core``)."""
    return gpu_count(hardware) is not None


@lru_cache(maxsize=1)
def nvidia_smi() -> str:
    """What `nvidia-smi` says of the GPUs here (name, memory in MiB per line); empty without one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        done = subprocess.run([smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def visible_cards(smi_csv: str) -> str:
    """The lines of ``smi_csv`` (one a GPU, in nvidia-smi's order) that ``CUDA_VISIBLE_DEVICES`` leaves visible."""
    chosen = os.environ.get("CUDA_VISIBLE_DEVICES")
    lines = [line for line in smi_csv.strip().splitlines() if line.strip()]
    if chosen is None:
        return "\n".join(lines)
    ids = [d.strip() for d in chosen.split(",") if d.strip()]
    if not all(d.isdigit() for d in ids):  # UUIDs: as many cards as named
        return "\n".join(lines[: len(ids)])
    return "\n".join(lines[int(d)] for d in ids if int(d) < len(lines))


def hardware_label() -> str:
    """A short name for this machine (``$SPECSCOPE_HARDWARE`` wins): the GPUs it may use (those
    ``CUDA_VISIBLE_DEVICES`` names, else all), else ``cpu-<N>core``."""
    return os.environ.get("SPECSCOPE_HARDWARE") or gpu_label(visible_cards(nvidia_smi())) or f"cpu-{os.cpu_count()}core"


@cache
def torch_version(python: str | None = None) -> str | None:
    """The torch of this interpreter (or of ``python``, another one) with its CUDA build (``2.11.0+cu130``;
    ``+cpu`` without CUDA), read from its files without importing it; None without torch."""
    if python is not None:
        from specscope.engine import vllms

        found = vllms.facts(python)
        return torch_label(found.torch, found.torch_dir)
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec("torch")
    folder = Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None
    return torch_label(version, folder)


def torch_label(version: str | None, folder: Path | None) -> str | None:
    """A torch distribution version with its build: the CUDA one its ``version.py`` names, else ``+cpu``."""
    if version is None:
        return None
    base = version.split("+")[0]
    version_py = folder / "version.py" if folder is not None else None
    text = version_py.read_text() if version_py and version_py.is_file() else ""
    cuda = re.search(r"^cuda[^=]*=\s*['\"]([\d.]+)['\"]", text, re.MULTILINE)
    if cuda:
        return f"{base}+cu{cuda.group(1).replace('.', '')}"
    return version if "+" in version else f"{base}+cpu"


def weights_kind(argv: Sequence[str]) -> str:
    """``dummy`` when a server's command line loads random weights (``--load-format dummy``), else ``real``."""
    args = list(argv)
    for i, arg in enumerate(args):
        if (arg == "--load-format" and i + 1 < len(args) and args[i + 1] == DUMMY) or arg == "--load-format=dummy":
            return DUMMY
    return "real"


def acceptance_kind(method: str, synthetic: bool) -> str | None:
    """How a row's drafts were accepted: ``synthetic`` (set rates), ``real`` (by the target); None for
    the baseline, which drafts nothing."""
    if method == BASELINE_METHOD:
        return None
    return SYNTHETIC if synthetic else "real"


def synthetic_rows(frame):
    """Which rows of a results frame accepted drafts synthetically (False where it has no ``acceptance``)."""
    return frame["acceptance"].eq(SYNTHETIC) if "acceptance" in frame else False


def is_synthetic(method_params: str | None) -> bool:
    """Whether a row's speculative_config (its ``method_params`` JSON) accepted drafts synthetically."""
    try:
        config = json.loads(method_params) if method_params else {}
    except ValueError:
        return False
    return isinstance(config, dict) and config.get("rejection_sample_method") == SYNTHETIC


def engine_only(frame):
    """Which rows of a results frame measured the engine, not a drafter: a step-cost calibration or any
    other run whose drafts were accepted synthetically."""
    return frame["source"].eq(CALIBRATION_SOURCE) | synthetic_rows(frame)


def marks(row) -> str:
    """``dummy weights, synthetic acceptance`` for a row or setup that measured the engine only; '' otherwise."""
    return ", ".join(f"{row.get(key)} {key}" for key in ("weights", "acceptance") if row.get(key) in (DUMMY, SYNTHETIC))
