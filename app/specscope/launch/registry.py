"""The servers SpecScope knows: one JSON state file per server under ``servers_dir()``.

A launched server's file says how to find its process group again (pid, pgid, argv, log);
an attached server's file only remembers its URL. ``list_servers`` reads every file and
adds each server's status. A file this version cannot read is kept (a newer or older
SpecScope may own it) with a warning, and what it still says (pid, process group) lets
``stop`` end its server.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from specscope import access, files, procfs, settings
from specscope.client import metrics, probe
from specscope.errors import ServerError, ServerUnreachable, UnknownServer
from specscope.schema import BASELINE_METHOD

__all__ = [
    "ServerState",
    "ServerStatus",
    "Status",
    "state_path",
    "write_state",
    "remove_state",
    "read_states",
    "find",
    "list_servers",
    "cleanup_stale",
    "attach",
    "forget",
    "log_tail",
    "file_tail",
    "free_port",
    "port_in_use",
    "same_config",
    "find_reusable",
    "unused_name",
]

Status = Literal["healthy", "starting", "exited", "unreachable"]
ATTACH_TIMEOUT_S = 3.0  # per answer, when attaching
_log = logging.getLogger(__name__)
_warned: set[str] = set()


class ServerState(BaseModel):
    """What a state file holds."""

    name: str
    preset: str = ""
    method: str = BASELINE_METHOD
    kind: str = BASELINE_METHOD
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
    started_by: str = ""  # the operator session or CLI user that started or attached it
    engine: str = ""
    vllm_version: str = ""
    python: str = ""  # the interpreter whose vLLM it runs ("" = not known: attached, `vllm serve`)
    torch_version: str = ""  # that interpreter's torch, with its build
    speculative_config: dict[str, Any] = Field(default_factory=dict)
    tp: int = 1
    attached: bool = False
    idle_limit_s: float | None = None  # kept for the lease: it ends itself after this long unused (launch.kept)


class ServerStatus(BaseModel):
    """A known server and how it is doing now."""

    state: ServerState
    status: Status
    rss_bytes: int | None = None


def state_path(name: str) -> Path:
    """The state file of the server called ``name``."""
    return settings.servers_dir() / f"{name}.json"


def write_state(state: ServerState) -> None:
    """Write (or replace) a server's state file atomically."""
    files.write_atomic(state_path(state.name), state.model_dump_json(indent=1))


def remove_state(name: str) -> None:
    """Forget the server called ``name`` (its process, if any, is left alone)."""
    state_path(name).unlink(missing_ok=True)


def _salvage(path: Path, exc: Exception) -> ServerState:
    """What an unreadable state file still says: its name, and the process group to stop."""
    if str(path) not in _warned:
        _warned.add(str(path))
        _log.warning(
            "%s is not a state file this SpecScope reads (%s); it is kept, and "
            "`specscope stop %s` still ends its process group.",
            path,
            str(exc).splitlines()[0],
            path.stem,
        )
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    numbers = {key: raw[key] for key in ("pid", "pgid", "port") if type(raw.get(key)) is int}
    texts = {key: raw[key] for key in ("url", "log_path") if isinstance(raw.get(key), str)}
    return ServerState(name=path.stem, **{"url": "", **texts}, **numbers, attached=raw.get("attached") is True)


def read_states() -> list[ServerState]:
    """Every state file, by name; unreadable ones as far as they can be read."""
    states = []
    for path in sorted(settings.servers_dir().glob("*.json")):
        try:
            states.append(ServerState.model_validate_json(path.read_text()))
        except (OSError, ValueError) as exc:
            states.append(_salvage(path, exc))
    return states


def find(name: str) -> ServerState:
    """The state of the server called ``name``; UnknownServer lists the known ones."""
    states = read_states()
    for state in states:
        if state.name == name:
            return state
    names = ", ".join(s.name for s in states) or "none"
    raise UnknownServer(f"No server named {name}; known servers: {names}.")


# uvicorn's access lines for the polls SpecScope itself sends every few seconds (health, counters, model)
_POLL = re.compile(r'"GET /(?:health|metrics|v1/models|version|ping) HTTP/[\d.]+" \d+')


def log_tail(state: ServerState, lines: int = 30, *, polls: bool = True) -> str:
    """``file_tail`` of a launched server's log."""
    return file_tail(state.log_path, lines, polls=polls)


def file_tail(log_path: str | Path, lines: int = 30, *, polls: bool = True) -> str:
    """The last ``lines`` lines of a server's log file ('' when there is none); ``polls=False`` leaves
    out the access lines of /health, /metrics and /v1/models polls (a watched server's log is mostly
    those) and says how many it left out."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return ""
    kept = text.splitlines()
    if not polls:
        every = kept
        kept = [line for line in every if not _POLL.search(line)]
        if len(kept) < len(every):
            return "\n".join(
                [
                    *kept[-lines:],
                    f"({len(every) - len(kept)} lines of GET /health, /metrics and /v1/models polls left out)",
                ]
            )
    return "\n".join(kept[-lines:])


def list_servers(*, check_health: bool = True) -> list[ServerStatus]:
    """Every known server with its status; launched servers whose process is gone show 'exited'."""
    rows = []
    for state in read_states():
        status: Status
        if state.attached:
            status = "healthy" if probe.healthy(state.url) else "unreachable"
            rows.append(ServerStatus(state=state, status=status))
            continue
        if not procfs.alive(state.pid, state.pgid):
            rows.append(ServerStatus(state=state, status="exited"))
            continue
        status = "healthy" if check_health and probe.healthy(state.url) else "starting"
        # a launched server records its group; without one no process would match (0 bytes)
        rss = 0 if state.pgid is None else procfs.group_rss_bytes(state.pgid)
        rows.append(ServerStatus(state=state, status=status, rss_bytes=rss))
    return rows


def cleanup_stale() -> list[str]:
    """Remove state files of launched servers whose process is gone; returns their names."""
    access.require("clean up the server list")
    gone = [s.name for s in read_states() if not s.attached and not procfs.alive(s.pid, s.pgid)]
    for name in gone:
        remove_state(name)
    return gone


def forget(name: str) -> None:
    """Drop an attached server from the list (the server itself keeps running)."""
    access.require("forget a server")
    find(name)
    remove_state(name)


def attach(url: str, name: str | None = None) -> ServerState:
    """Check a running server (``/v1/models``, ``/version``, ``/metrics``) and remember it. Only an
    operator attaches; only http(s), each answer read within ``ATTACH_TIMEOUT_S`` and at most
    ``probe.MAX_ANSWER_BYTES``; the errors never show what the server sent."""
    actor = access.require("attach a server")
    base = probe.check_http(url)
    try:
        model_ids = [m["id"] for m in probe.models(base, ATTACH_TIMEOUT_S)]
    except probe.AnswerTooLarge:
        raise
    except ServerError as exc:
        raise ServerUnreachable(
            f"No OpenAI-compatible server answers at {base}/v1/models "
            f"({exc.__cause__.__class__.__name__}); check the URL and that it runs."
        ) from exc
    version = probe.vllm_version(base, ATTACH_TIMEOUT_S) or ""
    try:
        snapshot = metrics.scrape(base, timeout=ATTACH_TIMEOUT_S)
    except ServerError:  # /metrics may be hidden behind a proxy; the server is still usable
        snapshot = None
    spec_on = bool(snapshot and snapshot.spec_decode)
    k = (
        len(snapshot.accepted_per_position)
        if snapshot is not None and spec_on and snapshot.accepted_per_position
        else None
    )
    host_port = base.split("://", 1)[1].replace(":", "-").replace("/", "-")
    state = ServerState(
        name=name or f"attached-{host_port}",
        method="speculative" if spec_on else BASELINE_METHOD,
        kind="unknown" if spec_on else BASELINE_METHOD,
        k=k,
        model=model_ids[0] if model_ids else "",
        url=base,
        attached=True,
        vllm_version=version,
        started_at=datetime.now(UTC).isoformat(),
        started_by=actor.who,
    )
    write_state(state)
    return state


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something on this machine holds ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing holds now and no known server's state file names."""
    taken = {s.port for s in read_states()}
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in taken:
            return port


def _config_args(argv: list[str]) -> list[str]:
    """A command line without the values that only say where it listens."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--host", "--port"):
            skip = True
        elif not arg.startswith(("--host=", "--port=")):
            out.append(arg)
    return out


def same_config(a: ServerState, b: ServerState) -> bool:
    """Whether two launched servers run the same preset, method, K, vLLM and engine arguments."""
    keys = ("preset", "method", "kind", "k", "model_path", "engine", "vllm_version", "speculative_config")
    return (
        not a.attached
        and not b.attached
        and all(getattr(a, key) == getattr(b, key) for key in keys)
        and _config_args(a.argv) == _config_args(b.argv)
    )


_REUSE_HEALTH_TIMEOUT_S = 10.0  # a busy server answers /health late; a false "no" starts a second one


def find_reusable(planned: ServerState) -> ServerState | None:
    """A healthy launched server configured exactly as ``planned`` would be (None when there is none);
    only servers of that configuration are asked for their health, patiently."""
    for state in read_states():
        if (
            same_config(state, planned)
            and procfs.alive(state.pid, state.pgid)
            and probe.healthy(state.url, _REUSE_HEALTH_TIMEOUT_S)
        ):
            return state
    return None


def unused_name(name: str) -> str:
    """``name`` if no running or attached server holds it, else ``name-2``, ``name-3`` ..."""
    held = {s.name for s in read_states() if s.attached or procfs.alive(s.pid, s.pgid)}
    candidate, n = name, 1
    while candidate in held:
        n += 1
        candidate = f"{name}-{n}"
    return candidate
