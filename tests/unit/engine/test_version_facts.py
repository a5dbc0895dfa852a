"""The catalog's vLLM 0.33.0 and 0.34.0 facts against what the wheels' own source says, and the one-sentence
refusals before any start.

``tests/captures/vllm_speculative_config.json`` was written by ``tests/captures/vllm_sources.py`` from the wheels
of vLLM 0.24.0, 0.32.0, 0.33.0 and 0.34.0 (``tests/captures/VLLM.md``): each one's ``SpeculativeMethod`` names,
``SpeculativeConfig`` fields with their literal values, and the source markers of what else changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.paths import CAPTURES
from specscope import settings
from specscope.engine import catalog, presets
from specscope.engine.presets import MethodEntry, Preset
from specscope.engine.version_facts import (
    BENCH_FORWARD,
    CHECKED_VERSIONS,
    NATIVE_SUFFIX,
    V1_RUNNER_REMOVED,
    VERSION_FACTS,
    version_tuple,
)
from specscope.errors import ConfigError
from specscope.launch import host
from specscope.launch.command import VllmInstall, build

MANIFEST = json.loads((CAPTURES / "vllm_speculative_config.json").read_text())
V1RUNNER = settings.repo_root() / "launchers" / "shape-llama31-8b-v1runner.toml"
NOT_KEYS = {"custom_method"}  # 0.34.0 sets it itself (field(init=False), config/speculative.py:479): not a user's key
PREVIOUS = {"0.33.0": "0.32.0", "0.34.0": "0.33.0"}


def _vllm(version: str) -> VllmInstall:
    return VllmInstall(
        "vllm", version, methods=frozenset(MANIFEST[version]["methods"]), k_schedule=True, python="/opt/env/bin/python"
    )


def _accepted(fact, version: str) -> bool:
    v = version_tuple(version)
    return (fact.since is None or v >= version_tuple(fact.since)) and (
        fact.removed_in is None or v < version_tuple(fact.removed_in)
    )


def _one_sentence(message: str) -> str:
    assert message.endswith(".") and ". " not in message and "\n" not in message, message
    return message


def test_every_wheel_read_is_a_checked_version():
    assert set(MANIFEST) <= set(CHECKED_VERSIONS) and {"0.33.0", "0.34.0"} <= set(MANIFEST)


@pytest.mark.parametrize("version", list(MANIFEST))
def test_every_fact_matches_each_wheels_speculative_config(version):
    read = MANIFEST[version]
    wrong = []
    for fact in (f for f in VERSION_FACTS if not f.methods):  # a rule about some methods: its marker, below
        if fact.key == "method":
            found = fact.value in read["methods"]
        elif fact.value is None:
            found = fact.key in read["keys"]
        else:
            found = fact.value in (read["keys"].get(fact.key) or ())
        if found != _accepted(fact, version):
            wrong.append(f"{fact.key}={fact.value}")
    assert not wrong, f"vLLM {version}'s wheel disagrees with the table on {wrong}"


def _values(read: dict) -> set[tuple[str, str | None]]:
    keys = {(key, None) for key in read["keys"] if key not in NOT_KEYS}
    values = {(key, value) for key, found in read["keys"].items() if key != "method" for value in found or ()}
    return keys | values | {("method", m) for m in read["methods"]}


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_every_method_key_and_value_that_came_or_went_is_dated_with_its_version(version):
    before, after = _values(MANIFEST[PREVIOUS[version]]), _values(MANIFEST[version])
    whole = {key for key, value in after ^ before if value is None}  # a key's values come and go with it
    before, after = (
        {(key, value) for key, value in items if value is None or key not in whole} for items in (before, after)
    )
    since = {(f.key, f.value): f.since for f in VERSION_FACTS if not f.methods}
    removed = {(f.key, f.value): f.removed_in for f in VERSION_FACTS if not f.methods}
    assert {item: since.get(item) for item in after - before} == dict.fromkeys(after - before, version)
    assert {item: removed.get(item) for item in before - after} == dict.fromkeys(before - after, version)


@pytest.mark.parametrize("version", list(MANIFEST))
def test_what_else_each_version_changed_is_read_from_its_source(version):
    v, markers = version_tuple(version), MANIFEST[version]["markers"]
    assert markers["bench_forward"] == (v >= version_tuple(BENCH_FORWARD))
    assert markers["v1_runner_removed"] == (v >= version_tuple(V1_RUNNER_REMOVED))
    assert markers["suffix_needs_arctic_inference"] == (v < version_tuple(NATIVE_SUFFIX))
    suffix = catalog.method_class("suffix")
    assert (suffix.package_on(version) == "arctic_inference") == markers["suffix_needs_arctic_inference"]
    assert bool(suffix.needs_on(version)) == markers["suffix_needs_arctic_inference"]
    rule = next(f for f in VERSION_FACTS if f.key == "parallel_drafting" and f.methods)
    assert markers["parallel_drafting_only_dflash_dspark"] == (v >= version_tuple(rule.removed_in))


@pytest.mark.parametrize(
    "kind, key, value",
    [
        ("draft_model", "use_heterogeneous_vocab", True),
        ("eagle3", "disable_padded_drafter_batch", True),
        ("draft_model", "disable_padded_drafter_batch", False),  # 0.34.0 forbids unknown keys, false ones too
    ],
)
def test_keys_0_34_removed_are_refused_there_in_one_sentence(kind, key, value):
    params = {"model": "org/drafter", key: value}
    assert catalog.build(kind, 3, params, vllm_version="0.33.0")[key] is value
    with pytest.raises(ConfigError) as info:
        catalog.build(kind, 3, params, vllm_version="0.34.0")
    assert _one_sentence(str(info.value)) == (
        f"The key '{key}' is not accepted by vLLM 0.34.0 (absent from 0.34.0 "
        "on); leave it out, or run vLLM 0.33.0 or older."
    )


@pytest.mark.parametrize("kind", ["draft_model", "eagle", "eagle3"])
def test_p_eagle_and_pard_are_refused_on_0_34_in_one_sentence(kind):
    params = {"model": "org/drafter", "parallel_drafting": True}
    assert catalog.build(kind, 4, params, vllm_version="0.33.0")["parallel_drafting"] is True
    with pytest.raises(ConfigError) as info:
        catalog.build(kind, 4, params, vllm_version="0.34.0")
    assert _one_sentence(str(info.value)) == (
        f"'parallel_drafting': true with method '{kind}' is refused by vLLM 0.34.0: from 0.34.0 on P-EAGLE (eagle, "
        "eagle3) and PARD (draft_model) are gone, only dflash and dspark draft in parallel and always do; leave it "
        "out, or run vLLM 0.33.0 or older."
    )
    # false is deprecated there, not an error (config/speculative.py:1688-1697)
    off = catalog.build(kind, 4, {**params, "parallel_drafting": False}, vllm_version="0.34.0")
    assert off["parallel_drafting"] is False


@pytest.mark.parametrize(
    "kind, key, value, since",
    [
        ("suffix", "suffix_decoding_corpus_tokens", 0, "0.34.0"),
        ("draft_model", "draft_decode_context_parallel_size", 1, "0.34.0"),
        ("eagle3", "draft_lm_head_quantization", "nvfp4", "0.33.0"),
        ("mtp", "disable_lookahead_block_hashes", True, "0.33.0"),
        ("dflash", "xpress_topc", 16, "0.33.0"),
    ],
)
def test_keys_new_in_0_33_and_0_34_build_there_and_are_refused_before(kind, key, value, since):
    params = {key: value} | ({"model": "org/drafter"} if catalog.method_class(kind).model_required else {})
    config = catalog.build(kind, None, params, vllm_version=since)
    assert config[key] == value and config["method"] == kind
    older = PREVIOUS[since]
    with pytest.raises(ConfigError) as info:
        catalog.build(kind, None, params, vllm_version=older)
    assert _one_sentence(str(info.value)) == (
        f"The key '{key}' is accepted by vLLM {since} and later; vLLM {older} "
        "is older and may not know it: upgrade vLLM or leave it out."
    )


def test_methods_0_33_and_0_34_brought_or_took_are_dated():
    facts = {f.value: (f.since, f.removed_in) for f in VERSION_FACTS if f.key == "method"}
    assert facts["medusa"] == facts["mlp_speculator"] == (None, "0.33.0")
    assert facts["custom_class"] == (None, "0.34.0")
    assert facts["step5_mtp"] == ("0.33.0", None) and facts["nemotron3_5_transcribe_mtp"] == ("0.34.0", None)
    with pytest.raises(
        ConfigError,
        match=r"^vLLM 0\.34\.0 does not accept method 'medusa'; it is accepted by vLLM "
        r"before 0\.33\.0 \(SpecScope checked 0\.24\.0, 0\.30\.0, 0\.31\.0 and "
        r"0\.32\.0\)\.$",
    ):
        catalog.build("medusa", 3, {"model": "org/heads"}, vllm_version="0.34.0")


def test_suffix_needs_arctic_inference_only_before_0_34():
    rows = {row["kind"]: row for row in catalog.describe("0.34.0")}
    assert rows["suffix"]["needs"] == "" and rows["suffix"]["needs_before"] == "0.34.0"
    assert {row["kind"]: row for row in catalog.describe("0.33.0")}["suffix"]["needs"] == "the arctic-inference package"
    preset = Preset(
        name="gpu",
        path=Path("gpu.toml"),
        model="org/Target",
        methods={"suffix": MethodEntry(name="suffix", kind="suffix", k=8)},
    )
    with pytest.raises(ConfigError) as info:
        build(preset, "suffix", vllm=_vllm("0.33.0"), port=8001, log_dir=Path("logs"), importable=lambda p: False)
    assert _one_sentence(str(info.value)) == (
        "Method 'suffix' needs the arctic-inference package before vLLM 0.34.0 "
        "(vllm 0.33.0 here); install it with launchers/install.sh and start "
        "again."
    )
    native = build(preset, "suffix", vllm=_vllm("0.34.0"), port=8001, log_dir=Path("logs"), importable=lambda p: False)
    assert native.state.speculative_config == {"method": "suffix", "num_speculative_tokens": 8}


V1_REFUSED = (
    "vLLM 0.34.0 has no V1 model runner, so VLLM_USE_V2_MODEL_RUNNER=0 {where} would stop the server at "
    "start; remove it (the default runner takes a K schedule from vLLM 0.32.0 on) or run vLLM 0.33.0 or "
    "older."
)


def test_the_v1_runner_preset_is_refused_on_0_34_in_one_sentence_and_runs_before():
    preset = presets.load_preset(V1RUNNER)
    assert preset.env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    with pytest.raises(ConfigError) as info:
        build(preset, "none", vllm=_vllm("0.34.0"), port=8001, log_dir=Path("logs"))
    assert _one_sentence(str(info.value)) == V1_REFUSED.format(where="in preset shape-llama31-8b-v1runner's [env]")
    served = preset.model_copy(update={"model": "org/Llama-3.1-8B"})  # no prepared shape here: a hub name
    assert (
        build(served, "none", vllm=_vllm("0.33.0"), port=8001, log_dir=Path("logs")).extra_env[
            "VLLM_USE_V2_MODEL_RUNNER"
        ]
        == "0"
    )


def test_a_v1_runner_asked_by_the_shell_is_refused_unless_the_preset_overrides_it():
    plain = Preset(
        name="gpu", path=Path("gpu.toml"), model="org/Target", methods={"none": MethodEntry(name="none", kind="none")}
    )
    with pytest.raises(ConfigError) as info:
        build(
            plain,
            "none",
            vllm=_vllm("0.34.0"),
            port=8001,
            log_dir=Path("logs"),
            inherited={"VLLM_USE_V2_MODEL_RUNNER": "0"},
        )
    assert _one_sentence(str(info.value)) == V1_REFUSED.format(where="in this shell's environment")
    overriding = plain.model_copy(update={"env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}})
    assert (
        build(
            overriding,
            "none",
            vllm=_vllm("0.34.0"),
            port=8001,
            log_dir=Path("logs"),
            inherited={"VLLM_USE_V2_MODEL_RUNNER": "0"},
        ).state.kind
        == "none"
    )


def _installed_vllm(folder: Path, version: str) -> Path:
    """A Python whose vLLM is ``version``: its distribution metadata and its speculative config's method names
    (those the wheel holds), on the path of this interpreter run without site-packages."""
    site = folder / "site"
    (site / f"vllm-{version}.dist-info").mkdir(parents=True)
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
    )
    (site / "vllm" / "config").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    methods = ", ".join(json.dumps(m) for m in MANIFEST[version]["methods"])
    (site / "vllm" / "config" / "speculative.py").write_text(f"SpeculativeMethod = Literal[{methods}]\n")
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    return python


def test_a_server_on_another_installed_vllm_is_refused_when_planned(tmp_path):
    """``--vllm`` naming another interpreter: the plan reads its version from its files, and refuses there."""
    python = _installed_vllm(tmp_path / "vllm-0.34.0", "0.34.0")
    assert host.installed_vllm(str(python)).version == "0.34.0"
    with pytest.raises(ConfigError) as info:
        host.plan(presets.load_preset(V1RUNNER), "none", vllm_choice=str(python))
    assert _one_sentence(str(info.value)) == V1_REFUSED.format(where="in preset shape-llama31-8b-v1runner's [env]")
