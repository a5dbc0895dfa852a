"""CLI tables fit the terminal (160 columns where there is none) and prose wraps to it; --wide and --json
keep everything."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.paths import DATA
from specscope.cli import layout
from specscope.cli import main as cli_main

WIDE = pd.DataFrame(
    {
        "setup": [
            "Llama-3.1-70B-Instruct · draft_model (Llama-3.2-1B-Instruct) · 4xH100 · vLLM 0.19.0 · sharegpt",
            "SmolLM2-135M-Instruct · ngram · code-editing · cpu-2core",
        ],
        "concurrency": [16, 1],
        "speedup": ["0.817× [0.700, 0.950]", "1.682× [1.358, 2.109]"],
        "measured by": ["run pace-sd-lab, one of 2 runs of this point (their mean 1.618× [1.446, 1.810])", "run r1"],
    }
)


def _words(text: str) -> list[str]:
    return text.split()


def test_a_table_narrows_to_the_width_by_wrapping_words_and_keeps_every_word():
    text = layout.fit_table(WIDE, 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert sorted(_words(text)) == sorted(_words(layout.fit_table(WIDE, None)))  # nothing cut or lost
    assert "[0.700, 0.950]" in text and "[1.358, 2.109]" in text  # an interval never splits
    assert "" in text.splitlines()  # rows that wrap are kept apart by a blank line


def test_a_table_that_fits_is_one_line_a_row_numbers_right_aligned():
    small = pd.DataFrame({"method": ["ngram", "suffix"], "k": [4, 12], "speedup": [1.5, None]})
    lines = layout.fit_table(small, 160).splitlines()
    assert lines == ["method   k  speedup", "ngram    4      1.5", "suffix  12        –"]


def test_columns_that_cannot_fit_are_left_out_and_named():
    ids = pd.DataFrame({"run": ["sweep-cpu-smollm2-aaaaaaaa"], "baseline run": ["sweep-cpu-smollm2-bbbbbbbb"]})
    text = layout.fit_table(ids, 40)
    assert max(len(line) for line in text.splitlines()) <= 40
    assert "sweep-cpu-smollm2-aaaaaaaa" in text and "bbbbbbbb" not in text
    assert " ".join(text.split()).endswith(
        "(1 column left out to fit 40 columns: baseline run; --wide or --json shows them)"
    )


def test_prose_wraps_to_the_terminal_and_keeps_its_indent(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    text = layout.wrap("    " + "a fitted point can be predicted without itself " * 4)
    assert layout.terminal_width() == 50
    assert all(len(line) <= 50 and line.startswith("    ") for line in text.splitlines())


@pytest.mark.parametrize(
    "args",
    [
        ["--best"],
        [],
        ["--by", "category"],
        ["--by", "vllm_version"],
        ["--by", "prompt_length"],
        ["--by", "response_format"],
        ["--slower"],
    ],
)
def test_every_speedup_table_fits_160_columns_where_output_is_no_terminal(specscope_home, monkeypatch, capsys, args):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli_main(["speedup", *args]) == 0
    out, err = capsys.readouterr()
    widest = max(len(line) for line in (out + err).splitlines())
    assert 40 < widest <= layout.DEFAULT_WIDTH


def test_wide_and_json_keep_every_column(specscope_home, monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli_main(["speedup", "--best", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert max(len(line) for line in wide.splitlines()) > layout.DEFAULT_WIDTH
    assert all(name in wide.splitlines()[0] for name in ("source", "model", "draft_model", "hardware", "vLLM"))
    assert cli_main(["speedup", "--best", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records and {"setup", "speedup_lo", "tied_ks", "point_runs"} <= set(records[0])


def test_advise_advise_schedule_and_deploy_fit_160_columns_in_a_pipe(specscope_home, capsys, monkeypatch):
    """``advise`` lines reached 393 columns and ``deploy`` 580: every line fits the pipe's 160 now, and the
    speculative_config, wrapped between its JSON items inside the quotes, still reads as one JSON value."""

    from specscope.cli import deploy as deploy_cli
    from specscope.loop import deploy_plan, deploy_run

    monkeypatch.delenv("COLUMNS", raising=False)
    for argv in (["advise"], ["advise", "--schedule"], ["advise", "--formulas", "--method", "ngram"]):
        assert cli_main(argv) == 0
        out = capsys.readouterr().out
        assert out and max(len(line) for line in out.splitlines()) <= 160, argv
    data = DATA
    request = deploy_plan.Request(
        preset="shape-llama31-8b-shared",
        methods=("eagle3",),
        concurrencies=(1, 4, 16, 64),
        prompts=data / "prompts" / "code-editing.jsonl",
        acceptance="eagle3-kimi-k2.5",
        probe_ks=(3, 6),
        repeats=3,
        run_id="gpu-deploy-8b-eagle3-vllm0.32.0",
    )
    printed = deploy_cli.shown(deploy_run.report(request))
    assert max(len(line) for line in printed.splitlines()) <= 160
    flag = printed[printed.index("--speculative-config '") + len("--speculative-config '") :]
    assert json.loads(flag[: flag.index("'")]) == {
        "method": "eagle3",
        "model": "shape-Llama-3.1-8B-eagle3",
        "num_speculative_tokens": 4,
    }
    narrow = layout.json_flag(
        "--speculative-config",
        {
            "method": "eagle3",
            "num_speculative_tokens": 4,
            "num_speculative_tokens_per_batch_size": [[1, 42, 4], [43, 64, 3]],
        },
        width=60,
    )
    assert max(len(line) for line in narrow.splitlines()) <= 60 and len(narrow.splitlines()) > 2
    assert json.loads(narrow.split("'", 1)[1].rsplit("'", 1)[0])["num_speculative_tokens_per_batch_size"][1] == [
        43,
        64,
        3,
    ]
