"""``specscope stop --all`` ends the dashboard ``launchers/start.sh`` recorded, and only a Streamlit
process; ``specscope --version`` names the version."""

from __future__ import annotations

import subprocess
import sys

import pytest

import specscope
from specscope.cli import main
from specscope.launch import dashboard


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
