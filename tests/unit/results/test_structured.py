"""Structured output as a dimension of the store: a constrained cell divides by its run's constrained
baseline, repeats of free and constrained cells never fold together, and the free-vs-constrained
comparison (library, CLI) pairs them, with the requests' longest gaps and validity."""

from __future__ import annotations

import json

import pytest

from specscope.cli import main as cli_main
from specscope.results import structured, writing
from specscope.results.store import Store


def _row(method, k, fmt, repeat, tput, **extra):
    return {
        "source": "specscope",
        "model": "m",
        "dataset": "json-extraction",
        "hardware": "cpu",
        "host": "h",
        "output_len": 64,
        "temperature": 0.0,
        "concurrency": 1,
        "method": method,
        "k": k,
        "response_format": fmt,
        "repeat": repeat,
        "output_throughput": tput,
        "status": "ok",
        "acceptance_length": None if method == "none" else (2.0 if fmt == "none" else 1.5),
        "valid_share": None if fmt == "none" else 1.0,
        "max_itl_ms": 100.0 + repeat,
        **extra,
    }


@pytest.fixture
def db(tmp_path):
    results, requests = tmp_path / "results", tmp_path / "requests"
    rows = []
    for repeat in (1, 2, 3):
        rows += [
            _row("none", 0, "none", repeat, 10.0 + repeat),
            _row("none", 0, "json_schema", repeat, 5.0 + repeat),
            _row("ngram", 4, "none", repeat, 20.0 + repeat),
            _row("ngram", 4, "json_schema", repeat, 6.0 + repeat),
        ]
    writing.write_results(rows, run_id="run-a", directory=results)
    # an older run without the column: its rows read null and pair with nothing
    writing.write_results(
        [{k: v for k, v in r.items() if k not in ("response_format", "valid_share", "max_itl_ms")} for r in rows[:1]],
        run_id="run-old",
        directory=results,
    )
    writing.write_requests(
        [
            {
                "cell_id": "ngram-k4-c1-constrained-r1",
                "prompt_id": "json-01",
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "success": True,
                "output_tokens": 29,
                "response_format": "json_schema",
                "valid": False,
                "invalid_reason": "The answer was cut by max_tokens before the format closed.",
                "max_itl_ms": 5200.0,
            },
            {
                "cell_id": "ngram-k4-c1-r1",
                "prompt_id": "json-01",
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "success": True,
                "output_tokens": 64,
                "response_format": "none",
                "valid": None,
                "max_itl_ms": 90.0,
            },
        ],
        run_id="run-a",
        directory=requests,
    )
    return Store(result_dirs=[results], request_dirs=[requests])


def test_a_constrained_cell_divides_by_the_constrained_baseline_of_its_run(db):
    frame = db.speedup({"run_id": ["run-a"]}, columns=["response_format", "max_itl_ms"])
    got = {(r.method, r.response_format): (r.speedup, r.repeats) for r in frame.itertuples()}
    assert got == {
        ("none", "none"): (1.0, 3),
        ("none", "json_schema"): (1.0, 3),
        ("ngram", "none"): (pytest.approx(22.0 / 12.0), 3),
        ("ngram", "json_schema"): (pytest.approx(8.0 / 7.0), 3),
    }
    assert set(frame["max_itl_ms"]) == {103.0}  # repeats fold to their longest gap


def test_free_and_constrained_sit_side_by_side(db):
    frame = structured.by_response_format(db, {"run_id": ["run-a"]})
    assert list(zip(frame["method"], frame["format"])) == [
        ("none", "free"),
        ("none", "constrained (json_schema)"),
        ("ngram", "free"),
        ("ngram", "constrained (json_schema)"),
    ]
    assert "constrained" not in frame["setup"].iloc[3]
    pairs = structured.side_by_side(frame)
    ngram = pairs[pairs["method"] == "ngram"].iloc[0]
    assert ngram["free_speedup"] == pytest.approx(22.0 / 12.0)
    assert ngram["constrained_speedup"] == pytest.approx(8.0 / 7.0)
    assert ngram["constrained_speedup_lo"] < ngram["constrained_speedup"] < ngram["constrained_speedup_hi"]
    assert (ngram["valid_share"], ngram["free_acceptance_length"], ngram["constrained_acceptance_length"]) == (
        1.0,
        2.0,
        1.5,
    )
    assert structured.by_response_format(db, {"run_id": ["run-old"]}).empty


def test_request_gaps_carry_validity_and_the_longest_gap(db):
    gaps = structured.request_gaps(db, {"run_id": ["run-a"]})
    stalled = gaps[gaps["response_format"] == "json_schema"].iloc[0]
    assert stalled["max_itl_ms"] == 5200.0 and not stalled["valid"] and "cut by max_tokens" in stalled["invalid_reason"]
    assert gaps[gaps["response_format"] == "none"]["valid"].isna().all()


def test_cli_speedup_by_response_format(db, monkeypatch, capsys):
    monkeypatch.setattr("specscope.cli.results.Store", lambda: db)
    assert cli_main(["speedup", "--by", "response_format", "--json", "--method", "ngram"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["format"], round(r["speedup"], 4)) for r in records] == [
        ("free", round(22.0 / 12.0, 4)),
        ("constrained (json_schema)", round(8.0 / 7.0, 4)),
    ]
    assert records[1]["valid_share"] == 1.0 and records[1]["speedup_lo"] is not None
    assert cli_main(["speedup", "--by", "response_format", "--method", "ngram"]) == 0
    text = capsys.readouterr().out
    assert "constrained (json_schema)" in text and "1.833×" in text and "1.143×" in text


def test_a_sweep_plans_free_and_constrained_cells_on_one_server(specscope_home, tmp_path):
    from specscope import sweep

    def spec(**kw):
        return sweep.SweepSpec(
            preset="cpu-smollm2",
            methods=("none", "ngram"),
            ks=(4,),
            concurrencies=(1,),
            prompts=tmp_path / "s.jsonl",
            repeats=2,
            **kw,
        )

    cells = sweep.plan_cells(spec(structured="both"))
    assert [c.cell_id for c in cells[:4]] == [
        "none-k0-c1-r1",
        "none-k0-c1-constrained-r1",
        "ngram-k4-c1-r1",
        "ngram-k4-c1-constrained-r1",
    ]
    assert cells[0].group == cells[1].group  # the same server
    assert [c.cell_id for c in sweep.plan_cells(spec())] == [
        "none-k0-c1-r1",
        "ngram-k4-c1-r1",
        "none-k0-c1-r2",
        "ngram-k4-c1-r2",
    ]
    assert spec().resolved_run_id("abc") != spec(structured="both").resolved_run_id("abc")
    with pytest.raises(Exception, match="one of free, constrained, both"):
        spec(structured="json")
    (tmp_path / "s.jsonl").write_text('{"prompt": "no format here"}\n')
    with pytest.raises(Exception, match="No prompt of s carries a response_format"):
        sweep.run_sweep(spec(structured="constrained"), launcher=None)


def test_lossless_compares_each_format_with_its_own_baseline():
    from specscope import sweep

    rows = [
        {"method": m, "k": k, "concurrency": 1, "response_format": f, "status": "ok", "temperature": 0.0, "repeat": 1}
        for m, k in (("none", 0), ("ngram", 4))
        for f in ("none", "json_schema")
    ]
    outputs = [{"p": "free"}, {"p": "json"}, {"p": "free"}, {"p": "json"}]
    checked = sweep.record.with_hygiene(rows, outputs)
    assert [r.get("lossless_mismatches") for r in checked] == [None, None, 0, 0]


def test_the_comparison_bars_carry_short_labels_and_keep_two_setups_apart(specscope_home):
    """The bundled structured run's free and constrained ngram K=4: each bar holds its value at its foot (the
    interval is its error bar), never "1.20× [1.03, 1.40]" running into the next bar; a second setup with the
    same method, K and concurrency gets its own bar group, named by what tells it apart."""
    import pandas as pd

    from ui.structured import LABELLED, comparison_figure

    frame = structured.by_response_format(Store(), {})
    speedups = [t for t in comparison_figure(frame).data if t.xaxis == "x"]
    assert [t.name for t in speedups] == ["free", "constrained"]
    assert [list(t.text) for t in speedups] == [["1.20×"], ["1.21×"]] and all("[" not in t.text[0] for t in speedups)
    other = frame.assign(setup=frame["setup"].str.replace("vLLM 0.32.0", "vLLM 0.31.0"))
    both = comparison_figure(pd.concat([frame, other], ignore_index=True))
    assert sorted(set(both.data[0].x)) == ["ngram · K=4 · c=1<br>vLLM 0.31.0", "ngram · K=4 · c=1<br>vLLM 0.32.0"]
    many = pd.concat([frame.assign(concurrency=c) for c in range(1, LABELLED + 2)], ignore_index=True)
    assert all(t.text is None for t in comparison_figure(many).data if t.xaxis == "x")  # too narrow for text
