"""Per method of a preset (default cpu-smollm2) on this machine: startup time, resident memory,
greedy tokens per second on one bundled prompt, and the acceptance over a few bundled prompts.

One server at a time (started through specscope.launch, pinned to ``--cores``): startup = start
until /health answers; RSS = resident memory of the server's whole process group after the
runs; tok/s = completion tokens / wall time of a non-streamed greedy chat completion of
``--max-tokens`` tokens (EOS ignored) on prompt code-01, median of ``--rounds`` after a warm-up;
acceptance = /metrics delta over the first ``--per-set`` prompts of each bundled set. Other
processes on the machine slow every figure: the load average is printed with them. Last line:

    servers <method>=<startup_s>s/<rss_mib>MiB/<tok_s>tok/s[/acc=<rate>,AL=<al>] ...

    SPECSCOPE_MODELS=/work/dev-models python tests/bench/servers.py [--methods none,ngram] [--cores 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "app"))

from specscope import launch
from specscope.client import metrics, prompts
from specscope.engine import models, presets  # noqa: E402

SETS = ("code-editing", "open-chat", "summarisation")


def chat(url: str, messages: list[dict], max_tokens: int, ignore_eos: bool) -> tuple[int, float, str]:
    body = {"model": models.TARGET_NAME, "messages": messages, "max_tokens": max_tokens,
            "temperature": 0.0, "ignore_eos": ignore_eos}
    began = time.perf_counter()
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    elapsed = time.perf_counter() - began
    data = response.json()
    return data["usage"]["completion_tokens"], elapsed, data["choices"][0]["message"]["content"]


def measure(preset: presets.Preset, method: str, args, prompt_sets) -> dict:
    plan = launch.plan(preset, method, cpu_cores=args.cores)
    began = time.perf_counter()
    state = launch.start(plan, timeout=900)
    startup = time.perf_counter() - began
    try:
        one = next(p for p in prompt_sets["code-editing"].prompts if p.prompt_id == "code-01")
        chat(state.url, one.chat_messages(), 16, True)  # warm-up
        rates = []
        for _ in range(args.rounds):
            tokens, elapsed, _text = chat(state.url, one.chat_messages(), args.max_tokens, True)
            rates.append(tokens / elapsed)
        result = {"method": method, "k": state.k, "startup_s": startup, "tok_s": statistics.median(rates),
                  "load": os.getloadavg()[0]}
        if state.speculative_config:
            per_set = {}
            for name, prompt_set in prompt_sets.items():
                before = metrics.scrape(state.url)
                for prompt in prompt_set.prompts[:args.per_set]:
                    chat(state.url, prompt.chat_messages(), args.max_tokens, False)
                per_set[name] = metrics.delta(before, metrics.scrape(state.url))
            result["per_set"] = per_set
            drafts = sum(d.num_drafts for d in per_set.values())
            accepted = sum(d.accepted_tokens for d in per_set.values())
            drafted = sum(d.draft_tokens for d in per_set.values())
            result["acceptance"] = accepted / drafted if drafted else None
            result["al"] = 1 + accepted / drafts if drafts else None
        result["rss_mib"] = launch.group_rss_bytes(state.pgid) / 2**20
    finally:
        launch.stop(state.name)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu-smollm2")
    parser.add_argument("--methods", help="comma-separated (default: all of the preset's)")
    parser.add_argument("--cores", default="0", help="VLLM_CPU_OMP_THREADS_BIND for every server")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-set", type=int, default=4, help="prompts per bundled set for acceptance")
    args = parser.parse_args()
    models.prepare()
    preset = presets.get_preset(args.preset)
    methods = args.methods.split(",") if args.methods else list(preset.methods)
    prompt_sets = {name: prompts.load(REPO / "data" / "prompts" / f"{name}.jsonl") for name in SETS}
    results = []
    for method in methods:
        result = measure(preset, method, args, prompt_sets)
        results.append(result)
        line = (f"{method:12} K={result['k'] or '-':>2}  startup {result['startup_s']:6.1f} s  "
                f"RSS {result['rss_mib']:7.0f} MiB  greedy {result['tok_s']:6.1f} tok/s  "
                f"(load avg {result['load']:.1f})")
        if "per_set" in result:
            line += f"  acceptance {result['acceptance']:.3f} AL {result['al']:.2f}"
            for name, d in result["per_set"].items():
                rate = "-" if d.acceptance_rate is None else f"{d.acceptance_rate:.3f}"
                al = "-" if d.acceptance_length is None else f"{d.acceptance_length:.2f}"
                line += f"\n{'':14}{name:14} acceptance {rate} AL {al} drafts {d.num_drafts}"
        print(line, flush=True)
    summary = []
    for r in results:
        item = f"{r['method']}={r['startup_s']:.0f}s/{r['rss_mib']:.0f}MiB/{r['tok_s']:.1f}tok/s"
        if r.get("acceptance") is not None:
            item += f"/acc={r['acceptance']:.3f},AL={r['al']:.2f}"
        summary.append(item)
    print("servers " + " ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
