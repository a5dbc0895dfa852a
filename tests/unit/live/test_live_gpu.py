"""Live on GPU servers, honest: the method comes from SpecScope's registry or the server's command line, a
chunk-estimated pane takes acceptance from the server's counters over its request, the lossless check does not
apply under synthetic acceptance, servers sharing a GPU replay fairly, and notes name only what a vLLM has."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from helpers.paths import CAPTURES
from specscope import live, procfs
from specscope.client import metrics
from specscope.launch import registry
from specscope.launch.registry import ServerState

GPU_RECORDING = CAPTURES / "live_gpu_h100_eagle3_synthetic.json"
EAGLE3 = {
    "method": "eagle3",
    "num_speculative_tokens": 4,
    "model": "shape-Llama-3.1-8B-eagle3",
    "rejection_sample_method": "synthetic",
    "synthetic_acceptance_length": 3.0,
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_method_comes_from_specscopes_registry(specscope_home):
    port = _free_port()
    registry.write_state(
        ServerState(
            name="gpu-eagle3",
            url=f"http://127.0.0.1:{port}",
            port=port,
            engine="vllm",
            method="eagle3",
            kind="eagle3",
            vllm_version="0.26.0",
            attached=True,
            speculative_config=EAGLE3,
        )
    )
    spec = live.resolve_method(live.PaneSpec("eagle3", f"http://localhost:{port}", "auto"))
    assert spec.method == "eagle3" and spec.speculative_config == EAGLE3 and spec.vllm_version == "0.26.0"
    assert spec.synthetic


def test_the_method_comes_from_the_servers_command_line(specscope_home):
    port = _free_port()
    server = (
        "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); "
        "time.sleep(60)"
    )
    argv = [sys.executable, "-c", server, str(port), "--model", "m", "--speculative-config", json.dumps(EAGLE3)]
    proc = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and procfs.listening_argv(port) is None:
            time.sleep(0.1)
        spec = live.resolve_method(live.PaneSpec("eagle3", f"http://127.0.0.1:{port}", "auto"))
    finally:
        proc.kill()
        proc.wait()
    assert spec.method == "eagle3" and spec.speculative_config == EAGLE3
    assert spec.per_request is None  # its command line asks for no per-request counts


def _panes() -> list[live.Pane]:
    data = json.loads(GPU_RECORDING.read_text())
    return [live.Pane.from_dict(p) for p in data["panes"]]


def test_a_chunk_estimated_pane_takes_acceptance_from_the_servers_counters():
    base, eagle = _panes()
    eagle.spec = live.PaneSpec("eagle3", eagle.spec.url, "eagle3", EAGLE3, vllm_version="0.26.0", per_request=False)
    before = metrics.parse((CAPTURES / "metrics_ngram_k4_before.txt").read_text())
    after = metrics.parse((CAPTURES / "metrics_ngram_k4_after.txt").read_text())
    eagle.counted = metrics.delta(before, after)
    eagle._view = None
    provenance, figures = eagle.view_chunks(eagle.chunks)
    assert provenance.source == "chunks"
    assert figures.acceptance_length == eagle.counted.acceptance_length
    assert figures.acceptance_rate == eagle.counted.acceptance_rate
    per_step = eagle.counted.draft_tokens / eagle.counted.num_drafts
    drafted = {s.drafted for s in provenance.steps if s.index}
    assert drafted == ({int(per_step)} if per_step.is_integer() else {None})
    assert any(n.startswith("Acceptance from the server's /metrics over this request") for n in provenance.notes)
    assert not any("--per-request" in n for n in provenance.notes)  # this server's vLLM has no such flag
    assert "0.26.0" in " ".join(provenance.notes)


def test_the_lossless_check_does_not_apply_under_synthetic_acceptance():
    base, eagle = _panes()
    eagle.spec = live.PaneSpec("eagle3", eagle.spec.url, "eagle3", EAGLE3)
    session = live.LiveSession(panes=[base, eagle], mode="fair")
    session.skip_replay()
    views = session.views(now=float("inf"))
    assert views[1].lossless is None and views[1].lossless_note.startswith("not applicable: drafts are accepted")
    plain = live.PaneSpec("ngram", "http://x", "ngram", {"method": "ngram", "num_speculative_tokens": 4})
    assert not plain.synthetic


def _gpu_server(name: str, port: int, devices: str | None) -> ServerState:
    env = {"CUDA_VISIBLE_DEVICES": devices} if devices is not None else {}
    return ServerState(name=name, url=f"http://127.0.0.1:{port}", port=port, engine="vllm", env=env)


def test_servers_sharing_a_gpu_replay_fairly_and_say_why():
    specs = [live.PaneSpec("base", "http://127.0.0.1:8101"), live.PaneSpec("eagle3", "http://127.0.0.1:8102", "eagle3")]
    one_gpu = [_gpu_server("base", 8101, "0"), _gpu_server("eagle3", 8102, "0")]
    assert live.sharing(specs, one_gpu) == {"base": "GPU 0", "eagle3": "GPU 0"}
    assert live.default_mode(specs, one_gpu) == "fair"
    visible = [_gpu_server("base", 8101, None), _gpu_server("eagle3", 8102, None)]  # every GPU of the host
    assert live.sharing(specs, visible) == {"base": "all GPUs", "eagle3": "all GPUs"}
    apart = [_gpu_server("base", 8101, "0"), _gpu_server("eagle3", 8102, "1")]
    assert live.sharing(specs, apart) == {} and live.default_mode(specs, apart) == "race"


def test_notes_name_only_flags_the_servers_vllm_has():
    old = live.PaneSpec("eagle3", "http://x", "eagle3", per_request=False, vllm_version="0.26.0")
    assert "--per-request" not in old.exact_labels_hint() and "0.26.0" in old.exact_labels_hint()
    unknown = live.PaneSpec("eagle3", "http://x", "eagle3")
    assert "--per-request-spec-decode-metrics detailed in 0.32" in unknown.exact_labels_hint()


def test_the_bundled_h100_recording_is_honest():
    """``specscope stream`` on an H100 (vLLM 0.26.0): the baseline and an EAGLE-3 head of the Llama-3.1-8B shape,
    drafts accepted synthetically at a mean length of 3.0, both servers on the one GPU."""
    session = live.load_recording(CAPTURES / "live_gpu_h100_eagle3_vllm0.26.0.json")
    assert session.timing == "fair" and set(session.shared) == {"base", "eagle3"}  # they shared the GPU
    session.skip_replay()
    base, eagle = session.views(now=float("inf"))
    assert eagle.spec.method == "eagle3" and eagle.provenance.source == "chunks"
    assert abs(eagle.metrics.acceptance_length / 3.0 - 1) <= 0.10  # the synthetic length set, from /metrics
    assert eagle.lossless is None and eagle.lossless_note.startswith("not applicable")
    assert all(s.drafted == 4 for s in eagle.provenance.steps if s.index)
    assert not any("--per-request" in n for n in eagle.provenance.notes)  # vLLM 0.26.0 has no such flag
    assert eagle.metrics.speedup > 1.5 and base.metrics.speedup == 1.0


def test_the_bundled_vllm_032_recording_labels_every_step_from_the_servers_own_counts():
    """``specscope stream`` on an H100 with vLLM 0.32.0 (torch 2.13.0 carried, docs/gpu.md): the baseline and
    the EAGLE-3 K=4 head of the 8B shape kept from the deploy loop, drafts accepted synthetically at the
    eagle3-kimi-k2.5 curve. vLLM 0.32.0 reports each request's per-step acceptance, so the pane's labels are
    the server's own counts, not an estimate from chunk sizes."""
    session = live.load_recording(CAPTURES / "live_gpu_h100_eagle3_vllm0.32.0.json")
    assert session.timing == "fair" and set(session.shared) == {"baseline", "eagle3"}  # one GPU
    session.skip_replay()
    base, eagle = session.views(now=float("inf"))
    assert eagle.spec.vllm_version == "0.32.0" and eagle.spec.per_request
    assert eagle.provenance.source == "server"  # per-request counts, reconciled with the chunks
    reported = eagle.provenance.steps
    drafting = [s for s in reported if s.index]
    assert len(drafting) == 28 and all(s.drafted == 4 for s in drafting)
    assert sum(s.accepted for s in drafting) == 68  # the server's num_accepted_draft_tokens
    assert eagle.metrics.acceptance_length == pytest.approx(1 + 68 / 28)
    assert eagle.lossless is None and eagle.lossless_note.startswith("not applicable")
    assert eagle.metrics.speedup > 1.2 and base.metrics.speedup == 1.0
