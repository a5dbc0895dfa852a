"""``specscope bench``: sweep methods x K x concurrency on a preset."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from specscope import prompts, sweep
from specscope.advice import deploy, priors
from specscope.analysis import intervals
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.client.progress import ProgressEvent
from specscope.engine import vllms
from specscope.errors import ConfigError
from specscope.results import hygiene

__all__ = ["register", "run", "ProgressBar"]


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = sweep.parse_ints(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not values:
        raise argparse.ArgumentTypeError("give at least one value")
    return values


def _lengths(text: str) -> tuple[tuple[int, float], ...]:
    try:
        return sweep.parse_lengths(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    if not values:
        raise argparse.ArgumentTypeError("give at least one method, e.g. none,ngram")
    return values


class ProgressBar:
    """A one-line text progress bar on stderr for sweep events; ``stamped``: each line starts with the wall-clock
    time (a bench's log then says where a GPU command's seconds went)."""

    def __init__(self, stream=None, width: int = 30, stamped: bool = False):
        self.stream, self.width = stream or sys.stderr, width  # stderr as it is now, not at import
        self.tty = self.stream.isatty()
        self.stamped = stamped
        self.last_failure: str | None = None

    def __call__(self, event: ProgressEvent) -> None:
        if event.stage == "request" and not self.tty:
            return
        failure = event.message
        if event.stage == "cell_failed":
            failure = "the same as above" if event.message == self.last_failure else event.message
            self.last_failure = event.message
        filled = int(event.fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        detail = {
            "request": f"{event.cell} {event.requests_done}/{event.requests_total} requests",
            "server": event.message,
            "cell_start": f"{event.cell} running",
            "cell_done": f"{event.cell} done",
            "cell_skipped": f"{event.cell} finished earlier",
            "cell_failed": f"{event.cell} FAILED: {failure}",
            "sweep_done": event.message,
        }[event.stage]
        line = f"[{bar}] {event.cells_done}/{event.cells_total} cells  {detail}"
        if self.stamped:
            line = f"{time.strftime('%H:%M:%S')} {line}"
        if event.remaining:
            line += f"  ({event.remaining})"
        if self.tty and event.stage == "request":
            self.stream.write("\r" + line[:160].ljust(160))
        else:
            self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()


def _bench(args: argparse.Namespace) -> int:
    prompt_path = Path(args.prompts)
    prompt_set = prompts.load(prompt_path)
    if intervals.repeats_note(args.repeats):
        print(intervals.repeats_note(args.repeats))
    if (args.structured or sweep.structured_default(prompt_set)) != "free" and prompt_set.split_note():
        print(prompt_set.split_note())
    fields = dict(
        concurrencies=args.concurrency,
        prompts=prompt_path.resolve(),
        num_prompts=args.num_prompts,
        per_concurrency=args.per_concurrency,
        output_len=args.output_len,
        request_rate=args.request_rate,
        label=args.label,
        hardware=args.hardware,
        run_id=args.run_id,
        warmups=args.warmups,
        restart_each_cell=args.restart_each_cell,
        repeats=args.repeats,
        baseline_alongside=args.baseline_alongside,
        k_schedule=args.k_schedule,
        structured=args.structured or sweep.structured_default(prompt_set),
        vllm=vllms.parse_choices(args.vllm or ""),
    )
    if args.synthetic is not None or args.synthetic_al:
        fields.update(synthetic_acceptance=args.synthetic, synthetic_length=args.synthetic_al or ())
    if args.synthetic_curve:
        fields.update(synthetic_rates=tuple(priors.named(args.synthetic_curve).rates(max(8, *args.k))))
    if args.servers:
        spec = sweep.servers_spec(args.servers, **fields)
    else:
        spec = sweep.SweepSpec(preset=args.preset, methods=args.methods, ks=args.k, **fields)
    return run(sweep.resolve(spec, prompt_set), where(args), options(args))


def where(args: argparse.Namespace) -> sweep.Where:
    """Where the command's sweep runs: ``--ray [ADDRESS]`` on a Ray cluster, else here."""
    return sweep.OnRay(args.ray or None) if args.ray is not None else sweep.Here()


def options(args: argparse.Namespace) -> sweep.LaunchOptions:
    """The command's launch options, built once for whichever executor runs the sweep."""
    return sweep.LaunchOptions(
        sleep_mode=args.sleep_mode, starts_at_once=args.starts_at_once, keep=getattr(args, "keep", None)
    )


def run(
    plan: sweep.SweepPlan, at: sweep.Where = sweep.Here(), launch_options: sweep.LaunchOptions = sweep.LaunchOptions()
) -> int:
    """Run a sweep's plan through the one door (here under the machine's lock, or on Ray) and print its
    summary; an ``auto`` K schedule is advised from the run's own fixed-K cells (``deploy.from_results``)."""
    result = sweep.execute(plan, at, launch_options, progress=ProgressBar(), advise=deploy.from_results)
    for group in result.groups:
        what = f"schedule {group['k_schedule']}" if group["k_schedule"] else f"K={group['k']}"
        launched = group["launch"]
        span = "-".join(time.strftime("%H:%M:%S", time.localtime(group[end])) for end in ("start", "end"))
        print(
            f"  {group['method']} {what}: node {group['node'][:12]} ({group['host']}), {span} "
            f"({group['end'] - group['start']:.0f} s); servers started {launched['starts_at_once']} at once, "
            + ("sleeping between their cells" if launched["sleeps"] else "never asleep")
            + ("" if launched["sleep_mode"] is not False else " (--no-sleep)")
        )
    print(
        f"run {result.run_id}: {len(result.ran)} cells ran, {len(result.skipped)} finished in an "
        f"earlier run, {len(result.failed)} failed"
    )
    by_reason: dict[str, list[str]] = {}
    for cell_id, reason in result.failed.items():
        by_reason.setdefault(reason, []).append(cell_id)
    for reason, cell_ids in by_reason.items():
        print(f"  {', '.join(cell_ids)}: {reason}")
    for check_id, count in sweep.run_hygiene(result.run_id).items():
        if count:
            check = hygiene.CHECKS[check_id]
            print(f"  hygiene: {check.title} in {count} measurement{'s' if count > 1 else ''}. {check.explanation}")
    if result.results_path:
        print(f"results: {result.results_path}")
    if result.upload_problem:
        print(f"shared store: {result.upload_problem}")
    return 1 if result.failed else 0


def register(subparsers) -> None:
    """Add ``specscope bench``."""
    parser = subparsers.add_parser(
        "bench",
        help="sweep methods x K x concurrency on a preset's servers, or running servers",
        description="Sweep methods x K x concurrency on one preset (a running server configured "
        "exactly as a cell needs is reused, else the sweep starts its own), or measure "
        "known servers (--servers, attached or launched) over concurrency. Each finished "
        "cell is saved, so running the same command again resumes where it stopped.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--preset", help="preset name (see launchers/)")
    target.add_argument(
        "--servers",
        type=_names,
        help="names of known servers (specscope ps) to measure as they run, K fixed "
        "per server, e.g. cpu-smollm2-none,attached-gpu-node-8000",
    )
    parser.add_argument(
        "--methods",
        type=_names,
        default=("none", "ngram"),
        help="e.g. none,ngram; a method with its own K values: suffix:4, ngram:2/4",
    )
    parser.add_argument("--k", type=_ints, default=(1, 2, 4), help="K values, e.g. 1,2,4")
    parser.add_argument("--concurrency", type=_ints, default=(1, 4), help="e.g. 1,4,16")
    parser.add_argument("--prompts", required=True, help="prompt set file (JSONL, CSV, TXT, ShareGPT JSON)")
    parser.add_argument("--num-prompts", type=int, default=None, help="requests per cell (default: the set's size)")
    parser.add_argument(
        "--per-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="requests per cell = N x its concurrency (at least --num-prompts), so every "
        "concurrency runs several full batches",
    )
    parser.add_argument(
        "--output-len",
        type=int,
        default=DEFAULT_OUTPUT_LEN,
        help="tokens per request, EOS ignored (default %(default)s); a constrained request asks "
        "for the same but stops where its format closes, and one cut before that is invalid",
    )
    parser.add_argument("--request-rate", type=float, default=math.inf, help="requests/s (default: inf)")
    parser.add_argument("--warmups", type=int, default=1, help="unmeasured requests before each cell")
    parser.add_argument(
        "--restart-each-cell",
        action="store_true",
        help="a fresh server for every cell (no caches carried over, e.g. suffix's)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=intervals.DEFAULT_REPEATS,
        help="measure every cell N times, in rounds: every cell once, then again, so each speedup's "
        "interval pairs every round with the same round's baseline (default %(default)s). "
        f"{intervals.repeats_note(2)}",
    )
    parser.add_argument(
        "--baseline-alongside",
        action="store_true",
        help="where the preset runs one server at a time (a GPU): keep the baseline's "
        "server up beside it, so rounds restart only the method servers",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run each server group as a task on a Ray cluster (ADDRESS, else RAY_ADDRESS, "
        "else the cluster on this machine); needs specscope[cluster]",
    )
    parser.add_argument(
        "--no-sleep",
        dest="sleep_mode",
        action="store_false",
        default=None,
        help="on a GPU, stop each server after its cells and start it again in the next round, "
        "instead of letting it sleep between its cells (vLLM's sleep mode)",
    )
    parser.add_argument(
        "--keep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="leave the servers the sweep started running after it, for the next sweep, Live or "
        "serve to reuse; each ends itself after SPECSCOPE_IDLE_LIMIT seconds unused (default "
        "1800) or with `specscope stop` (default: on a GPU whose servers sleep)",
    )
    parser.add_argument(
        "--starts-at-once",
        type=int,
        default=None,
        metavar="N",
        help="on a GPU, start N servers together (they sleep until their cells); default: as "
        "many as the preset's gpu_memory_utilization fits on one GPU",
    )
    parser.add_argument(
        "--k-schedule",
        default=None,
        metavar="TEXT|auto",
        help="also measure each method on one server drafting K by batch size, e.g. "
        "1-2:4,3-8:2,9-256:1 (K = its maximum); auto: advised from this run's "
        "fixed-K cells once they are done (or from stored results)",
    )
    accept = parser.add_mutually_exclusive_group()
    accept.add_argument(
        "--synthetic",
        type=float,
        default=None,
        metavar="RATE",
        help="accept draft position i at RATE^i whatever the drafter proposes (vLLM's synthetic "
        "rejection sampler; GPU vLLM): the engine's speedup at a chosen acceptance",
    )
    accept.add_argument(
        "--synthetic-curve",
        default=None,
        metavar="NAME",
        help="accept drafts synthetically at a published AL(K) curve's per-position rates, so every "
        "K (and a K schedule's smaller K) accepts at the curve's length: " + ", ".join(priors.PRIORS),
    )
    accept.add_argument(
        "--synthetic-al",
        type=_lengths,
        default=None,
        metavar="AL|K=AL,...",
        help="accept drafts synthetically at this mean acceptance length, e.g. 2.8, or one per K, "
        "e.g. 4=2.9,6=3.4 (to replay a published table's acceptance)",
    )
    parser.add_argument(
        "--structured",
        choices=sweep.STRUCTURED,
        default=None,
        help="run each cell without the prompts' response formats (free), with them "
        "(constrained: only the prompts that carry one, and their baseline likewise) or both; "
        "default: both when the set's prompts carry formats",
    )
    parser.add_argument(
        "--vllm",
        default=None,
        metavar="VERSION|PYTHON,...",
        help="run the preset on these vLLMs, one after the other in each round, each with its own "
        "baseline: versions installed by launchers/install.sh --vllm VERSION (this "
        "interpreter's own version names it), or Python paths, e.g. 0.30.0,0.32.0",
    )
    parser.add_argument("--label", default=None)
    parser.add_argument(
        "--hardware",
        default=None,
        help="default: this machine's GPUs as nvidia-smi names them (e.g. 1xH100-80GB), else cpu-<cores>core",
    )
    parser.add_argument("--run-id", default=None, help="default: derived from the sweep, so reruns resume")
    parser.set_defaults(func=_bench)
