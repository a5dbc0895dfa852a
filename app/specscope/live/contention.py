"""Which Live panes' servers share CPU cores or a GPU.

Racing servers that share cores or a GPU measures how they slow each other down, not what speculation
gains: ``sharing`` finds such panes from the servers' state files, and ``default_mode`` then picks fair
replay (one pane after another, played back side by side).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TypeVar

from specscope import procfs
from specscope.launch.registry import ServerState, read_states
from specscope.live.spec import PaneSpec, host_port

__all__ = ["shared_cores", "shared_gpus", "sharing", "default_mode"]


_Held = TypeVar("_Held", int, str)  # a core number or a GPU id


def _in_common(
    specs: Iterable[PaneSpec],
    states: Iterable[ServerState] | None,
    engine: str,
    holds: Callable[[ServerState], frozenset[_Held]],
) -> dict[str, frozenset[_Held]]:
    """The panes whose servers SpecScope launched here on ``engine`` that hold something (``holds``: cores,
    GPUs; "all" for every one) in common with another pane's server: label -> what it holds."""
    if states is None:
        states = [s for s in read_states() if procfs.alive(s.pid, s.pgid)]
    launched = {host_port(s.url): s for s in states if not s.attached and s.engine == engine and s.url}
    bound = {spec.label: holds(launched[host_port(spec.url)]) for spec in specs if host_port(spec.url) in launched}
    return {
        label: held
        for label, held in bound.items()
        if any(held & other or "all" in held | other for name, other in bound.items() if name != label)
    }


def shared_cores(specs: Iterable[PaneSpec], states: Iterable[ServerState] | None = None) -> dict[str, frozenset[int]]:
    """The panes whose servers SpecScope launched on this host's CPU cores with a core in common
    with another pane's server: label -> its cores. Empty when none do, or nothing is known
    (attached servers, GPU servers, URLs SpecScope did not launch). ``states`` defaults to the
    state files of the servers that still run."""
    host_cores = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset({0})
    return _in_common(
        specs,
        states,
        "vllm-cpu",
        lambda state: procfs.cpu_binding(state.env.get("VLLM_CPU_OMP_THREADS_BIND")) or host_cores,
    )


def shared_gpus(specs: Iterable[PaneSpec], states: Iterable[ServerState] | None = None) -> dict[str, frozenset[str]]:
    """The panes whose servers SpecScope launched on this host's GPUs with a GPU in common with another
    pane's server: label -> its GPU ids (``CUDA_VISIBLE_DEVICES``, else every GPU of the host)."""

    def gpus(state: ServerState) -> frozenset[str]:
        devices = state.env.get("CUDA_VISIBLE_DEVICES")
        return frozenset(d.strip() for d in devices.split(",") if d.strip()) if devices else frozenset({"all"})

    return _in_common(specs, states, "vllm", gpus)


def sharing(specs: Iterable[PaneSpec], states: Iterable[ServerState] | None = None) -> dict[str, str]:
    """The panes whose servers share CPU cores or a GPU with another pane's: label -> what it shares,
    e.g. 'cores 0, 1' or 'GPU 0' (a race among them measures how they slow each other down)."""
    specs = list(specs)
    states = None if states is None else list(states)
    found = {
        label: f"core{'s' if len(cores) > 1 else ''} {', '.join(map(str, sorted(cores)))}"
        for label, cores in shared_cores(specs, states).items()
    }
    found.update(
        {
            label: "all GPUs" if "all" in ids else f"GPU{'s' if len(ids) > 1 else ''} {', '.join(sorted(ids))}"
            for label, ids in shared_gpus(specs, states).items()
        }
    )
    return found


def default_mode(specs: Iterable[PaneSpec], states: Iterable[ServerState] | None = None) -> str:
    """Fair replay when servers share CPU cores or a GPU (a race would measure contention), else race."""
    return "fair" if sharing(specs, states) else "race"
