"""Race or fair replay: servers SpecScope launched on shared CPU cores default to fair replay, and a
race on shared cores says its speedups measure contention."""

from __future__ import annotations

import os

from helpers.paths import CAPTURES
from specscope import live
from specscope.launch.registry import ServerState
from ui.live_panes import pane_html

RECORDING = CAPTURES / "live_4panes.json"
HOST_CORES = sorted(os.sched_getaffinity(0))


def cpu_server(name: str, port: int, binding: str | None) -> ServerState:
    env = {"VLLM_CPU_OMP_THREADS_BIND": binding} if binding is not None else {}
    return ServerState(name=name, url=f"http://127.0.0.1:{port}", port=port, engine="vllm-cpu", env=env)


def specs(*ports: int) -> list[live.PaneSpec]:
    return [
        live.PaneSpec(f"s{port}", f"http://127.0.0.1:{port}", "none" if i == 0 else "ngram")
        for i, port in enumerate(ports)
    ]


def test_four_servers_on_two_cores_share_them_and_default_to_fair_replay():
    states = [cpu_server(f"s{port}", port, core) for port, core in ((8001, "0"), (8002, "1"), (8003, "0"), (8004, "1"))]
    shared = live.shared_cores(specs(8001, 8002, 8003, 8004), states)
    assert shared == {"s8001": {0}, "s8002": {1}, "s8003": {0}, "s8004": {1}}
    assert live.default_mode(specs(8001, 8002, 8003, 8004), states) == "fair"


def test_servers_on_their_own_cores_race():
    states = [cpu_server("a", 8001, "0"), cpu_server("b", 8002, "1")]
    assert live.shared_cores(specs(8001, 8002), states) == {}
    assert live.default_mode(specs(8001, 8002), states) == "race"


def test_bindings_in_vllm_cpu_syntax_and_unbound_servers():
    states = [
        cpu_server("a", 8001, "0-1|4"),
        cpu_server("b", 8002, "1,5"),
        cpu_server("c", 8003, None),
        cpu_server("d", 8004, str(HOST_CORES[-1])),
    ]
    assert live.shared_cores(specs(8001, 8002), states) == {"s8001": {0, 1, 4}, "s8002": {1, 5}}
    # a server without a binding may run on every core of the host
    assert live.shared_cores(specs(8003, 8004), states) == {"s8003": set(HOST_CORES), "s8004": {HOST_CORES[-1]}}


def test_only_servers_specscope_launched_here_count():
    attached = ServerState(name="gpu", url="http://127.0.0.1:8002", engine="", attached=True)
    states = [cpu_server("a", 8001, "0"), attached]
    assert live.shared_cores(specs(8001, 8002), states) == {}
    # a URL typed as localhost with a trailing slash is the same launched server
    typed = [live.PaneSpec("x", "http://localhost:8001/"), live.PaneSpec("y", "http://127.0.0.1:8001")]
    assert set(live.shared_cores(typed, [cpu_server("a", 8001, "0")])) == {"x", "y"}
    assert live.shared_cores(specs(9001, 9002), [cpu_server("a", 8001, "0")]) == {}


def test_a_race_on_shared_cores_says_its_speedups_measure_contention(tmp_path):
    recording = live.load_recording(RECORDING)
    raced = live.LiveSession(recording.panes, "race", shared=("none", "ngram"))
    assert raced.timing == "race" and raced.contention
    assert not live.LiveSession(recording.panes, "fair", shared=("none", "ngram")).contention
    assert not live.LiveSession(recording.panes, "race").contention
    # a race saved and loaded again replays as fair, but its speedups stay race speedups
    loaded = live.load_recording(raced.save(tmp_path))
    assert (loaded.mode, loaded.timing, loaded.contention) == ("fair", "race", True)
    assert recording.timing == "fair"

    view = raced.views(now=0.0)[1]
    shown = pane_html(view, show_rejected=True, timing=raced.timing, contention=raced.contention)
    cell = shown.split('data-metric="speedup"')[1].split("</div>")[0]
    assert "race speedup" in cell and "contention" in cell and "fair replay" in cell
    fair = pane_html(view, show_rejected=True, timing="fair")
    cell = fair.split('data-metric="speedup"')[1].split("</div>")[0]
    assert "fair speedup" in cell and "contention" not in cell
