"""The GPUs of this node as servers use them: which are visible, how they split into slots of a
server's tensor-parallel size, and what a slot is called in result rows.

    visible()                  # ['0', '1', '2', '3'] (CUDA_VISIBLE_DEVICES when set, else nvidia-smi)
    slots(['0', '1', '2', '3'], tp=2)   # ['0,1', '2,3']: one server on each
    label('2,3')               # '2xH100-80GB': the hardware of a server placed there
    memory_bytes('0')          # 85520809984: the smallest card's memory of that slot
    free_bytes('0')            # what the least free card of that slot has free now
"""

from __future__ import annotations

import os
import shutil
import subprocess

from specscope.engine import provenance

__all__ = ["visible", "slots", "label", "memory_bytes", "free_bytes"]


def _cards() -> list[str]:
    return [line for line in provenance.nvidia_smi().strip().splitlines() if line.strip()]


def visible() -> list[str]:
    """The GPU ids servers may use here: ``CUDA_VISIBLE_DEVICES`` when set, else every GPU nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    return [str(i) for i in range(len(_cards()))]


def slots(devices: list[str], tp: int = 1) -> list[str]:
    """``devices`` split into whole slots of ``tp`` GPUs each (a remainder stays unused)."""
    if tp < 1:
        raise ValueError("tensor parallelism is at least 1")
    return [",".join(devices[i : i + tp]) for i in range(0, len(devices) - tp + 1, tp)]


def label(slot: str) -> str | None:
    """The hardware label of a server on ``slot`` (``1xH100-80GB``), from the cards nvidia-smi lists;
    None when it lists none."""
    cards = _cards()
    ids = [d.strip() for d in slot.split(",") if d.strip()]
    chosen = [cards[int(d)] for d in ids if d.isdigit() and int(d) < len(cards)] or cards[: len(ids)]
    return provenance.gpu_label("\n".join(chosen))


def memory_bytes(slot: str) -> int | None:
    """The memory of the smallest card of ``slot`` in bytes, from nvidia-smi; None when it lists none."""
    cards = _cards()
    ids = [int(d) for d in slot.split(",") if d.strip().isdigit() and int(d) < len(cards)]
    mib = []
    for line in [cards[i] for i in ids] or cards[:1]:
        try:
            mib.append(float(line.rpartition(",")[2]))
        except ValueError:
            continue
    return int(min(mib) * 2**20) if mib else None


def free_bytes(slot: str) -> int | None:
    """The free memory of the least free card of ``slot`` in bytes, from nvidia-smi; None without an answer."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    free = [line.strip() for line in done.stdout.splitlines() if line.strip().isdigit()]
    ids = [int(d) for d in slot.split(",") if d.strip().isdigit() and int(d) < len(free)]
    chosen = [int(free[i]) for i in ids] or [int(f) for f in free[:1]]
    return min(chosen) * 2**20 if chosen else None
