"""Fidelity: SpecScope's runner against ``vllm bench serve`` on the same server and prompts.

Runs A (SpecScope's load generator, ``client.load.run_load``) and B (``vllm bench serve`` through
``tests/bench/vllm_bench.py``) alternately, A B A B ..., on one ngram server, with the same
prompt set, number of prompts, output length (EOS ignored), temperature 0 and concurrency.
Both use the chat endpoint, so the server applies the chat template for both. Prints each
round, then the median over rounds of the per-round ratios SpecScope / vllm bench, and the
median acceptance rate of each tool (both from /metrics deltas). The last line is:

    fidelity throughput_ratio=<x> tpot_ratio=<y> ttft_ratio=<z> acceptance_specscope=<a> acceptance_vllm=<b>

    python tests/bench/fidelity.py --base-url http://127.0.0.1:8000 --tokenizer DIR
    python tests/bench/fidelity.py            # starts its own ngram K=4 server (specscope.launch)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import PROMPTS
from specscope import prompts, settings
from specscope.client.load import run_load, run_sync, server_info
from specscope.client.load_spec import LoadSpec
from specscope.engine import provenance

HELPER = Path(__file__).with_name("vllm_bench.py")


def vllm_bench(args, model: str, result_dir: Path, round_no: int) -> dict:
    name = f"round{round_no}.json"
    argv = [
        sys.executable,
        str(HELPER),
        "bench",
        "serve",
        "--base-url",
        args.base_url,
        "--model",
        model,
        "--tokenizer",
        args.tokenizer,
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(args.prompts),
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        str(args.num_prompts),
        "--custom-output-len",
        str(args.output_len),
        "--ignore-eos",
        "--temperature",
        "0",
        "--max-concurrency",
        str(args.concurrency),
        "--request-rate",
        "inf",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        name,
        "--metadata",
        "method=ngram",
        f"k={args.k}",
        f"dataset={args.prompts.stem}",
        f"output_len={args.output_len}",
        f"hardware={provenance.hardware_label()}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads((result_dir / name).read_text())


def specscope_run(args, model: str, prompt_set) -> dict:
    spec = LoadSpec(
        base_url=args.base_url,
        model=model,
        num_prompts=args.num_prompts,
        max_concurrency=args.concurrency,
        output_len=args.output_len,
    )
    return run_sync(run_load(spec, prompt_set)).row()


def start_server(args):
    from specscope import launch

    return launch.start(launch.plan_for(args.preset, "ngram", args.k, cpu_cores=args.cores), timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a running ngram server; without it one is started")
    parser.add_argument("--tokenizer", help="tokenizer directory for vllm bench (default: the CPU demo model)")
    parser.add_argument("--preset", default="cpu-smollm2")
    parser.add_argument("--prompts", type=Path, default=PROMPTS / "code-editing.jsonl")
    parser.add_argument("--num-prompts", type=int, default=12)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", default=None, help="vllm-cpu: cores for the started server, e.g. 1")
    args = parser.parse_args()
    args.tokenizer = args.tokenizer or str(settings.models_dir() / "SmolLM2-135M-Instruct")
    prompt_set = prompts.load(args.prompts)
    if args.num_prompts > len(prompt_set):
        raise SystemExit("--num-prompts must not exceed the set's size (vllm bench would resample).")
    server = None
    if not args.base_url:
        server = start_server(args)
        args.base_url = server.url
    try:
        model = server_info(args.base_url).model
        warm = LoadSpec(base_url=args.base_url, model=model, num_prompts=2, output_len=args.output_len)
        run_sync(run_load(warm, prompt_set))
        pairs = []
        with tempfile.TemporaryDirectory() as tmp:
            for round_no in range(1, args.rounds + 1):
                a = specscope_run(args, model, prompt_set)
                b = vllm_bench(args, model, Path(tmp), round_no)
                pairs.append((a, b))
                print(
                    f"round {round_no}: specscope {a['output_throughput']:.2f} tok/s tpot "
                    f"{a['mean_tpot_ms']:.2f} ms ttft {a['mean_ttft_ms']:.1f} ms acc "
                    f"{a['acceptance_rate']:.4f} in {a['total_input_tokens']} | vllm bench "
                    f"{b['output_throughput']:.2f} tok/s tpot {b['mean_tpot_ms']:.2f} ms ttft "
                    f"{b['mean_ttft_ms']:.1f} ms acc {b['spec_decode_acceptance_rate'] / 100:.4f} "
                    f"in {b['total_input_tokens']}",
                    flush=True,
                )
    finally:
        if server is not None:
            from specscope import launch

            launch.stop(server)
    ratio = {
        key: statistics.median(a[f"{key}"] / b[key] for a, b in pairs)
        for key in ("output_throughput", "mean_tpot_ms", "mean_ttft_ms")
    }
    acc_a = statistics.median(a["acceptance_rate"] for a, _ in pairs)
    acc_b = statistics.median(b["spec_decode_acceptance_rate"] / 100 for _, b in pairs)
    print(
        f"fidelity throughput_ratio={ratio['output_throughput']:.3f} tpot_ratio={ratio['mean_tpot_ms']:.3f} "
        f"ttft_ratio={ratio['mean_ttft_ms']:.3f} acceptance_specscope={acc_a:.3f} acceptance_vllm={acc_b:.3f}"
    )


if __name__ == "__main__":
    main()
