"""Servers kept for the lease: a GPU sweep's servers stay after it ends (its pool releases them instead of
stopping them), a kept server found asleep is woken before its cells, and a kept server's idle guard ends it
once it has served nothing for its idle limit."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from local_http import Answering, serving
from specscope import sweep
from specscope.launch import guard
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
    spec = sweep.SweepSpec(preset="shape-llama31-8b-shared", methods=("none",), ks=(), concurrencies=(1,),
                           prompts=Path("data/prompts/code-editing.jsonl"))
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
    guard.watch_idle("http://unused", proc.pid, limit_s=0.3, state_file=str(state_file), every=0.05,
                     served=lambda url: next(served))
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
