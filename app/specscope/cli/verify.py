"""``specscope verify``: what to deploy, from each measured K schedule against every fixed K of its setup."""

from __future__ import annotations

import argparse
import json

from specscope import explore, verdict
from specscope.store import Store

__all__ = ["register"]


def _verify(args: argparse.Namespace) -> int:
    filters = {key: values for key in ("model", "method", "dataset", "hardware", "run_id")
               if (values := getattr(args, key))}
    found = verdict.verdicts(explore.curves_vs_concurrency(Store(), filters))
    if args.json:
        print(json.dumps([{"setup": v.setup, "schedule": v.schedule, "deploy": v.deploy,
                           "speculative_config": v.speculative_config(), "verdict": v.sentence(),
                           "by_concurrency": [{"concurrency": c.concurrency, "best_fixed_k": c.best_k,
                                               "fixed": c.fixed, "schedule": c.scheduled, "ratio": c.ratio,
                                               "outcome": c.outcome} for c in v.comparisons]}
                          for v in found], indent=1))
        return 0
    if not found:
        print("no setup measured a K schedule beside fixed K; `specscope bench ... --k-schedule auto` measures one")
        return 0
    for v in found:
        print(f"{v.setup}\n  {v.sentence()}")
        for c in v.comparisons:
            print(f"  concurrency {c.concurrency:>4}: schedule {c.scheduled:.3f}x, best fixed K={c.best_k} "
                  f"{c.fixed:.3f}x, ratio {c.ratio:.3f} ({c.outcome})")
        print(f"  speculative_config: {json.dumps(v.speculative_config())}")
    return 0


def register(subparsers) -> None:
    """Add ``specscope verify``."""
    sp = subparsers.add_parser("verify", help="what to deploy: each measured K schedule against every fixed K "
                               "of its setup (faster somewhere and slower nowhere, beyond noise, or the best fixed K)")
    for key in ("model", "method", "dataset", "hardware", "run-id"):
        sp.add_argument(f"--{key}", action="append", help="filter (repeatable)")
    sp.add_argument("--json", action="store_true", help="print a JSON array")
    sp.set_defaults(func=_verify)
