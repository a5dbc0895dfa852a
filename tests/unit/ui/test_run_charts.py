"""Runs page charts and table text: per-request format named, intervals and badges written out."""

import html

import pandas as pd

from ui import run_charts, run_table
from ui.chart_style import k_axis

FRAME = pd.DataFrame(
    [
        {
            "method": "ngram",
            "k": 4,
            "concurrency": 1,
            "variant": "",
            "prompt_id": "<b>p1</b>",
            "acceptance_rate": 0.4,
            "speedup": 1.2,
            "spec_decode_format": "metrics.speculative_decoding",
        },
        {
            "method": "ngram",
            "k": 4,
            "concurrency": 1,
            "variant": "-vllm0.31.0",
            "prompt_id": "<b>p1</b>",
            "acceptance_rate": 0.5,
            "speedup": 1.4,
            "spec_decode_format": "metrics.speculative_decoding",
        },
        {
            "method": "none",
            "k": 0,
            "concurrency": 1,
            "variant": "",
            "prompt_id": "<b>p1</b>",
            "acceptance_rate": None,
            "speedup": 1.0,
            "spec_decode_format": None,
        },
    ]
)


def test_per_prompt_acceptance_names_the_per_request_format_and_escapes_prompt_ids():
    fig = run_charts.per_prompt_acceptance(FRAME)
    assert "metrics.speculative_decoding" not in fig.layout.title.text  # a plain title, the field on hover
    # a title that fits half a laptop page; the axis says whose count it is
    assert len(fig.layout.title.text) <= 44 and "server's count" in fig.layout.yaxis.title.text
    assert "metrics.speculative_decoding" in fig.data[0].hovertemplate
    assert list(fig.data[0].x) == ["&lt;b&gt;p1&lt;/b&gt;"]
    assert [trace.name for trace in fig.data] == ["ngram K=4 c=1", "ngram K=4 c=1 vLLM 0.31.0"]  # one trace a variant


def test_per_prompt_speedup_speaks_plainly():
    fig = run_charts.per_prompt_speedup(FRAME)
    assert "E2EL" not in fig.layout.yaxis.title.text and "faster" in fig.layout.yaxis.title.text


def test_without_per_request_figures_the_chart_says_so():
    fig = run_charts.per_prompt_acceptance(FRAME.assign(acceptance_rate=None))
    lines = html.unescape(fig.layout.annotations[0].text).split("<br>")
    assert " ".join(lines).startswith("No acceptance per prompt: this run's servers reported no per-request")
    assert all(len(line) <= 44 for line in lines)  # fits half of a 1280-pixel page: no word cut at its edges


def test_table_text_for_repeats_single_runs_and_unbounded_speedups():
    cells = pd.DataFrame(
        [
            {
                "method": "none",
                "k": 0,
                "concurrency": 1,
                "status": "ok",
                "repeats": 3,
                "output_throughput": 40.0,
                "output_throughput_lo": 38.0,
                "output_throughput_hi": 42.0,
                "speedup": 1.0,
                "hygiene": "",
            },
            {
                "method": "ngram",
                "k": 4,
                "concurrency": 1,
                "status": "ok",
                "repeats": 3,
                "output_throughput": 60.0,
                "output_throughput_lo": 55.0,
                "output_throughput_hi": 65.0,
                "speedup": 1.5,
                "speedup_lo": 1.3,
                "speedup_hi": 1.7,
                "speedup_interval": "fieller",
                "hygiene": "waves; few_requests",
            },
            {
                "method": "suffix",
                "k": 4,
                "concurrency": 1,
                "status": "ok",
                "repeats": 1,
                "output_throughput": 70.0,
                "speedup": 1.75,
                "speedup_interval": "none",
                "hygiene": "few_requests",
            },
            {
                "method": "suffix",
                "k": 8,
                "concurrency": 1,
                "status": "ok",
                "repeats": 2,
                "output_throughput": 50.0,
                "output_throughput_lo": 10.0,
                "output_throughput_hi": 90.0,
                "speedup": 1.25,
                "speedup_interval": "unbounded",
                "hygiene": None,
            },
        ]
    )
    table = run_table.display_table(cells)
    assert table["tok/s [95%]"].tolist()[:3] == ["40.0 [38.0, 42.0]", "60.0 [55.0, 65.0]", "70.0"]  # once: repeats 1
    assert table["speedup [95%]"].tolist() == [
        "1.000× (baseline)",
        "1.500× [1.300, 1.700]",
        "1.750×",
        "1.250× (baseline too noisy for an interval)",
    ]
    assert table["checks"].tolist() == ["✓", "⚠ waves · few requests", "⚠ few requests", "–"]
    assert "status" not in table and "error" not in table  # every cell ok
    counts = run_table.hygiene_counts(cells)
    assert counts["few_requests"] == 2 and counts["waves"] == 1 and counts["lossless"] == 0


def test_the_k_axis_starts_at_the_smallest_k_not_zero():
    assert k_axis().to_dict()["scale"]["zero"] is False


def test_the_prompt_preview_names_each_format_and_no_empty_output_tokens():
    from specscope import prompts, settings

    preview = run_table.preview(prompts.load(settings.bundled_data_dir() / "prompts" / "json-extraction.jsonl"))
    assert "output tokens" not in preview  # no prompt sets its own: the sweep's length applies
    assert set(preview["format"]) == {"json_schema"} and set(preview["category"]) == {"extraction"}
    assert not preview.isna().any().any()


def test_a_run_without_per_request_rows_says_that_not_that_it_lacks_a_baseline():
    """The issue: the Runs page's default run (a bundled results file, no requests file) read "No per-prompt
    speedup yet: it needs the baseline and an SD cell" though it has both."""
    for fig in (run_charts.per_prompt_speedup(FRAME.iloc[0:0]), run_charts.per_prompt_acceptance(FRAME.iloc[0:0])):
        said = html.unescape(fig.layout.annotations[0].text).replace("<br>", "")  # lines joined, words as written
        assert said.replace(" ", "") == run_charts.NO_REQUESTS.replace(" ", "") and "baseline" not in said
    only_sd = run_charts.per_prompt_speedup(FRAME[FRAME["method"] != "none"].assign(speedup=None))
    assert "have no baseline (none) requests at the same concurrency" in html.unescape(
        only_sd.layout.annotations[0].text.replace("<br>", " ")
    )
