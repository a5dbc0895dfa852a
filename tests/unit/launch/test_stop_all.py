"""``specscope stop --all`` ends the dashboard ``launchers/start.sh`` recorded, and only a Streamlit
process, and the servers side by side; ``specscope --version`` names the version."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import specscope
from specscope import launch
from specscope.cli import main
from specscope.launch import dashboard, registry


def _process(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])


def test_stop_all_ends_the_recorded_dashboard(specscope_home, capsys):
    streamlit = _process("streamlit", "run", "app/main.py")  # what start.sh runs, as ps shows it
    try:
        dashboard.record(streamlit.pid)
        assert main(["stop", "--all"]) == 0
        assert streamlit.wait(15) is not None
        assert f"the dashboard (process {streamlit.pid})" in capsys.readouterr().out
        assert not dashboard.pid_file().exists()
    finally:
        streamlit.kill()


def test_a_recorded_pid_that_runs_something_else_is_left_alone(specscope_home, capsys):
    other = _process()
    try:
        dashboard.record(other.pid)
        assert main(["stop", "--all"]) == 0
        assert other.poll() is None and "no servers" in capsys.readouterr().out
    finally:
        other.kill()


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"specscope {specscope.__version__}"


def test_stop_all_ends_servers_side_by_side(specscope_home):
    """Servers whose processes take 2 s to end after a TERM end together: `docker stop` gives 10 s."""
    slow = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(2), sys.exit(0))); "
        "time.sleep(60)"
    )
    servers = [subprocess.Popen([sys.executable, "-c", slow], start_new_session=True) for _ in range(4)]
    time.sleep(0.5)  # their TERM handlers are set
    for i, proc in enumerate(servers):
        registry.write_state(
            registry.ServerState(name=f"s{i}", url=f"http://127.0.0.1:{9 + i}", pid=proc.pid, pgid=proc.pid)
        )
    began = time.monotonic()
    assert sorted(launch.stop_all()) == ["s0", "s1", "s2", "s3"]
    assert time.monotonic() - began < 6  # one after another: 8 s
    assert all(proc.wait(5) == 0 for proc in servers) and registry.read_states() == []
