"""A cell measured on this machine's cores: the dashboard's own work waits for it (``sweep.lock.quiet``), and
the check of other work on the server's cores counts SpecScope's own work beside the load generator."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from helpers import local_http
from helpers.paths import CAPTURES, DATA
from specscope import procfs, prompts, sweep
from specscope.results import hygiene
from specscope.sweep import lock, measure

PROMPTS = DATA / "prompts" / "open-chat.jsonl"


class _Launcher:
    """The launcher of a server this test stands in for: no processes of its own to count."""

    def pids(self, server):
        return []

    def death(self, server):
        return None


def _spin(until: threading.Event, core: int) -> None:
    """A dashboard page computing for new results: busy on ``core`` until told to stop."""
    os.sched_setaffinity(0, {core})  # this thread only
    while not until.is_set():
        sum(range(10_000))


def test_a_cell_counts_this_process_busy_on_its_core_beside_the_load_generator(specscope_home, monkeypatch):
    """The issue's dashboard: the same process that runs a sweep's load generator computes its landing pages
    on another thread, on the server's core. That work is the cell's contention (``foreign_cpu``), and while the
    cell is measured no quiet work may begin."""
    body = (CAPTURES / "ngram_chat.sse").read_bytes()
    seen: list[tuple[float, dict]] = []
    quiet_during: list[bool] = []

    class Probing(local_http.measurable_chat(body, seen, delay_s=0.3)):  # type: ignore[misc]
        def do_POST(self):  # noqa: N802 - the http.server API
            with lock.quiet() as free:  # asked while the measured requests run
                quiet_during.append(free)
            super().do_POST()

    prompt_set = prompts.load(PROMPTS)
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=4,
        warmups=0,
        output_len=16,
    )
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop, 0), name="dashboard-page", daemon=True)
    samples: list[tuple[procfs.CpuSample, int, int]] = []  # each sample, the spinner's ticks then, this process's
    sample_cpu = procfs.sample_cpu

    def sampled(pids, cores, threads=()):
        found = sample_cpu(pids, cores, threads)
        spinner_ticks = procfs.process_ticks(Path(f"/proc/self/task/{spinner.native_id}/stat").read_text())
        samples.append((found, spinner_ticks, procfs.process_ticks(Path("/proc/self/stat").read_text())))
        return found

    monkeypatch.setattr(procfs, "sample_cpu", sampled)
    with local_http.serving(Probing) as url:
        spinner.start()
        try:
            row, _, _ = measure.run_cell(
                spec,
                prompt_set,
                sweep.Cell("none", 0, 1),
                sweep.RunningServer(url=url, cores=frozenset({0})),
                _Launcher(),
                lambda event: None,
                0,
                1,
                0,
            )
        finally:
            stop.set()
            spinner.join(5)
    assert row["status"] == "ok", row.get("error")
    (before, spun_before, process_before), (after, spun_after, process_after) = samples
    spun, own = spun_after - spun_before, after.own - before.own
    assert spun > 10  # the spinner kept core 0 busy through the cell's ~1.2 s, however busy the machine
    # the load generator's own time (its thread and helpers) leaves the page's out: the rest of this process holds
    # all the spinner's ticks, however the cores were shared (2: ticks read a moment apart)
    assert (process_after - process_before) - own >= spun - 2
    # the spinner's time on core 0 is other work: at least that share of the core's time, whatever else ran
    assert row["foreign_cpu"] * (after.total - before.total) >= spun - own - 2  # 2: ticks read a moment apart
    assert row["foreign_cpu"] > hygiene.FOREIGN_CPU_LIMIT
    assert quiet_during and not any(quiet_during)
    with lock.quiet() as free:  # the cell over: the dashboard may compute again
        assert free


def test_a_cell_waits_for_quiet_work_to_end_before_it_is_measured(specscope_home):
    began: list[float] = []

    def cell() -> None:
        with lock.measuring():
            began.append(time.monotonic())

    with lock.quiet() as free:
        assert free
        measured = threading.Thread(target=cell)
        measured.start()
        time.sleep(0.3)
        assert began == []  # the dashboard's page is still computing
        ended = time.monotonic()
    measured.join(5)
    assert began and began[0] >= ended
    with lock.measuring(), lock.measuring():  # lanes side by side share the mark
        with lock.quiet() as free:
            assert not free
