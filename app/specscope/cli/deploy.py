"""``specscope deploy``: the closed loop (``deploy_run``): measure the step cost with the fewest servers,
predict every method x K x concurrency, verify the advised config and its strongest fixed-K rivals, and
print the speculative_config to deploy with its measured speedups."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specscope.advice import priors
from specscope.cli import layout
from specscope.cli.bench import ProgressBar, _ints, _names, options
from specscope.loop import deploy_outcome, deploy_plan, deploy_run

__all__ = ["register", "shown"]


def _deploy(args: argparse.Namespace) -> int:
    request = deploy_plan.Request(
        preset=args.preset,
        methods=args.methods,
        concurrencies=args.concurrency,
        prompts=Path(args.prompts),
        acceptance=args.acceptance,
        probe_ks=args.probe_k,
        ks=tuple(range(1, args.max_k + 1)),
        repeats=args.repeats,
        num_prompts=args.num_prompts,
        per_concurrency=args.per_concurrency,
        output_len=args.output_len,
        run_id=args.run_id,
        max_batch=args.max_batch,
    )
    outcome = deploy_run.run(request, progress=ProgressBar(), options=options(args))
    if outcome is None:
        print("stopped before an answer; run the same command to resume")
        return 1
    print(json.dumps(outcome.as_dict(), indent=1, default=str) if args.json else shown(outcome))
    return 0


def shown(outcome: deploy_outcome.Outcome, width: int | None = None) -> str:
    """The outcome's report as printed: prose wrapped to the terminal, the config as JSON that pastes whole."""
    return "\n".join(
        layout.json_flag("--speculative-config", outcome.answer.config, indent="deploy: ", width=width)
        if line.startswith("deploy: --speculative-config")
        else layout.wrap(line, width)
        for line in outcome.report().splitlines()
    )


def register(subparsers) -> None:
    """Add ``specscope deploy``."""
    parser = subparsers.add_parser(
        "deploy",
        help="what to deploy, measured: step cost, prediction, verification, the config",
        description="Measure a step's cost with the baseline and each method at the probe K, predict every K "
        "and concurrency, serve the advised configuration (a K schedule where the best K moves with "
        "load) beside its strongest fixed-K rivals with repeats, and print the speculative_config to "
        "deploy with its measured speedup per concurrency, each prediction's error and where the time "
        "went. Every finished cell is saved: run the same command again to resume.",
    )
    parser.add_argument("--preset", required=True, help="preset name (see launchers/)")
    parser.add_argument("--methods", type=_names, required=True, help="speculative methods, e.g. eagle3,draft_model")
    parser.add_argument("--concurrency", type=_ints, default=(1, 4, 16), help="e.g. 1,4,16,64")
    parser.add_argument("--prompts", required=True, help="prompt set file")
    parser.add_argument(
        "--acceptance",
        default="measured",
        help="measured (the drafter's own, default), run:RUN_ID (another run's measured acceptance), "
        "or a published AL(K) curve: " + ", ".join(priors.PRIORS),
    )
    parser.add_argument(
        "--probe-k", type=_ints, default=(2, 4), help="the K the step cost is measured at (default 2,4)"
    )
    parser.add_argument("--max-k", type=int, default=8, help="the largest K the answer considers (default 8)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements of every cell (default %(default)s)")
    parser.add_argument("--num-prompts", type=int, default=None, help="requests per cell (default: the set's size)")
    parser.add_argument(
        "--per-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="requests per cell = N x its concurrency (at least --num-prompts)",
    )
    parser.add_argument("--output-len", type=int, default=128, help="tokens per request (default %(default)s)")
    parser.add_argument(
        "--max-batch",
        type=int,
        default=None,
        help="the schedule's largest batch size (default: the preset's max_num_seqs)",
    )
    parser.add_argument("--run-id", default=None, help="default: derived from the request, so reruns resume")
    parser.add_argument(
        "--no-sleep",
        dest="sleep_mode",
        action="store_false",
        default=None,
        help="on a GPU, stop servers after their cells instead of letting them sleep",
    )
    parser.add_argument(
        "--starts-at-once", type=int, default=None, metavar="N", help="on a GPU, start N servers together"
    )
    parser.add_argument(
        "--keep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="leave the servers running afterwards for reuse (default: on a GPU whose servers sleep)",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=_deploy)
