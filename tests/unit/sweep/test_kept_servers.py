"""Servers kept for the lease: a GPU sweep's servers stay after it ends (its pool releases them instead of
stopping them), a kept server found asleep is woken before its cells, and a kept server's idle guard ends it
once it has served nothing for its idle limit."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

from helpers.local_http import Answering, serving
from specscope import sweep
from specscope.client import sleepmode
from specscope.launch import guard, kept
from specscope.sweep.pool import ServerPool

CALLS: list[str] = []


class _SleepingServer(Answering):
    def do_POST(self):  # noqa: N802 - the http.server API
        CALLS.append(self.path.split("?")[0])
        self.answer(b"")


class _KeepingLauncher:
    """A launcher that keeps its servers for the lease: ``release`` leaves them, ``stop`` ends them."""

    sleeps, max_servers, starts_at_once = True, 2, 1

    def __init__(self, url: str, asleep: bool = False):
        self.url, self.asleep = url, asleep
        self.stopped: list[str] = []
        self.released: list[str] = []

    def start(self, method, k, **options):
        return sweep.RunningServer(url=f"{self.url}/{method}", reused=self.asleep, asleep=self.asleep)

    def stop(self, server):
        self.stopped.append(server.url.rsplit("/", 1)[1])

    def release(self, server):
        self.released.append(server.url.rsplit("/", 1)[1])


def test_a_keeping_launchers_servers_stay_after_the_sweep_and_a_failed_one_is_stopped():
    cells = [sweep.Cell("none", 0, 1), sweep.Cell("ngram", 4, 1)]
    launcher = _KeepingLauncher("http://127.0.0.1:9")
    pool = ServerPool(launcher, cells)
    for index, cell in enumerate(cells):
        pool.start(index, cell.group, cell)
    pool.done_with(cells[1].group, 1, now=True)  # its cell failed: a fresh server next time
    pool.close()
    assert launcher.stopped == ["ngram"] and launcher.released == ["none"]


def test_a_kept_server_found_asleep_is_woken_before_its_cell():
    CALLS.clear()
    with serving(_SleepingServer) as url:
        launcher = _KeepingLauncher(url, asleep=True)
        pool = ServerPool(launcher, [sweep.Cell("ngram", 4, 1)])
        server = pool.start(0, ("ngram", 4, None, None), sweep.Cell("ngram", 4, 1))
    assert server.reused and CALLS == ["/ngram/wake_up"] and not pool.asleep


def test_launchers_keep_a_gpus_servers_not_a_ray_tasks_nor_fresh_ones(specscope_home):
    spec = sweep.SweepSpec(
        preset="shape-llama31-8b-shared",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=Path("data/prompts/code-editing.jsonl"),
    )
    gpu = sweep.launcher_for(spec)
    assert gpu.keep and not gpu.die_with_parent  # servers that sleep stay for the lease
    assert not sweep.launcher_for(spec, sweep.LaunchOptions(keep=False)).keep
    assert not sweep.launcher_for(spec, fresh=True).keep  # a Ray task's servers end with it
    cpu = sweep.SweepSpec(preset="cpu-smollm2", methods=("none",), ks=(), concurrencies=(1,), prompts=spec.prompts)
    assert not sweep.launcher_for(cpu).keep and sweep.launcher_for(cpu, sweep.LaunchOptions(keep=True)).keep


def test_an_idle_guard_ends_a_server_unused_for_its_limit_and_forgets_it(tmp_path):
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    state_file = tmp_path / "kept.json"
    state_file.write_text("{}")
    served = iter([(3.0, 0.0), (4.0, 0.0)] + [(4.0, 0.0)] * 100)  # one more answered, then nothing
    began = time.monotonic()
    guard.watch_idle(
        "http://unused", proc.pid, limit_s=0.3, state_file=str(state_file), every=0.05, served=lambda url: next(served)
    )
    proc.wait(timeout=10)
    assert proc.returncode is not None and not state_file.exists()
    assert time.monotonic() - began >= 0.3  # not before its limit
    busy = subprocess.Popen(["sleep", "60"], start_new_session=True)
    seen = []

    def in_flight(url):  # requests run for six polls, past the limit; then the server ends on its own
        seen.append(busy.poll() is None)
        if len(seen) == 6:
            busy.kill()
            busy.wait()
        return 1.0, 2.0

    guard.watch_idle("http://unused", busy.pid, limit_s=0.1, every=0.05, served=in_flight)
    assert seen[:6] == [True] * 6  # never ended while it served


class _VllmSleep(Answering):
    """vLLM's sleep endpoints: /sleep, /wake_up and /is_sleeping, one sleeping state per path's server."""

    sleeping: set[str] = set()

    def do_POST(self):  # noqa: N802 - the http.server API
        server, action = self.path.split("?")[0].rsplit("/", 1)
        CALLS.append(f"{server}/{action}")
        (self.sleeping.add if action == "sleep" else self.sleeping.discard)(server)
        self.answer(b"")

    def do_GET(self):  # noqa: N802
        server = self.path.rsplit("/", 1)[0]
        self.answer(json.dumps({"is_sleeping": server in self.sleeping}).encode())


def test_a_server_put_to_sleep_behind_the_pools_back_is_woken_before_its_next_cell():
    # seen on an H100: a start made room by sleeping every idle kept server, the pool counted the baseline
    # awake, and its next cell waited on a sleeping server until the command was killed
    CALLS.clear()
    cells = [sweep.Cell("none", 0, 1), sweep.Cell("none", 0, 16)]
    with serving(_VllmSleep) as url:
        pool = ServerPool(_KeepingLauncher(url), cells)
        server = pool.start(0, cells[0].group, cells[0])
        assert not pool.wake(0, cells[0].group)  # awake: nothing to do
        sleepmode.fall_asleep(server.url)  # another start on the GPU makes room
        assert pool.wake(1, cells[1].group)
        assert not sleepmode.is_sleeping(server.url) and not pool.asleep
    assert CALLS == ["/none/sleep", "/none/wake_up"]


def test_a_gpu_launcher_makes_room_without_sleeping_the_servers_it_handed_out(specscope_home, monkeypatch):
    spec = sweep.SweepSpec(
        preset="shape-llama31-8b-shared",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=Path("data/prompts/code-editing.jsonl"),
    )
    launcher = sweep.launcher_for(spec)
    spared: list[set[str]] = []
    monkeypatch.setattr(kept, "make_room", lambda using=(): spared.append(set(using)) or [])
    held = sweep.RunningServer(url="http://127.0.0.1:9", handle=SimpleNamespace(name="shape-none"))
    launcher.held.add("shape-none")
    launcher._make_room()
    launcher.release(held)
    launcher._make_room()
    assert spared == [{"shape-none"}, set()]


def test_a_start_short_of_gpu_memory_stops_sleeping_kept_servers_oldest_first(specscope_home):
    """Seen on an H100 (vLLM 0.32.0): five kept 8B-shape servers, asleep, still held 13 GiB, so a sixth start
    found 22.9 of the 23.8 GiB it needed and failed its cells. Kept servers of earlier work are stopped, the
    sleeping and the oldest first, until the card has what the start needs; busy and spared ones stay."""
    from specscope.launch import registry
    from specscope.launch.registry import ServerState

    gib = 2**30
    procs = {}
    with serving(_VllmSleep) as url:
        _VllmSleep.sleeping = {"/old", "/new"}
        for name, started in (
            ("awake", "2026-12-07T16:00"),
            ("new", "2026-12-07T16:30"),
            ("old", "2026-12-07T16:10"),
            ("spared", "2026-12-07T15:00"),
        ):
            procs[name] = subprocess.Popen(["sleep", "60"], start_new_session=True)
            registry.write_state(
                ServerState(
                    name=name,
                    url=f"{url}/{name}",
                    pid=procs[name].pid,
                    pgid=procs[name].pid,
                    started_at=started,
                    idle_limit_s=1800.0,
                    argv=[sleepmode.SLEEP_FLAG],
                )
            )
        held = {"free": 20 * gib}

        def free_bytes():  # each stopped server gives its 3 GiB back
            return held["free"] + 3 * gib * sum(p.poll() is not None for p in procs.values())

        stopped = kept.free_memory(24 * gib, free_bytes, using={"spared"}, settle_s=2.0)
    assert stopped == ["old", "new"]  # the sleeping ones, oldest first; 26 GiB then, enough
    assert procs["awake"].poll() is None and procs["spared"].poll() is None
    assert {s.name for s in registry.read_states()} == {"awake", "spared"}
    assert kept.free_memory(24 * gib, lambda: 30 * gib) == []  # enough already: nothing stopped
    for proc in procs.values():
        proc.kill()
        proc.wait()
