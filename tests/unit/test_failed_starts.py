"""A server that fails to start stays named, with the root cause from its log, until it starts again or
is dismissed; its log tail leaves out SpecScope's own /health and /metrics polls; a start's stages name a
draft model only for a method that loads one."""

from __future__ import annotations

from pathlib import Path

from specscope import launch
from specscope.cli import main as cli_main
from specscope.client import serverlog
from specscope.launch import failures, process, registry

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def _state(name: str, **fields) -> launch.ServerState:
    return launch.ServerState(name=name, preset="cpu-smollm2", url="", **fields)


def test_a_failed_start_is_listed_with_its_cause_until_dismissed(specscope_home, capsys):
    log = CAPTURES / "server_log_kv_memory.log"
    failures.record(_state("cpu-smollm2-suffix", method="suffix", log_path=str(log)), serverlog.explain_file(log))
    [failed] = launch.failed_starts()
    assert failed.name == "cpu-smollm2-suffix" and failed.cause.startswith(
        "ValueError: Available memory on node 0 (9.56/23.59 GiB) on kv cache allocation is less than requested")
    assert cli_main(["ps"]) == 0
    out = capsys.readouterr().out
    assert "cpu-smollm2-suffix failed to start at " in out and "less than requested memory for kv (60.0 GiB)" in \
        " ".join(out.split()) and out.rstrip().endswith("no servers")
    launch.dismiss_failure("cpu-smollm2-suffix")
    assert launch.failed_starts() == []


def test_the_log_tail_can_leave_out_the_polls(specscope_home, tmp_path):
    log = tmp_path / "s.log"
    log.write_text("INFO: started\n" + 'INFO:     127.0.0.1:54832 - "GET /health HTTP/1.1" 200 OK\n' * 50
                   + 'INFO:     127.0.0.1:54833 - "GET /metrics HTTP/1.1" 200 OK\n'
                   + 'INFO:     127.0.0.1:54834 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    state = _state("s", log_path=str(log))
    assert registry.log_tail(state, 3).count("GET /health") == 1
    quiet = registry.log_tail(state, 3, polls=False).splitlines()
    assert quiet == ["INFO: started", 'INFO:     127.0.0.1:54834 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
                     "(51 lines of GET /health, /metrics and /v1/models polls left out)"]


def test_only_a_method_with_a_draft_model_is_said_to_load_one():
    ngram = [stage for _, (stage, _) in process._stages(_state("n", speculative_config={"method": "ngram"}))]
    draft = [stage for _, (stage, _) in process._stages(
        _state("d", speculative_config={"method": "draft_model", "model": "/m/draft"}))]
    assert "loading the draft model" not in ngram and "loading the draft model" in draft
