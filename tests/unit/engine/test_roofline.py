"""Rooflines: ceilings of known configs and GPUs match hand arithmetic; unknowns say why, never guess."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.paths import DOCS
from specscope.engine import roofline
from specscope.engine.shapes import SHAPES

H100 = roofline.HARDWARE["H100 SXM"]
LLAMA_8B = roofline.shape_from_config(SHAPES["Llama-3.1-8B"], "Llama-3.1-8B")


def test_llama_8b_on_an_h100_is_4_79_ms_and_209_tokens_a_second_at_batch_1():
    assert LLAMA_8B.weight_bytes / 1e9 == pytest.approx(16.06, abs=0.005)  # 8.03 B parameters in bf16
    assert LLAMA_8B.kv_bytes_per_token == 128 * 1024  # 2 x 32 layers x 8 KV heads x 128 x 2 B
    found = roofline.ceiling(LLAMA_8B, H100)
    assert found.step_ms == pytest.approx(16.0605 / 3.35, abs=0.001) and round(found.step_ms, 2) == 4.79
    assert round(found.tokens_per_s) == 209 and found.bound == "memory"
    assert roofline.ceiling(LLAMA_8B, roofline.HARDWARE["H200"]).step_ms == pytest.approx(3.35, abs=0.01)
    assert roofline.ceiling(LLAMA_8B, roofline.HARDWARE["H100 PCIe"]).step_ms == pytest.approx(8.03, abs=0.01)


def test_weight_gemms_turn_compute_bound_near_295_tokens_a_step_on_an_h100():
    balance = 989 / 3.35  # FLOP/s over bytes/s; the 8B's 2 FLOPs per 2-byte weight cancel
    assert roofline.ceiling(LLAMA_8B, H100, concurrency=295).bound == "memory"
    assert roofline.ceiling(LLAMA_8B, H100, concurrency=74, k=3).bound == "compute"  # 74 x 4 = 296 tokens
    assert int(balance) == 295


def test_k_plus_1_tokens_a_step_and_kv_reads_grow_with_batch_and_context():
    plain, spec = roofline.ceiling(LLAMA_8B, H100), roofline.ceiling(LLAMA_8B, H100, k=3)
    assert spec.tokens_per_s == pytest.approx(4 * plain.tokens_per_s)
    assert spec.tpot_ms == pytest.approx(4.794 / 4, abs=1e-3)
    long = roofline.ceiling(LLAMA_8B, H100, concurrency=16, context=4096)  # + 16 x 4096 x 128 KiB = 8.6 GB
    assert long.step_ms == pytest.approx((16.0605e9 + 16 * 4096 * 131072) / 3.35e12 * 1e3, rel=1e-4)


def test_a_70b_in_fp8_on_an_h200_at_batch_4_is_272_tokens_a_second():
    fp8 = roofline.shape_from_config({**SHAPES["Llama-3.3-70B"], "dtype": "float8_e4m3fn"}, "70B")
    assert fp8.kv_bytes_per_token == 2 * 80 * 8 * 128  # 160 KiB at 1 byte (320 KiB in bf16)
    assert round(roofline.ceiling(fp8, roofline.HARDWARE["H200"], concurrency=4).tokens_per_s) == 272


def test_labels_name_their_hardware_or_the_fastest_of_their_family():
    assert roofline.hardware_of("1xH100-80GB", {})[:2] == (1, H100)  # 80 GB: SXM (PCIe is slower)
    assert roofline.hardware_of("2xH200", {})[:2] == (2, roofline.HARDWARE["H200"])
    assert roofline.hardware_of("H100 PCIe", {})[1].bandwidth_gb_s == 2000
    assert roofline.hardware_of("1xL40S", {})[1].bf16_tflops == 362
    assert "no bandwidth known for cpu-2core" in roofline.hardware_of("cpu-2core", {})
    assert all(h.source.startswith("https://") for h in roofline.HARDWARE.values())  # each row cites its datasheet


def test_the_users_table_adds_hardware_and_models(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(pd.Series(SHAPES["Llama-3.1-8B"]).to_json())
    table = {"hardware": {"cpu-2core": {"bandwidth_gb_s": 20.0}}, "models": {"my/model": {"config": str(config)}}}
    row = {"model": "my/model", "hardware": "cpu-2core", "method": "none", "concurrency": 1, "k": 0}
    found = roofline.limit_of(row, table).ceiling
    assert found.tokens_per_s == pytest.approx(20e9 / LLAMA_8B.weight_bytes) and found.bound == "memory"


@pytest.mark.parametrize(
    "row, why",
    [
        ({"model": "org/unknown-7B", "hardware": "1xH100-80GB", "concurrency": 1, "method": "none"}, "no config known"),
        (
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "cpu-2core", "concurrency": 1, "method": "none"},
            "no bandwidth known",
        ),
        (
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "hardware": "1xH100-80GB",
                "concurrency": None,
                "method": "none",
            },
            "concurrency not stated",
        ),
        (
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "hardware": "1xH100-80GB",
                "concurrency": 1,
                "method": "suffix",
                "k": None,
            },
            "K not stated",
        ),
        ({"model": "Qwen/Qwen3-30B-A3B", "hardware": "1xH100-80GB", "concurrency": 1, "method": "none"}, "no config"),
    ],
)
def test_no_ceiling_where_model_hardware_concurrency_or_k_is_unknown(row, why):
    found = roofline.limit_of(row, {})
    assert found.ceiling is None and why in found.why


def test_a_mixture_of_experts_is_refused_not_guessed():
    with pytest.raises(Exception, match="mixture of experts"):
        roofline.shape_from_config({**SHAPES["Qwen3-32B"], "num_experts": 128}, "moe")


def test_each_row_shows_its_share_of_the_ceiling_and_k_plus_1():
    rows = pd.DataFrame(
        [
            {
                "model": "shape-Llama-3.1-8B",
                "hardware": "1xH100-80GB",
                "method": "none",
                "k": 0,
                "concurrency": 1,
                "output_throughput": 156.0,
                "total_input_tokens": None,
                "completed": 8,
                "output_len": 0,
            },
            {
                "model": "shape-Llama-3.1-8B",
                "hardware": "1xH100-80GB",
                "method": "eagle3",
                "k": 3,
                "concurrency": 1,
                "output_throughput": 400.0,
                "total_input_tokens": None,
                "completed": 8,
                "output_len": 0,
            },
        ]
    )
    out = roofline.with_ceilings(rows, {})
    assert out["ceiling_share"].round(3).tolist() == [round(156 / 208.586, 3), round(400 / (4 * 208.586), 3)]
    assert pd.isna(out["k_ceiling"][0]) and out["k_ceiling"][1] == 4


def test_above_names_what_passes_its_ceiling():
    row = {
        "model": "meta-llama/Llama-3.3-70B-Instruct",
        "hardware": "1xH200",
        "method": "eagle3",
        "k": 3,
        "concurrency": 4,
        "output_throughput": 6200.0,
        "mean_tpot_ms": 0.6,
        "acceptance_length": 4.5,
    }
    found = roofline.above(row, {})
    assert (
        any("> K+1 = 4" in f for f in found) and any("roofline" in f for f in found) and any("TPOT" in f for f in found)
    ), found
    assert roofline.above({**row, "output_throughput": 300.0, "mean_tpot_ms": 40.0, "acceptance_length": 3.0}, {}) == []
    # the public ceiling counts the whole embedding table; a step reads only its rows: no flag in that gap
    plain = roofline.ceiling(LLAMA_8B, H100)
    between = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "hardware": "1xH100-80GB",
        "method": "none",
        "k": 0,
        "concurrency": 1,
        "output_throughput": (plain.tokens_per_s + plain.strict_tokens_per_s) / 2,
    }
    assert roofline.above(between, {}) == []
    assert LLAMA_8B.embedding_params == 128256 * 4096  # the untied input table the strict bound leaves out


def test_docs_cite_every_hardware_row_with_its_figures():
    text = (DOCS / "limits.md").read_text()
    for h in roofline.HARDWARE.values():
        tflops = "not published" if h.bf16_tflops is None else f"{h.bf16_tflops:g}"
        assert f"| {h.name} | {h.bandwidth_gb_s:g} | {tflops} |" in text, h.name
