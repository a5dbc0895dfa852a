"""``specscope oracle``: the oracle bound of SpecDecode-Bench's per-request acceptance traces.

Each trace gives, at every generated position, how many tokens a step starting there would emit; the
oracle drafts what would be accepted (within ``--k-max``), each fixed K drafts K at every step, both under
the simulator's H100 cost model for Llama-3.1-8B (``oracle.SIMULATOR_H100_8B``). SpecScope's own runs get
their oracle bound from ``specscope speedup --json`` (``oracle_speedup``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specscope.analysis import oracle
from specscope.errors import ConfigError

__all__ = ["register"]


def _ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in text.split(",") if k.strip()]
    except ValueError as exc:
        raise ConfigError(f"--k {text!r} is not a comma-separated list of whole numbers, e.g. 1,3,5.") from exc
    if not ks or min(ks) < 1:
        raise ConfigError("--k needs K values of at least 1, e.g. 1,3,5.")
    return ks


def _oracle(args: argparse.Namespace) -> int:
    traces = oracle.read_trace(Path(args.trace), args.method)
    if not traces:
        raise ConfigError(f"{args.trace} holds no {args.method} trace as long as its output.")
    found = oracle.trace_summary(traces, _ks(args.k), args.k_max)
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    print(
        f"{found['requests']} requests: oracle (K <= {args.k_max}) {found['oracle']:.3f}×; "
        f"best fixed K={found['best_k']} {found['best_fixed']:.3f}×; "
        + ", ".join(f"K={k} {s:.3f}×" for k, s in found["fixed"].items())
    )
    return 0


def register(subparsers) -> None:
    """Add ``specscope oracle``."""
    sp = subparsers.add_parser(
        "oracle",
        help="the oracle bound of SpecDecode-Bench's acceptance traces against fixed K",
        description=__doc__.splitlines()[0],
    )
    sp.add_argument("trace", metavar="TRACE.jsonl", help="a SpecDecode-Bench combined_<dataset>.jsonl")
    sp.add_argument("--method", choices=("ngram", "eagle"), default="ngram")
    sp.add_argument("--k", default="1,2,3,4,5", help="fixed K values to compare, e.g. 1,3,5")
    sp.add_argument("--k-max", type=int, default=20, help="the most the oracle drafts in a step")
    sp.add_argument("--json", action="store_true", help="print a JSON object")
    sp.set_defaults(func=_oracle)
