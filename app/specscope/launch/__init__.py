"""Launched and attached vLLM servers: plan a server from a preset, start it, list, stop, attach.

    p = plan(get_preset("cpu-smollm2"), "ngram", k=4)      # ConfigError before anything starts
    state = start(p, progress=lambda stage, fraction: ...)  # waits for /health; LaunchFailed on death
    start_together(plans)                                   # several at once: [(state, LaunchFailed | None)]
    list_servers()                                          # [ServerStatus(state, status, ...)]
    stop(state.name)                                        # TERM the process group, then KILL

Each server runs in its own process group (``start_new_session``) with its output in
``servers_dir()/NAME.log`` and a JSON state file ``servers_dir()/NAME.json``, so the app and
the CLI find servers again after a restart. ``attach(url)`` records a server running
elsewhere (never stopped by SpecScope, only forgotten). ``find_reusable(plan.state)`` finds a
healthy server configured exactly like a plan, ``unused_name`` a name no live server holds. The parts:

- ``command``: pure; preset + method + K + the installed vLLM -> argv, env and state.
- ``host``: this machine's facts (installed vLLM, free port, least used core) and ``plan``.
- ``process``: start, health wait, stop, process groups.
- ``registry``: state files, list, attach, forget, ports.
- ``failures``: servers that failed to start, with the cause from their log (``failed_starts()``).
"""

from specscope.launch.command import LaunchPlan, VllmInstall
from specscope.launch.failures import FailedStart
from specscope.launch.failures import dismiss as dismiss_failure
from specscope.launch.failures import listed as failed_starts
from specscope.launch.host import plan, plan_for
from specscope.launch.process import (
    Progress,
    death,
    ready,
    restart,
    start,
    start_together,
    stop,
    stop_all,
    wait_healthy,
)
from specscope.launch.registry import (
    ServerState,
    ServerStatus,
    attach,
    cleanup_stale,
    file_tail,
    find,
    find_reusable,
    forget,
    free_port,
    list_servers,
    log_tail,
    port_in_use,
    same_config,
    unused_name,
)
from specscope.procfs import group_pids, group_rss_bytes

__all__ = [
    "ServerState",
    "ServerStatus",
    "LaunchPlan",
    "VllmInstall",
    "plan",
    "plan_for",
    "start",
    "start_together",
    "ready",
    "wait_healthy",
    "stop",
    "stop_all",
    "restart",
    "list_servers",
    "attach",
    "forget",
    "cleanup_stale",
    "log_tail",
    "file_tail",
    "group_pids",
    "group_rss_bytes",
    "free_port",
    "port_in_use",
    "Progress",
    "death",
    "find",
    "find_reusable",
    "same_config",
    "unused_name",
    "FailedStart",
    "failed_starts",
    "dismiss_failure",
]
