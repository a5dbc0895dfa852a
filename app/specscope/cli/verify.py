"""``specscope verify``: what to deploy, from each measured K schedule against every fixed K of its setup."""

from __future__ import annotations

import argparse
import json

from specscope.analysis import explore, intervals, verdict
from specscope.results.store import Store

__all__ = ["register"]


def _verify(args: argparse.Namespace) -> int:
    filters = {
        key: values for key in ("model", "method", "dataset", "hardware", "run_id") if (values := getattr(args, key))
    }
    found = verdict.verdicts(explore.curves_vs_concurrency(Store(), filters))
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "setup": v.setup,
                        "schedule": v.k_schedule,
                        "deploy": v.deploy,
                        "speculative_config": v.speculative_config(),
                        "verdict": v.sentence(),
                        "fixed_k": v.fixed_k,
                        "by_concurrency": [
                            {
                                "concurrency": c.concurrency,
                                "schedule": c.scheduled,
                                "fixed": c.fixed,
                                "ratio": c.ratio,
                                "outcome": c.outcome,
                                "best_fixed_k": c.best_k,
                                "best_fixed": c.best,
                                "envelope_ratio": c.envelope_ratio,
                            }
                            for c in v.comparisons
                        ],
                    }
                    for v in found
                ],
                indent=1,
            )
        )
        return 0
    if not found:
        print("no setup measured a K schedule beside fixed K; `specscope bench ... --k-schedule auto` measures one")
        return 0
    for v in found:
        print(f"{v.setup}\n  {v.sentence()}")
        for c in v.comparisons:
            print(
                f"  concurrency {c.concurrency:>4}: schedule {intervals.times(c.scheduled)}, "
                f"K={v.fixed_k} {intervals.times(c.fixed)} ({c.outcome}), "
                f"best fixed K={c.best_k} {intervals.times(c.best)}"
            )
        print(f"  speculative_config: {json.dumps(v.speculative_config())}")
    return 0


def register(subparsers) -> None:
    """Add ``specscope verify``."""
    sp = subparsers.add_parser(
        "verify",
        help="what to deploy: each measured K schedule against the fixed K with "
        "the best mean speedup (faster somewhere and slower nowhere, beyond noise, or that K)",
    )
    for key in ("model", "method", "dataset", "hardware", "run-id"):
        sp.add_argument(f"--{key}", action="append", help="filter (repeatable)")
    sp.add_argument("--json", action="store_true", help="print a JSON array")
    sp.set_defaults(func=_verify)
