"""The closed loop on a GPU (``specscope deploy``), from an installed SpecScope with nothing running and an
empty compile cache: the Llama-3.1-8B shape with its EAGLE-3 head, drafts accepted at a published EAGLE-3
acceptance curve's per-position rates, concurrency 1, 4, 16 and 64, three repeats, the step cost probed at K=3 and 6
(the bundled runs' own probes for --report of them). ``--method draft_model`` chooses K for the Llama-3.2-1B
draft shape instead, at a published draft-model curve: drafts that cost more, where the best K may move with load.

Usage (GPU machine, vLLM importable, models prepared and shaped):
    python tests/bench/deploy.py --home DIR [--budget 420] [--method draft_model]  # again with the same DIR to resume
    python tests/bench/deploy.py --report --run-id RUN        # any machine: the answer from stored rows
One command runs at most ``--budget`` seconds before it stops starting cells (a server wave started just
before may run past it); the next command with the same home resumes, and the wall times add up. Skips
without a GPU. Last line:
``deploy gpu=<hw> vllm=<v> wall_s=<s> servers=<n> pred_err_median=<x> answer_vs_oracle=<x>
sched_vs_best_fixed_min=<x> sched_gain_over_range=<x>``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import APP, DATA
from specscope import settings
from specscope.advice import priors
from specscope.cli.bench import ProgressBar  # noqa: E402
from specscope.engine import models, provenance  # noqa: E402
from specscope.errors import ConfigError  # noqa: E402
from specscope.launch.host import installed_vllm  # noqa: E402
from specscope.loop import deploy_outcome, deploy_plan, deploy_run
from specscope.results.store import Store

PRESET = "shape-llama31-8b-shared"
# Long contexts: the same shape with room for 16 prompts of several thousand tokens each (launchers/*-long.toml).
LONG_PRESET = "shape-llama31-8b-long"
PROMPTS = DATA / "prompts" / "code-editing.jsonl"


class Terminated(BaseException):  # past any `except Exception` in the loop
    """SIGTERM (a time limit's kill): the ledger still keeps this command's seconds."""


def _terminated(signum, frame):
    raise Terminated


NEW_RUN = dict(probe_ks=(3, 6), repeats=3, num_prompts=16, per_concurrency=8)
# Long prompts: half the requests per cell, since each prefills thousands of tokens.
LONG_RUN = dict(NEW_RUN, num_prompts=8, per_concurrency=4)
# The bundled runs' requests, so --report rebuilds what they measured. A new run probes K=3 and 6: K=2 at batch 4
# was slow on all three GPU runs (two H100s, one H200), which bent the cost line through the K=2 probe.
BUNDLED = {
    "gpu-deploy-8b-eagle3-vllm0.26.0": dict(probe_ks=(2, 5), repeats=2, num_prompts=8, per_concurrency=4),
    "gpu-deploy-8b-eagle3-r3-vllm0.26.0": dict(probe_ks=(2, 6)),
    "gpu-deploy-8b-eagle3-r4-vllm0.26.0": dict(probe_ks=(2, 6)),
    "gpu-deploy-8b-eagle3-r5-vllm0.26.0": dict(probe_ks=(3, 6)),
    "gpu-deploy-8b-eagle3-r6-vllm0.26.0": dict(probe_ks=(3, 6)),
    "gpu-deploy-8b-draft-r2-vllm0.26.0": dict(method="draft_model", concurrencies=(1, 16, 64)),
    "gpu-deploy-8b-eagle3-long3k-vllm0.26.0": dict(LONG_RUN, preset=LONG_PRESET, concurrencies=(1, 4, 16)),
}
# Each method's acceptance: EAGLE-3 at a published EAGLE-3 curve; the 1B draft at the nearest published
# draft-model curve (a 1.7B draft for a 32B target: the setup's cost is measured, its acceptance borrowed).
CURVES = {"eagle3": "eagle3-kimi-k2.5", "draft_model": "draft-qwen3-1.7b-for-32b"}


def request(
    run_id: str,
    method: str = "eagle3",
    concurrencies: tuple[int, ...] = (1, 4, 16, 64),
    prompts: Path = PROMPTS,
    preset: str = PRESET,
) -> deploy_plan.Request:
    chosen = {**(LONG_RUN if preset == LONG_PRESET else NEW_RUN), **BUNDLED.get(run_id, {})}
    method, concurrencies = chosen.pop("method", method), chosen.pop("concurrencies", concurrencies)
    preset = chosen.pop("preset", preset)
    curve = CURVES[method]
    return deploy_plan.Request(
        preset=preset,
        methods=(method,),
        concurrencies=concurrencies,
        prompts=prompts,
        acceptance=curve,
        ks=tuple(range(1, priors.named(curve).k_max + 1)),
        output_len=128,
        run_id=run_id,
        **chosen,
    )


def long_prompts(tokens: int, out: Path) -> Path:
    """The prompt set, each prompt after a different excerpt of SpecScope's own source cut to about ``tokens``
    tokens as the shapes tokenize (the demo model's tokenizer): a long-context what-if (a file to edit)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(models.model_paths().target / "tokenizer.json"))
    source = tokenizer.encode("\n".join(p.read_text() for p in sorted((APP / "specscope").rglob("*.py")))).ids
    lines = []
    for i, line in enumerate(PROMPTS.read_text().splitlines()):
        record = json.loads(line)
        start = (i * 7919) % max(1, len(source) - tokens)
        context = tokenizer.decode(source[start : start + tokens - len(tokenizer.encode(record["prompt"]).ids)])
        lines.append(json.dumps({**record, "prompt": f"The file:\n```\n{context}\n```\n\n{record['prompt']}"}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out


def _line(hardware: str, vllm: str, wall: float | None, servers: int | None, outcome: deploy_outcome.Outcome) -> str:
    figures = " ".join(f"{k}={'none' if v is None else f'{v:.3f}'}" for k, v in outcome.figures().items())
    return (
        f"deploy gpu={hardware} vllm={vllm} wall_s={'?' if wall is None else f'{wall:.0f}'} "
        f"servers={'?' if servers is None else servers} {figures}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="the SpecScope home (empty for the first command)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before this command stops starting cells")
    parser.add_argument("--run-id", default="deploy-bench-8b-eagle3")
    parser.add_argument(
        "--method",
        choices=sorted(CURVES),
        default="eagle3",
        help="the drafter the loop chooses K for (draft_model: the 1B draft's costlier drafts)",
    )
    parser.add_argument("--concurrency", default="1,4,16,64", help="the loads the answer covers (comma-separated)")
    parser.add_argument(
        "--context",
        type=int,
        default=0,
        help=f"prompts of about this many tokens (each after a long file) on {LONG_PRESET}; "
        "0: the code-editing set as it is",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="measure nothing: the loop's answer and figures from the rows the store holds for the run "
        "(the bundled H100 runs on any machine); wall time and starts are the GPU command's",
    )
    args = parser.parse_args()
    concurrencies = tuple(int(c) for c in args.concurrency.split(","))
    preset = LONG_PRESET if args.context else PRESET
    if args.report:
        outcome = deploy_run.report(request(args.run_id, args.method, concurrencies, preset=preset))
        print(outcome.report())
        rows = Store().speedup({"run_id": [args.run_id]})
        print(_line(str(rows["hardware"].iloc[0]), str(rows["vllm_version"].iloc[0]), None, None, outcome))
        return 0
    if not args.home:
        parser.error("give --home (or --report)")
    hardware = provenance.hardware_label()
    if not provenance.on_gpu(hardware):
        print(f"deploy: skipped, no GPU here ({hardware})")
        return 0
    os.environ["SPECSCOPE_HOME"] = str(Path(args.home).resolve())
    ledger = Path(args.home) / "deploy-bench.json"
    spent = json.loads(ledger.read_text()) if ledger.exists() else []
    began = time.monotonic()
    this = Counter()
    outcome, failed = None, None
    signal.signal(signal.SIGTERM, _terminated)
    try:  # a command whose cells failed or that was killed still spent its seconds: the ledger keeps them
        prompts = (
            long_prompts(args.context, Path(args.home) / f"prompts-{args.context}.jsonl") if args.context else PROMPTS
        )
        outcome = deploy_run.run(
            request(args.run_id, args.method, concurrencies, prompts, preset),
            progress=ProgressBar(sys.stderr, stamped=True),
            stop=lambda: time.monotonic() - began > args.budget,
            spent=this,
        )
    except ConfigError as exc:
        failed = str(exc)
    except Terminated:
        failed = (
            f"terminated after {time.monotonic() - began:.0f} s; the cells it finished are saved: run the same "
            "command again to resume"
        )
    entry = {
        "wall_s": time.monotonic() - began,
        "servers": this["servers"],
        "seconds": {k: v for k, v in this.items() if k != "servers"},
        "stopped": outcome is None,
        "failed": failed,
    }
    settings.home().mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps([*spent, entry], indent=1))
    if failed:
        print(f"deploy: {failed}")
        return 1
    if outcome is None:
        print(
            f"deploy: stopped after {entry['wall_s']:.0f} s (budget {args.budget:.0f} s); run again with "
            f"--home {args.home}"
        )
        return 0
    print(outcome.report())
    (Path(args.home) / "deploy-outcome.json").write_text(json.dumps(outcome.as_dict(), indent=1, default=str))
    every = [*spent, entry]
    print(
        _line(
            hardware,
            installed_vllm().version,
            sum(e["wall_s"] for e in every),
            sum(e.get("servers", 0) for e in every),
            outcome,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
