"""Per-prompt speedups: on the bundled CPU requests (checked against a pandas computation from the
file itself) and on small runs written here (pairing, one-prompt groups, categories, lengths)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from helpers.paths import DATA
from specscope import prompts, sweep
from specscope.analysis import per_prompt, run_results
from specscope.cli import main
from specscope.errors import ConfigError, InputError
from specscope.prompts import library
from specscope.results import writing
from specscope.results.store import Store

BUNDLED = DATA / "requests" / "specscope-cpu-code-editing.parquet"
RUN = "specscope-cpu-code-editing"


def test_bundled_requests_pair_every_prompt_with_its_runs_baseline(specscope_home):
    rows = per_prompt.per_prompt(Store(), {"run_id": [RUN]})
    assert len(rows) == 8 * 8  # 8 prompts in each of the 8 speculative cells
    assert set(rows["category"]) == {"coding"}  # the file predates the column: taken from the bundled set
    assert set(rows["requests"]) == {3} and set(rows["baseline_requests"]) == {3}  # three repeats a side
    assert set(rows["length_bucket"]) == {"64–127"}

    raw = pd.read_parquet(BUNDLED)
    raw = raw[raw["success"]].assign(rate=lambda f: 1000 * f["output_tokens"] / f["e2el_ms"])
    means = raw.groupby(["method", "k", "concurrency", "prompt_id"])["rate"].mean()
    base = means.xs("none", level="method").droplevel("k")
    row = rows[
        (rows["method"] == "suffix") & (rows["k"] == 4) & (rows["concurrency"] == 4) & (rows["prompt_id"] == "code-03")
    ].iloc[0]
    assert row["speedup"] == pytest.approx(means[("suffix", 4, 4, "code-03")] / base[(4, "code-03")], rel=1e-12)
    assert row["speedup_interval"] == "fieller" and row["speedup_lo"] < row["speedup"] < row["speedup_hi"]


def test_bundled_category_speedup_is_the_geometric_mean_of_its_prompts(specscope_home):
    db = Store()
    rows = per_prompt.per_prompt(db, {"run_id": [RUN]})
    grouped = per_prompt.by(db, "category", {"run_id": [RUN]})
    ngram = grouped[(grouped["method"] == "ngram") & (grouped["k"] == 4) & (grouped["concurrency"] == 1)].iloc[0]
    logs = np.log(rows[(rows["method"] == "ngram") & (rows["k"] == 4) & (rows["concurrency"] == 1)]["speedup"])
    assert ngram["prompts"] == 8 and ngram["speedup"] == pytest.approx(math.exp(logs.mean()), rel=1e-12)
    half = 2.364624251592785 * logs.std(ddof=1) / math.sqrt(8)  # t(0.975, 7)
    assert ngram["speedup_lo"] == pytest.approx(math.exp(logs.mean() - half), rel=1e-9)
    assert ngram["speedup_hi"] == pytest.approx(math.exp(logs.mean() + half), rel=1e-9)
    assert ngram["verdict"] == "faster"
    baselines = grouped[grouped["method"] == "none"]
    assert len(baselines) == 2 and set(baselines["speedup"]) == {1.0} and set(baselines["verdict"]) == {"baseline"}


def test_bundled_slower_list_holds_exactly_the_prompts_below_one(specscope_home):
    rows = per_prompt.per_prompt(Store(), {"run_id": [RUN]})
    slow = per_prompt.slower(Store(), {"run_id": [RUN]})
    assert len(slow) == int((rows["speedup"] < 1).sum()) > 0
    assert slow["speedup"].is_monotonic_increasing and (slow["speedup"] < 1).all()
    assert slow["within_noise"].tolist() == (slow["speedup_hi"] >= 1).tolist()


def _request(prompt_id, method, k, concurrency, e2el_ms, category=None, tokens=40, repeat=None, **extra):
    cell = sweep.Cell(method, k, concurrency, repeat).cell_id
    return {
        "cell_id": cell,
        "prompt_id": prompt_id,
        "category": category,
        "method": method,
        "k": k,
        "concurrency": concurrency,
        "success": True,
        "prompt_tokens": tokens,
        "output_tokens": 20,
        "e2el_ms": e2el_ms,
        **extra,
    }


def _run(run_id: str, requests: list[dict], dataset: str = "mine") -> None:
    cells = {(r["method"], r["k"], r["concurrency"]) for r in requests}
    writing.write_results(
        [
            {
                "source": "specscope",
                "model": "m",
                "dataset": dataset,
                "method": m,
                "k": k,
                "concurrency": c,
                "output_throughput": 10.0,
                "status": "ok",
            }
            for m, k, c in cells
        ],
        run_id=run_id,
    )
    writing.write_requests(requests, run_id=run_id)


def test_a_prompt_pairs_with_the_baseline_of_its_own_run_and_concurrency(specscope_home, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    _run(
        "a",
        [
            _request("p1", "none", 0, 1, 1000.0, "chat"),
            _request("p1", "none", 0, 2, 4000.0, "chat"),
            _request("p1", "ngram", 4, 1, 500.0, "chat"),
            _request("p1", "ngram", 4, 2, 1000.0, "chat"),
        ],
    )
    _run("b", [_request("p1", "none", 0, 1, 10.0, "chat")])  # another run's baseline is never used
    assert per_prompt.runs(per_prompt.per_prompt(Store())) == ["a"]  # b has no method cell to pair
    rows = per_prompt.per_prompt(Store()).set_index("concurrency")
    assert rows.loc[1, "speedup"] == pytest.approx(2.0) and rows.loc[2, "speedup"] == pytest.approx(4.0)
    assert rows["speedup_interval"].tolist() == ["none", "none"]  # one request a side: no interval


def test_small_groups_have_no_interval_and_lengths_fall_in_doubling_buckets(specscope_home, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    requests = []
    for prompt_id, category, tokens, base, sd in [
        ("c1", "coding", 100, 1000.0, 500.0),
        ("c2", "coding", 120, 1000.0, 800.0),
        ("t1", "chat", 20, 1000.0, 1250.0),
        ("x", None, 3000, 900.0, 900.0),
    ]:
        requests += [
            _request(prompt_id, "none", 0, 1, base, category, tokens),
            _request(prompt_id, "ngram", 4, 1, sd, category, tokens, acceptance_length=2.0),
        ]
    _run("r", requests)
    db = Store()
    categories = per_prompt.by(db, "category")
    ngram = categories[categories["method"] == "ngram"].set_index("group")
    assert list(ngram.index) == ["chat", "coding", per_prompt.UNCATEGORISED]
    assert ngram.loc["coding", "speedup"] == pytest.approx(math.sqrt(2.0 * 1.25))
    assert ngram.loc["chat", "verdict"] == "too few prompts" and pd.isna(ngram.loc["chat", "speedup_lo"])
    assert ngram.loc["coding", "verdict"] == "too few prompts" and pd.isna(ngram.loc["coding", "speedup_hi"])
    assert ngram.loc["chat", "speedup"] == pytest.approx(0.8) and ngram.loc["chat", "slower_prompts"] == 1
    lengths = per_prompt.by(db, "prompt_length")
    assert lengths[lengths["method"] == "ngram"]["group"].tolist() == ["<64", "64–127", "2048–4095"]
    slow = per_prompt.slower(db)
    assert slow["prompt_id"].tolist() == ["t1"] and not slow["within_noise"].iloc[0]  # no interval: no tie


def test_length_buckets_double_from_64_tokens():
    assert [per_prompt.length_bucket(t)[1] for t in (0, 63, 64, 127, 128, 8191, 8192, 100_000)] == [
        "<64",
        "<64",
        "64–127",
        "64–127",
        "128–255",
        "4096–8191",
        "≥8192",
        "≥8192",
    ]
    assert per_prompt.length_bucket(None)[1] == "unknown"
    with pytest.raises(ConfigError, match="category or prompt_length"):
        per_prompt.by(None, "colour")


def test_prompt_sets_carry_a_category_in_jsonl_and_csv():
    jsonl = prompts.parse(b'{"id": "a", "prompt": "hi", "category": " coding "}\n{"prompt": "yo"}\n', "s.jsonl")
    assert [p.category for p in jsonl.prompts] == ["coding", None]
    csv = prompts.parse(b"id,prompt,category\n1,hello,chat\n2,bye,\n", "s.csv")
    assert [p.category for p in csv.prompts] == ["chat", None]
    with pytest.raises(InputError, match="s.jsonl line 1, field 'category': must be a short text"):
        prompts.parse(b'{"prompt": "hi", "category": "<b>x</b>"}\n', "s.jsonl")
    with pytest.raises(InputError, match="field 'category'"):
        prompts.parse(b'{"prompt": "hi", "category": 7}\n', "s.jsonl")
    with pytest.raises(InputError, match="field 'category'"):
        prompts.parse(("id,prompt,category\n1,hi," + "x" * 41 + "\n").encode(), "s.csv")


def test_every_bundled_set_gives_each_prompt_a_category(capsys):
    categories = {path.stem: {p.category for p in prompts.load(path).prompts} for path in library.bundled_sets()}
    assert categories["code-editing"] == {"coding"} and categories["open-chat"] == {"chat"}
    assert categories["summarisation"] == {"summarisation"}
    assert categories["mixed"] == {"coding", "chat", "summarisation"}
    mixed = next(path for path in library.bundled_sets() if path.stem == "mixed")
    assert main(["prompts", "check", str(mixed)]) == 0
    assert "categories: chat 4, coding 4, summarisation 4" in capsys.readouterr().out


def test_the_cli_prints_groups_and_the_slower_list(specscope_home, capsys):
    assert main(["speedup", "--by", "category", "--run-id", RUN, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {r["group"] for r in printed} == {"coding"} and len(printed) == 10
    assert [r["speedup"] for r in printed if r["method"] == "none"] == [1.0, 1.0]
    assert main(["speedup", "--slower", "--run-id", RUN]) == 0
    text = capsys.readouterr().out
    assert "tie (within noise)" in text and "code-06" in text
    assert main(["speedup", "--by", "prompt_length", "--run-id", "no-such-run"]) == 0
    assert "no per-prompt rows match" in capsys.readouterr().out


def test_a_prompt_pairs_with_the_baseline_of_its_own_format_and_vllm(specscope_home, monkeypatch):
    """A constrained cell's prompt divides by the constrained baseline's, a cell on vLLM 0.31.0 by the
    0.31.0 baseline's: never by a baseline of the same run with other formats or on another vLLM."""
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))

    def request(method, k, e2el_ms, constrained=False, vllm=None):
        cell = sweep.Cell(method, k, 1, constrained=constrained, vllm=vllm).cell_id
        return {
            **_request("p1", method, k, 1, e2el_ms, "chat"),
            "cell_id": cell,
            "response_format": "json_schema" if constrained else "none",
        }

    _run(
        "v",
        [
            request("none", 0, 1000.0),
            request("ngram", 4, 500.0),
            request("none", 0, 3000.0, constrained=True),
            request("ngram", 4, 1000.0, constrained=True),
            request("none", 0, 800.0, vllm="0.31.0"),
            request("ngram", 4, 100.0, vllm="0.31.0"),
        ],
    )
    rows = per_prompt.per_prompt(Store()).set_index("cell")
    assert len(rows) == 3  # one pair per variant, none across them
    assert rows.loc["ngram-k4-c1", "speedup"] == pytest.approx(2.0)
    assert rows.loc["ngram-k4-c1-constrained", "speedup"] == pytest.approx(3.0)
    assert rows.loc["ngram-k4-c1-vllm0.31.0", "speedup"] == pytest.approx(8.0)
    runs_page = run_results.per_prompt(Store(), "v")  # the Runs page's per-prompt bars pair the same way
    sd = runs_page[runs_page["method"] == "ngram"].set_index("variant")["speedup"]
    assert sd.to_dict() == pytest.approx({"": 2.0, "-constrained": 3.0, "-vllm0.31.0": 8.0})
    grouped = per_prompt.by(Store(), "category")
    labels = {per_prompt.variant_label(row) for _, row in grouped.iterrows()}
    assert labels == {"", " constrained", " vLLM 0.31.0"}
    assert set(grouped.loc[grouped["method"] == "none", "cell"]) == {
        "none-k0-c1",
        "none-k0-c1-constrained",
        "none-k0-c1-vllm0.31.0",
    }


def test_a_constrained_cell_is_a_trace_of_its_own_in_the_category_charts(specscope_home):
    """The bundled structured run measured ngram K=4 free and constrained on one set: each has its own trace,
    and the legend says which (one trace for both drew constrained points in the free cell's colour)."""
    from ui.per_prompt import by_group

    grouped = per_prompt.by(Store(), "category", {"run_id": ["specscope-cpu-structured"]})
    for value in ("speedup", "acceptance_length"):
        traces = [t for t in by_group(grouped, value, "t", "y").data if t.showlegend]
        assert [t.name for t in traces] == ["ngram K=4 c=1", "ngram K=4 c=1 constrained"]
        assert traces[0].marker.color != traces[1].marker.color
