"""guidellm 0.8.1 and AIPerf 0.13.0 run for real against a vLLM server, for tests and captures.

The tools live in their own venvs (``launchers/install.sh --test`` puts them under
``~/.cache/specscope/tools``; ``SPECSCOPE_TOOLS`` moves them): their dependencies clash with vLLM's.
Each run is short: 12 requests of 32 prompt and 16 output tokens at concurrency 2. Twelve, not four:
the throughput's interval comes from the requests, and with four one request slowed threefold (a busy
CI core) leaves it unbounded; with twelve it takes one slowed sixfold.

    runs = [start_guidellm(url, tokenizer_dir, out / "g"), start_aiperf(url, model, tokenizer_dir, out / "a")]
    finish(runs)   # out/g/benchmarks.json, out/a/artifacts/profile_export_aiperf.json
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TOOLS = Path(
    os.environ.get("SPECSCOPE_TOOLS")
    or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specscope" / "tools"
)
GUIDELLM, AIPERF = TOOLS / "guidellm" / "bin" / "guidellm", TOOLS / "aiperf" / "bin" / "aiperf"
OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def missing() -> list[str]:
    """The tools not installed, as paths (empty when both are there)."""
    return [str(tool) for tool in (GUIDELLM, AIPERF) if not tool.exists()]


def start_guidellm(url: str, tokenizer: str, out: Path) -> subprocess.Popen:
    """Start guidellm's concurrent benchmark (2 streams, 12 requests) writing ``out/benchmarks.json``."""
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            str(GUIDELLM),
            "run",
            "--backend",
            f"kind=openai_http,target={url}",
            "--profile",
            "kind=concurrent,streams=2",
            "--constraint",
            "kind=max_requests,count=12",
            "--data",
            "kind=synthetic_text,prompt_tokens=32,output_tokens=16",
            "--tokenizer",
            f"kind=huggingface_auto,model={tokenizer}",
            "--output",
            "kind=json,path=benchmarks.json",
            "--disable-progress",
        ],
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def start_aiperf(url: str, model: str, tokenizer: str, out: Path) -> subprocess.Popen:
    """Start AIPerf's profile (concurrency 2, 12 requests) writing ``out/artifacts``. Its tokenizer loads
    from a local folder only when HF offline mode is off (offline, it looks in the hub's cache)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key not in OFFLINE}
    return subprocess.Popen(
        [
            str(AIPERF),
            "profile",
            "--model",
            model,
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--tokenizer",
            tokenizer,
            "--concurrency",
            "2",
            "--request-count",
            "12",
            "--isl",
            "32",
            "--isl-stddev",
            "0",
            "--osl",
            "16",
            "--osl-stddev",
            "0",
            "--random-seed",
            "7",
            "--extra-inputs",
            "ignore_eos:true",
            "--artifact-dir",
            "artifacts",
            "--ui",
            "none",
        ],
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def finish(runs: list[subprocess.Popen], timeout: float = 240) -> None:
    """Wait for tool runs started side by side; one that fails raises with the tail of its output."""
    for run in runs:
        output, _ = run.communicate(timeout=timeout)
        if run.returncode != 0:
            raise AssertionError(f"{Path(run.args[0]).name} failed:\n{output[-3000:]}")
