"""Prompt-set parsing: every format, every kind of problem named by line and field, and a fuzz."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specscope import prompts
from specscope.errors import InputError
from specscope.prompts import library


def jsonl(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records).encode()


def test_jsonl_prompt_messages_and_custom_output_tokens():
    data = jsonl(
        {"prompt": "Hi there", "output_tokens": 12},
        {
            "id": "x",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],
        },
    )
    result = prompts.parse(data, "mine.jsonl")
    assert result.name == "mine" and result.format == "jsonl" and len(result) == 2
    first, second = result.prompts
    assert (first.prompt_id, first.line, first.output_tokens, first.text) == ("L1", 1, 12, "Hi there")
    assert second.prompt_id == "x" and second.chat_messages()[0] == {"role": "system", "content": "Be brief."}
    assert second.text == "Name a colour."


def test_blank_lines_in_jsonl_keep_line_numbers():
    data = b'{"prompt": "a"}\n\n{"prompt": 5}\n'
    with pytest.raises(InputError) as info:
        prompts.parse(data, "s.jsonl")
    assert info.value.line == 3 and info.value.field == "prompt"
    assert "s.jsonl line 3, field 'prompt'" in str(info.value)


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"prompt": ""}', "prompt"),
        ('{"prompt": "ok", "output_tokens": 0}', "output_tokens"),
        ('{"prompt": "ok", "output_tokens": true}', "output_tokens"),
        ('{"messages": []}', "messages"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "messages[0].role"),
        ('{"messages": [{"role": "user", "content": 3}]}', "messages[0].content"),
        ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}', "messages[1].role"),
        ('{"text": "no prompt key"}', "prompt"),
        ('{"prompt": "ok", "id": [1]}', "id"),
        ("[1, 2]", None),
        ('{"prompt": "unterminated', None),
    ],
)
def test_each_jsonl_problem_names_line_and_field(line, field):
    data = jsonl({"prompt": "fine"}, line)
    errors = prompts.problems(data, "set.jsonl")
    assert errors and errors[0].line == 2 and errors[0].field == field


def test_all_problems_are_listed_and_parse_counts_them():
    data = jsonl({"prompt": 1}, {"prompt": "ok"}, "not json", {"prompt": "ok", "output_tokens": -3})
    errors = prompts.problems(data, "set.jsonl")
    assert [e.line for e in errors] == [1, 3, 4]
    with pytest.raises(InputError, match=r"2 more problems"):
        prompts.parse(data, "set.jsonl")


def test_duplicate_ids_are_named():
    errors = prompts.problems(jsonl({"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}), "d.jsonl")
    assert errors[0].line == 2 and errors[0].field == "id" and "line 1" in str(errors[0])


def test_csv_prompt_column_and_quoted_multiline_cells():
    data = b'id,Prompt,output_tokens\na,"first\nprompt",5\nb,second,\n'
    result = prompts.parse(data, "set.csv")
    assert [p.text for p in result.prompts] == ["first\nprompt", "second"]
    assert [p.line for p in result.prompts] == [2, 4]
    assert result.prompts[0].output_tokens == 5 and result.prompts[1].output_tokens is None


def test_csv_problems():
    assert prompts.problems(b"question\nhello\n", "q.csv")[0].field == "prompt"
    error = prompts.problems(b"prompt,id\nhello,1\nhi\n", "q.csv")[0]
    assert error.line == 3 and "cells" in str(error)
    assert prompts.problems(b"prompt,output_tokens\nhello,many\n", "q.csv")[0].field == "output_tokens"


def test_txt_one_per_line_and_blank_line_blocks():
    lines = prompts.parse(b"first\nsecond\nthird\n", "t.txt")
    assert [p.text for p in lines.prompts] == ["first", "second", "third"]
    blocks = prompts.parse(b"para one\nstill one\n\n\npara two\n", "t.txt")
    assert [(p.line, p.text) for p in blocks.prompts] == [(1, "para one\nstill one"), (5, "para two")]


def test_sharegpt_first_human_turn_with_line_numbers():
    data = json.dumps(
        [
            {
                "id": "c1",
                "conversations": [
                    {"from": "system", "value": "sys"},
                    {"from": "human", "value": "Hello?"},
                    {"from": "gpt", "value": "Hi"},
                ],
            },
            {"conversations": [{"from": "gpt", "value": "only gpt"}]},
        ],
        indent=1,
    ).encode()
    errors = prompts.problems(data, "share.json")
    assert len(errors) == 1 and errors[0].field == "conversations"
    second_object = data.index(b' {\n  "conversations"')
    assert errors[0].line == data[:second_object].count(b"\n") + 1
    ok = prompts.parse(data.replace(b'"gpt",\n    "value": "only gpt"', b'"human", "value": "Q"'), "share.json")
    assert [p.text for p in ok.prompts] == ["Hello?", "Q"] and ok.prompts[0].prompt_id == "c1"


def test_file_level_problems_have_line_numbers():
    assert prompts.problems(b"", "e.jsonl")[0].line == 1
    assert prompts.problems(b'{"prompt": "a"}\n\xff\xfe', "e.jsonl")[0].line == 2
    assert prompts.problems(b"x", "e.docx")[0].line == 1
    big = b'{"prompt": "a"}\n' * (prompts.MAX_BYTES // 16 + 1)
    assert "limit" in str(prompts.problems(big, "big.jsonl")[0])


def test_save_stores_under_content_hash_once(specscope_home):
    data = jsonl({"prompt": "a"}, {"prompt": "b"})
    prompt_set, path = library.save(data, "My Set!.jsonl")
    assert path.parent.name == prompt_set.sha256[:16] and path.name == "My-Set.jsonl"
    assert path.read_bytes() == data
    assert library.save(data, "My Set!.jsonl")[1] == path
    assert library.stored_sets() == [path]
    with pytest.raises(InputError):
        library.save(b"{", "bad.jsonl")


def test_bundled_sets_parse():
    names = {prompts.load(p).name: len(prompts.load(p)) for p in library.bundled_sets()}
    assert set(names) >= {"open-chat", "code-editing", "summarisation"}
    assert all(10 <= n <= 30 for n in names.values())


# --- fuzz: every file either parses or raises InputError with a line number ---------------

EXTENSIONS = st.sampled_from([".jsonl", ".csv", ".txt", ".json", ".ndjson", ".md", ""])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["prompt", "messages", "role", "content", "id", "output_tokens", "conversations", "from", "value", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
LINES = st.one_of(
    st.text(max_size=40),
    JSON_VALUES.map(json.dumps),
    st.sampled_from(
        [
            '{"prompt": "ok"}',
            "prompt,id",
            '"unclosed',
            "[",
            "]",
            ",",
            "\x00",
            "\r",
            '{"messages": [{"role": "user", "content": "hi"}]}',
            '[{"conversations": [{"from": "human", "value": "hi"}]}]',
            "[" * 3000,
        ]
    ),
)


def _check(data: bytes, filename: str) -> None:
    try:
        result = prompts.parse(data, filename)
    except InputError as exc:
        assert isinstance(exc.line, int) and exc.line >= 1, (exc, exc.line)
        assert str(exc)
    else:
        assert len(result) >= 1 and all(p.text.strip() for p in result.prompts)


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINES, max_size=8), ext=EXTENSIONS, crlf=st.booleans())
def test_fuzz_structured_lines(lines, ext, crlf):
    _check(("\r\n" if crlf else "\n").join(lines).encode("utf-8", "surrogatepass"), f"f{ext}")


@settings(max_examples=600, deadline=None)
@given(data=st.binary(max_size=300), ext=EXTENSIONS)
def test_fuzz_raw_bytes(data, ext):
    _check(data, f"f{ext}")


@settings(max_examples=400, deadline=None)
@given(
    bad=JSON_VALUES.filter(
        lambda v: (
            not (
                isinstance(v, dict) and isinstance(v.get("prompt"), str) and v["prompt"].strip() and "messages" not in v
            )
        )
    ),
    before=st.integers(0, 5),
)
def test_fuzz_one_bad_record_is_found_on_its_line(bad, before):
    """A valid JSONL set with one record replaced: if it fails, it fails on that record's line."""
    records = [{"prompt": f"p{i}"} for i in range(before)] + [bad, {"prompt": "last"}]
    data = "\n".join(json.dumps(r) for r in records).encode()
    try:
        prompts.parse(data, "f.jsonl")
    except InputError as exc:
        assert exc.line == before + 1
