"""SpecScope on a real GPU: engine-only measurement of model shapes (dummy weights, synthetic acceptance),
and a replay of Ruiz (2026)'s Qwen3-32B table on 1xH100 without its weights.

Each phase is one resumable sweep (``SPECSCOPE_HOME`` keeps its cells), sized to end inside a
10-minute GPU command; ``report`` reads the stored rows (on the GPU machine or wherever the result
Parquet files were copied) and prints the comparison with Ruiz's measured speedups.

- ``engine``: the Llama-3.1-8B shape, baseline and a 1-layer EAGLE-3 head at K=2 (drafts accepted at a
  mean length of 2.0) and K=4 (3.0), concurrency 1 and 16. The step cost D(K) = AL / speedup at c=1
  gives ``dk_c1`` (a + b*K).
- ``ruiz-eagle3``, ``ruiz-draft``, ``ruiz-4b``: the Qwen3-32B shape at concurrency 1, 16 and 64, one run id:
  the baseline, then the EAGLE-3 head at K=3, the Qwen3-1.7B draft at K=4, the Qwen3-4B draft at K=3,
  each with drafts accepted at Ruiz's measured acceptance length for that drafter and K.

Without a GPU every phase but ``report`` prints why it skipped and exits 0. Last line of ``report``:
``gpu device=<name> vllm=<version> base_c1_tps=<x> base_c16_tps=<x> eagle3_k4_c1_synth_al3_x=<x>
dk_c1=<a>+<b>K ruiz_cells=<n> ruiz_median_abs_err=<fraction>``.
Run (GPU machine): python tests/bench/gpu.py --phase engine; ... --phase report --ruiz FILE
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import pandas as pd

from helpers.paths import DATA, SHARED_DATA
from specscope import settings, sweep
from specscope.cli.bench import ProgressBar
from specscope.engine import provenance
from specscope.results.store import Store

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
RUIZ = SHARED_DATA / "tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet"
TRACES = SHARED_DATA / "specdecode-bench_simulator_2fdccbd"
ENGINE_RUN, RUIZ_RUN = "gpu-llama31-8b-eagle3-synthetic", "gpu-qwen3-32b-ruiz-replay"
# preset method -> (Ruiz's draft_model, K, Ruiz's mean acceptance length at that K over concurrency)
RUIZ_METHODS = {
    "eagle3": ("RedHatAI/Qwen3-32B-speculator.eagle3", 3, 2.18),
    "draft_model": ("Qwen/Qwen3-1.7B", 4, 2.85),
    "draft_4b": ("Qwen/Qwen3-4B", 3, 2.81),
}
PHASES = {"ruiz-eagle3": ("none", "eagle3"), "ruiz-draft": ("draft_model",), "ruiz-4b": ("draft_4b",)}


progress = ProgressBar(sys.stdout, stamped=True)


def run(spec: sweep.SweepSpec) -> None:
    result = sweep.run_sweep(spec, sweep.launcher_for(spec), progress=progress)
    print(
        f"run {result.run_id}: {len(result.ran)} ran, {len(result.skipped)} finished earlier, "
        f"{len(result.failed)} failed"
    )
    for cell_id, reason in result.failed.items():
        print(f"  {cell_id}: {reason}")


def engine_phase() -> None:
    run(
        sweep.SweepSpec(
            preset="shape-llama31-8b",
            methods=("none", "eagle3"),
            ks=(2, 4),
            concurrencies=(1, 16),
            prompts=PROMPTS,
            num_prompts=8,
            per_concurrency=4,
            output_len=128,
            warmups=2,
            synthetic_length=((2, 2.0), (4, 3.0)),
            run_id=ENGINE_RUN,
            label="Llama-3.1-8B shape, EAGLE-3 head, synthetic acceptance",
        )
    )


def ruiz_phase(methods: tuple[str, ...]) -> None:
    lengths = tuple((RUIZ_METHODS[m][1], RUIZ_METHODS[m][2]) for m in methods if m in RUIZ_METHODS)
    for method in methods:
        ks = (RUIZ_METHODS[method][1],) if method in RUIZ_METHODS else ()
        run(
            sweep.SweepSpec(
                preset="shape-qwen3-32b",
                methods=(method if not ks else f"{method}:{ks[0]}",),
                ks=(),
                concurrencies=(1, 16, 64),
                prompts=PROMPTS,
                num_prompts=8,
                per_concurrency=4,
                output_len=128,
                warmups=2,
                synthetic_length=lengths if ks else (),
                run_id=RUIZ_RUN,
                label="Qwen3-32B shape, Ruiz (2026) acceptance replayed synthetically",
            )
        )


def _ruiz_speedups(path: Path) -> pd.DataFrame:
    table = pd.read_parquet(path)
    qwen = table[table["analysis"] == "qwen"]
    base = qwen[qwen["sd_method"] == "None"].set_index("concurrency")["output_token_throughput"]
    sd = qwen[qwen["sd_method"] != "None"].copy()
    sd["ruiz_speedup"] = sd["output_token_throughput"] / sd["concurrency"].map(base)
    return sd.rename(columns={"num_spec_toks": "k"})[
        ["draft_model", "k", "concurrency", "ruiz_speedup", "acceptance_length"]
    ]


def trace_length(path: Path, k: int, key: str = "acc_eagle") -> float:
    """Mean acceptance length at K of SpecDecode-Bench's oracle traces: steps walked through each response,
    each accepting min(trace length, K + 1) tokens (requests whose trace covers every position)."""
    steps = tokens = 0
    for line in path.read_text().splitlines():
        request = json.loads(line)
        lengths, n = request[key]["acc_len"], len(request["generated_token_ids"])
        i = 0
        while len(lengths) == n and i < n:
            step = min(lengths[i], k + 1)
            steps, tokens, i = steps + 1, tokens + step, i + step
    return tokens / steps


def predicted_from_traces(traces: Path, d0: float, slope: float) -> None:
    """SpecDecode-Bench's Llama-3.1-8B H100 EAGLE acceptance, priced with this GPU's measured step cost."""
    if not traces.is_dir():
        return
    print("SpecDecode-Bench Llama-3.1-8B EAGLE traces (H100), speedup predicted at c=1 as AL(K) / D(K):")
    for path in sorted(traces.glob("combined_*.jsonl")):
        cells = [
            f"K={k}: AL {trace_length(path, k):.2f} -> {trace_length(path, k) / (d0 + slope * k):.2f}x" for k in (2, 4)
        ]
        print(f"  {path.stem.removeprefix('combined_'):14s} " + ", ".join(cells))


def report(results: Path, ruiz_path: Path, traces: Path = TRACES) -> int:
    store = Store(result_dirs=[results], request_dirs=[])
    cells = store.speedup(
        {"run_id": [ENGINE_RUN, RUIZ_RUN]}, columns=["acceptance_length", "vllm_version", "weights", "acceptance"]
    )
    if cells.empty:
        print(f"gpu: no GPU results in {results}; run the phases on a GPU machine first")
        return 1
    engine = cells[cells["run_id"] == ENGINE_RUN].set_index(["method", "k", "concurrency"])

    def value(method: str, k: int, c: int, column: str) -> float:
        try:
            return float(engine.loc[(method, k, c), column])
        except KeyError:
            return float("nan")

    d = {k: value("eagle3", k, 1, "acceptance_length") / value("eagle3", k, 1, "speedup") for k in (2, 4)}
    slope = (d[4] - d[2]) / 2
    replay = cells[(cells["run_id"] == RUIZ_RUN) & (cells["method"] != "none")].copy()
    replay["draft"] = replay["method"].map(lambda m: RUIZ_METHODS.get(m, (None,))[0])
    compared = replay.merge(
        _ruiz_speedups(ruiz_path),
        left_on=["draft", "k", "concurrency"],
        right_on=["draft_model", "k", "concurrency"],
        suffixes=("", "_ruiz"),
    )
    compared["error"] = compared["speedup"] / compared["ruiz_speedup"] - 1
    print("Qwen3-32B shape on this GPU vs Ruiz (2026), same drafter shape, K and acceptance length:")
    print(
        compared[
            [
                "method",
                "k",
                "concurrency",
                "acceptance_length",
                "acceptance_length_ruiz",
                "speedup",
                "speedup_lo",
                "speedup_hi",
                "ruiz_speedup",
                "error",
            ]
        ]
        .round(3)
        .to_string(index=False)
    )
    predicted_from_traces(traces, d[2] - 2 * slope, slope)
    errors = compared["error"].abs().tolist()
    vllm = ",".join(sorted(set(cells["vllm_version"].dropna())))
    device = ",".join(sorted(set(cells["hardware"].dropna())))
    print(
        f"gpu device={device} vllm={vllm} base_c1_tps={value('none', 0, 1, 'output_throughput'):.1f} "
        f"base_c16_tps={value('none', 0, 16, 'output_throughput'):.1f} "
        f"eagle3_k4_c1_synth_al3_x={value('eagle3', 4, 1, 'speedup'):.3f} "
        f"dk_c1={d[2] - 2 * slope:.3f}+{slope:.3f}K ruiz_cells={len(compared)} "
        f"ruiz_median_abs_err={statistics.median(errors) if errors else float('nan'):.3f}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", required=True, choices=["engine", *PHASES, "report"])
    parser.add_argument("--results", type=Path, default=None, help="results folder (default: SpecScope's)")
    parser.add_argument("--ruiz", type=Path, default=RUIZ)
    args = parser.parse_args()
    if args.phase == "report":
        return report(args.results or settings.results_dir(), args.ruiz)
    if provenance.gpu_label(provenance.nvidia_smi()) is None:
        print("gpu: skipped (nvidia-smi lists no GPU on this machine)")
        return 0
    print(f"device {provenance.hardware_label()}, torch {provenance.torch_version()}", flush=True)
    engine_phase() if args.phase == "engine" else ruiz_phase(PHASES[args.phase])
    return 0


if __name__ == "__main__":
    sys.exit(main())
