"""Sweep planning, run ids that make reruns resume, finished cells and the CLI's argument handling."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from helpers.paths import DATA
from specscope import procfs, sweep
from specscope.advice import deploy
from specscope.analysis import run_results
from specscope.cli import bench as bench_cli
from specscope.cli import build_parser
from specscope.client.progress import ProgressEvent
from specscope.errors import ConfigError
from specscope.results.store import Store

PROMPTS = DATA / "prompts" / "open-chat.jsonl"


def spec(**overrides) -> sweep.SweepSpec:
    values = dict(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(1, 2, 4),
        concurrencies=(1, 4),
        prompts=PROMPTS,
        num_prompts=4,
        output_len=16,
    )
    values.update(overrides)
    return sweep.SweepSpec(**values)


def test_plan_runs_the_baseline_once_and_groups_by_method_and_k():
    cells = [c.cell_id for c in sweep.plan_cells(spec())]
    assert cells == [
        "none-k0-c1",
        "none-k0-c4",
        "ngram-k1-c1",
        "ngram-k1-c4",
        "ngram-k2-c1",
        "ngram-k2-c4",
        "ngram-k4-c1",
        "ngram-k4-c4",
    ]


def test_run_id_is_stable_for_equal_sweeps_and_changes_with_them():
    assert spec().resolved_run_id("abc") == spec(label="other label").resolved_run_id("abc")
    assert spec().resolved_run_id("abc") != spec().resolved_run_id("abd")
    assert spec().resolved_run_id("abc") != spec(output_len=32).resolved_run_id("abc")
    assert spec(run_id="mine").resolved_run_id("abc") == "mine"
    assert spec().resolved_run_id("abc").startswith("sweep-cpu-smollm2-")


def test_a_method_written_with_its_own_k_runs_only_at_those():
    groups = dict.fromkeys(
        c.group[:2] for c in sweep.plan_cells(spec(methods=("none", "ngram", "suffix:4"), ks=(2, 4)))
    )
    assert list(groups) == [("none", 0), ("ngram", 2), ("ngram", 4), ("suffix", 4)]
    own = spec(methods=("none", "ngram:1/3"), ks=())
    assert [c.group[:2] for c in sweep.plan_cells(own)][::2] == [("none", 0), ("ngram", 1), ("ngram", 3)]


@pytest.mark.parametrize(
    "overrides",
    [
        {"methods": ()},
        {"ks": (0,)},
        {"concurrencies": ()},
        {"concurrencies": (0,)},
        {"ks": ()},
        {"methods": ("suffix:four",)},
        {"methods": ("none", "suffix:0")},
        {"methods": ("none", "suffix:4", "ngram"), "ks": ()},
        {"num_prompts": 0},
        {"output_len": 0},
    ],
)
def test_bad_sweeps_are_config_errors(overrides):
    with pytest.raises(ConfigError):
        spec(**overrides)


def test_finished_cells_become_the_runs_parquet_with_speedups(specscope_home):
    run_id = "sweep-unit"
    base = {
        "source": "specscope",
        "model": "m",
        "dataset": "open-chat",
        "hardware": "cpu-2core",
        "output_len": 16,
        "concurrency": 1,
        "status": "ok",
        "error": None,
        "created_at": "2026-11-21T22:00:00+00:00",
        "request_rate": float("inf"),
    }
    sweep.save_cell(
        run_id, "none-k0-c1", sweep.FinishedCell({**base, "method": "none", "k": 0, "output_throughput": 40.0})
    )
    sweep.save_cell(
        run_id,
        "ngram-k4-c1",
        sweep.FinishedCell(
            {**base, "method": "ngram", "k": 4, "output_throughput": 60.0},
            [
                {
                    "cell_id": "ngram-k4-c1",
                    "prompt_id": "p",
                    "method": "ngram",
                    "k": 4,
                    "concurrency": 1,
                    "success": True,
                    "e2el_ms": 100.0,
                    "acceptance_rate": 0.5,
                }
            ],
        ),
    )
    sweep.save_cell(
        run_id,
        "ngram-k2-c1",
        sweep.FinishedCell(
            {**base, "method": "ngram", "k": 2, "status": "failed", "error": "The server stopped answering."}
        ),
    )
    path = sweep.write_run(run_id)
    assert path.name == f"{run_id}.parquet"
    table = run_results.cell_table(Store(), run_id)
    assert table["method"].tolist() == ["none", "ngram", "ngram"]
    failed = table[table["status"] == "failed"].iloc[0]
    assert failed["error"] == "The server stopped answering." and failed["speedup"] != failed["speedup"]
    assert table[table["k"] == 4]["speedup"].iloc[0] == pytest.approx(1.5)
    assert set(sweep.finished_cells(run_id)) == {"none-k0-c1", "ngram-k4-c1", "ngram-k2-c1"}


def test_lock_refuses_a_second_live_sweep(specscope_home):
    folder = sweep.run_dir("locked")
    folder.mkdir(parents=True)
    (folder / "lock").write_text("1")  # pid 1 is alive and is not us
    with pytest.raises(ConfigError, match="already running"):
        with sweep.lock.run("locked"):
            pass
    (folder / "lock").write_text("999999999")  # a dead sweep's lock is taken over
    with sweep.lock.run("locked"):
        assert (folder / "lock").read_text() != "999999999"


def test_cli_parses_lists_and_checks_prompt_files(tmp_path, capsys):
    args = build_parser().parse_args(
        [
            "bench",
            "--preset",
            "p",
            "--methods",
            "none,ngram",
            "--k",
            "1,2",
            "--concurrency",
            "1,4,16",
            "--prompts",
            "x.jsonl",
        ]
    )
    assert args.methods == ("none", "ngram") and args.k == (1, 2) and args.concurrency == (1, 4, 16)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--preset", "p", "--k", "1,x", "--prompts", "x.jsonl"])
    bad = tmp_path / "bad.csv"
    bad.write_text("prompt,id\nhello,1\nhi\n")
    assert (
        build_parser()
        .parse_args(["prompts", "check", str(bad)])
        .func(build_parser().parse_args(["prompts", "check", str(bad)]))
        == 1
    )
    assert "bad.csv line 3" in capsys.readouterr().out


def test_progress_bar_lines():
    out = io.StringIO()
    bar = bench_cli.ProgressBar(stream=out)
    bar(ProgressEvent("cell_failed", "ngram-k2-c4", 3, 6, message="server exited"))
    bar(ProgressEvent("request", "x", 3, 6, 1, 4))  # request ticks only on a terminal
    assert out.getvalue() == "[###############---------------] 3/6 cells  ngram-k2-c4 FAILED: server exited\n"
    assert json.dumps(ProgressEvent("sweep_done").fraction) == "0.0"


def test_a_stamped_progress_bar_starts_each_line_with_the_time():
    """A GPU bench's log says when each step happened (``stamped``, the benches' one way of timestamping)."""
    out = io.StringIO()
    bench_cli.ProgressBar(stream=out, stamped=True)(ProgressEvent("cell_done", "none-k0-c1", 1, 2))
    assert re.fullmatch(r"\d\d:\d\d:\d\d \[#{15}-{15}\] 1/2 cells  none-k0-c1 done\n", out.getvalue())


def _pid_exists_as_another_user(pid: int) -> bool:
    """procfs.pid_exists(pid) asked by a user who does not own ``pid`` (a forked child as nobody when root)."""
    if os.geteuid() != 0:
        assert os.stat(f"/proc/{pid}").st_uid != os.geteuid()
        return procfs.pid_exists(pid)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: drop to nobody, ask, report one byte
        try:
            os.setuid(65534)
            os.write(write, b"1" if procfs.pid_exists(pid) else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(child, 0)
    return answer == b"1"


def test_a_lock_held_by_another_users_live_process_is_not_taken_over(specscope_home):
    # pid 1 runs as root: asked as another user, os.kill(1, 0) raises PermissionError, and it still runs
    assert _pid_exists_as_another_user(1) is True
    assert procfs.pid_exists(2**22 + 7) is False
    folder = sweep.run_dir("theirs")
    folder.mkdir(parents=True)
    (folder / "lock").write_text("1")
    with pytest.raises(ConfigError, match="already running \\(process 1\\)"):
        with sweep.lock.run("theirs"):
            pass
    assert (folder / "lock").read_text() == "1"


def test_repeats_run_in_rounds_of_every_cell_and_keep_the_old_cell_ids_without_them():
    cells = [c.cell_id for c in sweep.plan_cells(spec(ks=(4,), repeats=2))]
    assert cells == [
        "none-k0-c1-r1",
        "none-k0-c4-r1",
        "ngram-k4-c1-r1",
        "ngram-k4-c4-r1",
        "none-k0-c1-r2",
        "none-k0-c4-r2",
        "ngram-k4-c1-r2",
        "ngram-k4-c4-r2",
    ]
    assert sweep.Cell("ngram", 4, 1).cell_id == "ngram-k4-c1"
    scheduled = [
        c.cell_id for c in sweep.plan_cells(spec(ks=(4,), concurrencies=(1,), repeats=2, k_schedule="1-2:4,3-256:1"))
    ]
    assert scheduled == [
        "none-k0-c1-r1",
        "ngram-k4-c1-r1",
        "ngram-schedule-1-2k4_3-256k1-c1-r1",
        "none-k0-c1-r2",
        "ngram-k4-c1-r2",
        "ngram-schedule-1-2k4_3-256k1-c1-r2",
    ]


def test_a_launcher_holding_one_server_restarts_them_by_round_and_may_keep_the_baseline():
    cells = sweep.plan_cells(spec(methods=("none", "ngram"), ks=(2, 4), concurrencies=(1,), repeats=2))
    live: list[tuple] = []
    started = []
    for index, cell in enumerate(cells):
        if cell.group not in live:
            for victim in sweep.pool.evict(sweep.pool.Pending(cells), index, live, 1, keep_baseline=False):
                live.remove(victim)
            live.append(cell.group)
            started.append(cell.group[:2])
    assert started == [("none", 0), ("ngram", 2), ("ngram", 4)] * 2
    # the baseline kept beside one method server: only the method servers restart
    pending = sweep.pool.Pending(cells)
    assert sweep.pool.evict(pending, 1, [("none", 0, None)], 1, keep_baseline=True) == []
    assert sweep.pool.evict(pending, 2, [("none", 0, None), ("ngram", 2, None)], 1, keep_baseline=True) == [
        ("ngram", 2, None)
    ]
    assert sweep.pool.evict(pending, 2, [("none", 0, None), ("ngram", 2, None)], None, keep_baseline=False) == []


def test_progress_carries_an_estimate_of_the_time_left():
    seen = []
    estimate = sweep.progress.Estimate(seen.append)
    estimate(ProgressEvent("cell_skipped", "a", 1, 4))
    estimate(ProgressEvent("cell_start", "b", 1, 4))
    assert seen[-1].remaining_s is None and seen[-1].remaining == ""
    assert estimate.began is not None
    estimate.began -= 30  # one cell of the three left took 30 s
    estimate(ProgressEvent("cell_done", "b", 2, 4))
    assert seen[-1].remaining_s == pytest.approx(60, rel=0.05) and seen[-1].remaining == "about 60 s left"
    assert ProgressEvent("cell_done", remaining_s=300).remaining == "about 5 min left"


def test_a_server_started_before_the_first_cell_is_not_spread_over_the_cells_left(monkeypatch):
    """A resumed deploy run: 4 cells finished earlier, one server started in 118 s, then 10 s a cell for 20 cells. The
    estimate after its first cell reads about 19 x 10 s, not the start spread over them (42 min)."""
    now = [1000.0]
    monkeypatch.setattr(sweep.progress.time, "monotonic", lambda: now[0])
    seen = []
    estimate = sweep.progress.Estimate(seen.append)
    for done in range(4):
        estimate(ProgressEvent("cell_skipped", f"finished{done}", done + 1, 24))
    estimate(ProgressEvent("server", "", 4, 24, message="starting draft_model K=2"))
    now[0] += 118
    estimate(ProgressEvent("server", "", 4, 24, message="draft_model K=2 started in 118 s"))
    estimate(ProgressEvent("cell_start", "c1", 4, 24))
    now[0] += 10
    estimate(ProgressEvent("cell_done", "c1", 5, 24))
    assert seen[-1].remaining_s == pytest.approx(190) and seen[-1].remaining == "about 3 min left"


def test_repeats_and_alongside_change_the_run_id_only_when_used():
    assert spec(repeats=1).resolved_run_id("abc") == spec().resolved_run_id("abc")
    assert spec(repeats=3).resolved_run_id("abc") != spec().resolved_run_id("abc")
    with pytest.raises(ConfigError, match="Repeats"):
        spec(repeats=0)


def test_written_runs_carry_lossless_mismatches_and_hygiene_flags(specscope_home):
    run_id = "sweep-hygiene"
    base = {
        "source": "specscope",
        "model": "m",
        "dataset": "open-chat",
        "hardware": "cpu-2core",
        "output_len": 16,
        "concurrency": 4,
        "status": "ok",
        "error": None,
        "temperature": 0.0,
        "created_at": "2026-11-21T22:00:00+00:00",
        "request_rate": float("inf"),
        "completed": 8,
        "warmups": 1,
        "wave_share": 1.0,
        "max_num_seqs": 8,
    }
    same, other = {"p1": "aa", "p2": "bb"}, {"p1": "aa", "p2": "cc"}
    for r, tps in ((1, 40.0), (2, 42.0)):
        row = {**base, "method": "none", "k": 0, "repeat": r, "output_throughput": tps}
        sweep.save_cell(run_id, f"none-k0-c4-r{r}", sweep.FinishedCell(row, [], same))
    sweep.save_cell(
        run_id,
        "ngram-k4-c4-r1",
        sweep.FinishedCell({**base, "method": "ngram", "k": 4, "repeat": 1, "output_throughput": 60.0}, [], same),
    )
    suffix = {**base, "method": "suffix", "k": 4, "repeat": 1, "output_throughput": 70.0, "prior_requests": 8}
    sweep.save_cell(run_id, "suffix-k4-c4-r1", sweep.FinishedCell(suffix, [], other))
    sweep.write_run(run_id)
    rows = Store().query(
        "SELECT method, repeat, lossless_mismatches, hygiene FROM results WHERE run_id = ? ORDER BY method, repeat",
        [run_id],
    )
    got = {(m, r): (lm, h) for m, r, lm, h in rows.itertuples(index=False)}
    assert got[("none", 1)][1] == "waves"  # two repeats: enough for an interval
    assert got[("ngram", 1)] == (0, "waves,few_requests")
    assert got[("suffix", 1)] == (1, "waves,suffix_cache,few_requests,lossless")
    counts = sweep.run_hygiene(run_id)
    assert (counts["waves"], counts["few_requests"], counts["lossless"], counts["warmup"]) == (4, 2, 1, 0)
    table = run_results.cell_table(Store(), run_id)
    none = table[table["method"] == "none"].iloc[0]
    assert none["repeats"] == 2 and none["output_throughput"] == pytest.approx(41.0)
    assert none["output_throughput_lo"] < 41.0 < none["output_throughput_hi"]
    assert table[table["method"] == "ngram"]["speedup"].iloc[0] == pytest.approx(60 / 41)


def test_a_schedule_is_its_own_server_after_the_fixed_k():
    planned = sweep.plan_cells(spec(ks=(4,), k_schedule="1-2:4, 3-256:1"))
    assert [c.cell_id for c in planned] == [
        "none-k0-c1",
        "none-k0-c4",
        "ngram-k4-c1",
        "ngram-k4-c4",
        "ngram-schedule-1-2k4_3-256k1-c1",
        "ngram-schedule-1-2k4_3-256k1-c4",
    ]
    fixed, scheduled = planned[2], planned[4]
    assert (scheduled.k, scheduled.k_schedule) == (4, "1-2:4,3-256:1")  # canonical text, K = its maximum
    assert fixed.group != scheduled.group and len({c.group for c in planned}) == 3
    assert sweep.plan_cells(spec(ks=(1,), k_schedule="auto"))[-1].k_schedule == "auto"
    assert spec(k_schedule="auto").resolved_run_id("abc") != spec().resolved_run_id("abc")


@pytest.mark.parametrize(
    "overrides", [{"k_schedule": "1-2:x"}, {"methods": ("none",), "k_schedule": "auto"}, {"k_schedule": "3-8:2"}]
)
def test_bad_schedules_are_config_errors(overrides):
    with pytest.raises(ConfigError):
        spec(**overrides)


def test_auto_schedule_without_measured_cells_says_what_to_do(specscope_home):
    with pytest.raises(ConfigError, match="give the schedule itself"):
        sweep.lane.advised_cell(
            sweep.Cell("ngram", 0, 1, None, "auto"), "sweep-empty", "open-chat", deploy.from_results
        )


def test_a_run_keeps_each_schedule_apart():
    """A schedule's cells are named by it, so a run resumed with another schedule measures that one beside the
    first (the deploy loop prices the schedule's runner with one schedule, then verifies another)."""
    first = {c.cell_id for c in sweep.plan_cells(spec(ks=(4,), k_schedule="1-2:4,3-256:1"))}
    second = {c.cell_id for c in sweep.plan_cells(spec(ks=(4,), k_schedule="1-4:2"))}
    assert first & second == {"none-k0-c1", "none-k0-c4", "ngram-k4-c1", "ngram-k4-c4"}
    assert "ngram-schedule-1-4k2-c1" in second and "ngram-schedule-auto-c1" in {
        c.cell_id for c in sweep.plan_cells(spec(ks=(4,), k_schedule="auto"))
    }


def test_cli_passes_the_schedule():
    args = build_parser().parse_args(["bench", "--preset", "p", "--prompts", "x", "--k-schedule", "auto"])
    assert args.k_schedule == "auto"


def test_preflight_plans_the_baseline_without_k_and_an_auto_schedule_as_k1():
    checked = []

    class Recorder:
        def check(self, method, k, k_schedule=None):
            if method == "none" and k:
                raise ConfigError("method 'none' takes no K.")
            checked.append((method, k, k_schedule.text() if k_schedule else None))

    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(2,),
        concurrencies=(1,),
        prompts=Path("p.jsonl"),
        k_schedule="auto",
    )
    sweep.run.preflight(Recorder(), list(dict.fromkeys(cell.group for cell in sweep.plan_cells(spec))))
    assert checked == [("none", 0, None), ("ngram", 2, None), ("ngram", 1, "1:1")]


def test_cpu_servers_run_side_by_side_as_memory_allows(monkeypatch):
    monkeypatch.setattr(procfs, "memory_available_bytes", lambda: 21 * 2**30)
    assert sweep.room.cpu_room() == 5
    monkeypatch.setattr(procfs, "memory_available_bytes", lambda: 3 * 2**30)
    assert sweep.room.cpu_room() == 2  # a baseline and one method server, as a round needs at least
    monkeypatch.setattr(procfs, "memory_available_bytes", lambda: None)
    assert sweep.room.cpu_room() == 2


def test_keep_on_a_ray_sweep_is_refused_in_one_sentence_before_any_cluster_is_reached():
    from specscope.sweep import on_ray

    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=DATA / "prompts" / "code-editing.jsonl",
        num_prompts=1,
        output_len=4,
    )
    with pytest.raises(ConfigError, match="none can be kept; leave out --keep"):
        on_ray.run_on_ray(sweep.as_plan(spec), "127.0.0.1:9", sweep.LaunchOptions(keep=True))
