"""Running on the vLLM a machine has, and where every row was measured (hardware, versions, weights, acceptance)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from helpers.paths import BENCH
from specscope import sweep
from specscope.advice import fitting
from specscope.analysis import explore
from specscope.engine import provenance, shapes
from specscope.engine.presets import get_preset
from specscope.errors import ConfigError
from specscope.launch import host
from specscope.launch.command import API_SERVER, VllmInstall, build
from specscope.results import writing
from specscope.results.store import Store

# What `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` printed on such machines.
SMI = {
    "NVIDIA H100 80GB HBM3, 81559\n": "1xH100-80GB",
    "NVIDIA H200, 143771\nNVIDIA H200, 143771\n": "2xH200-140GB",
    "NVIDIA A100-SXM4-40GB, 40960\n" * 8: "8xA100-40GB",
    "NVIDIA L40S, 46068\n": "1xL40S-45GB",
    "NVIDIA H100 80GB HBM3, 81559\nNVIDIA A100-SXM4-80GB, 81920\n": "1xH100-80GB+1xA100-80GB",
    "": None,
    "No devices were found\n": None,
}


@pytest.mark.parametrize("output, label", list(SMI.items()))
def test_hardware_label_from_nvidia_smi(output, label):
    assert provenance.gpu_label(output) == label


def test_a_gpu_label_is_told_from_a_cpu_one():
    assert all(provenance.on_gpu(label) for label in SMI.values() if label)
    assert not provenance.on_gpu("cpu-2core") and not provenance.on_gpu(None)
    assert provenance.gpu_count("8xA100-40GB") == 8 and provenance.gpu_count("cpu-2core") is None


def test_hardware_label_prefers_the_environment_then_the_gpu(monkeypatch):
    monkeypatch.setattr(provenance, "nvidia_smi", lambda: "NVIDIA H100 80GB HBM3, 81559\n")
    monkeypatch.delenv("SPECSCOPE_HARDWARE", raising=False)
    assert provenance.hardware_label() == "1xH100-80GB"
    monkeypatch.setenv("SPECSCOPE_HARDWARE", "lab-box")
    assert provenance.hardware_label() == "lab-box"
    monkeypatch.delenv("SPECSCOPE_HARDWARE")
    monkeypatch.setattr(provenance, "nvidia_smi", lambda: "")
    assert provenance.hardware_label() == f"cpu-{os.cpu_count()}core"


def test_weights_and_acceptance_kinds():
    assert provenance.weights_kind(["python", "-m", API_SERVER, "--load-format", "dummy"]) == "dummy"
    assert provenance.weights_kind(["vllm", "serve", "m", "--load-format=dummy"]) == "dummy"
    assert provenance.weights_kind(["vllm", "serve", "m", "--load-format", "safetensors"]) == "real"
    assert provenance.acceptance_kind("none", False) is None
    assert provenance.acceptance_kind("eagle3", True) == "synthetic"
    assert provenance.acceptance_kind("ngram", False) == "real"


def test_torch_version_names_its_build():
    version = provenance.torch_version()
    assert version is None or "+" in version  # 2.13.0+cpu here, 2.11.0+cu130 on a CUDA build


def test_vllm_server_found_in_this_interpreter_or_on_path(tmp_path):
    assert host.server_command(True, python="/env/bin/python3") == ("/env/bin/python3", "-m", API_SERVER)
    assert host.server_command(False, which=lambda name: f"/opt/site/bin/{name}") == ("/opt/site/bin/vllm", "serve")
    with pytest.raises(ConfigError) as missing:
        host.server_command(False, python="/env/bin/python3", which=lambda name: None)
    message = str(missing.value)
    assert "/env/bin/python3 cannot import it and no `vllm` command is on PATH" in message
    assert message.count(". ") == 0 and "launchers/install.sh" in message


def test_a_vllm_on_path_is_asked_its_version(tmp_path, monkeypatch):
    script = tmp_path / "vllm"
    script.write_text("#!/bin/sh\necho 'INFO some log line'\necho 0.24.0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(host.vllms, "installed_vllm", lambda: None)
    found = host.installed_vllm()
    assert (found.dist, found.version, found.server) == ("vllm", "0.24.0", (str(script), "serve"))
    assert found.methods is None and found.per_request_args == ()


def test_the_found_server_starts_the_preset(tmp_path):
    preset = get_preset("cpu-smollm2").model_copy(update={"model": "org/Target"})
    pip_target = VllmInstall("vllm", "0.24.0", server=("/usr/bin/python3", "-m", API_SERVER))
    argv = build(preset, "none", vllm=pip_target, port=8001, log_dir=tmp_path).state.argv
    assert argv[:5] == ["/usr/bin/python3", "-m", API_SERVER, "--model", "org/Target"]
    on_path = VllmInstall("vllm", "0.24.0", server=("/opt/site/bin/vllm", "serve"))
    assert build(preset, "none", vllm=on_path, port=8001, log_dir=tmp_path).state.argv[:3] == [
        "/opt/site/bin/vllm",
        "serve",
        "org/Target",
    ]


def test_shapes_pad_the_real_tokenizer_to_the_shapes_vocabulary(tmp_path):
    source = tmp_path / "tok"
    source.mkdir()
    vocab = {f"t{i}": i for i in range(10)}
    (source / "tokenizer.json").write_text(
        json.dumps(
            {
                "model": {"type": "BPE", "vocab": vocab, "merges": []},
                "added_tokens": [{"id": 0, "content": "t0"}, {"id": 10, "content": "<|im_end|>"}],
            }
        )
    )
    (source / "chat_template.jinja").write_text("{{ messages }}")
    shape = dict(shapes.SHAPES["Qwen3-1.7B"], vocab_size=16)
    shapes.SHAPES["tiny-test"] = shape
    try:
        folder = shapes.build("tiny-test", source, tmp_path / "models")
    finally:
        del shapes.SHAPES["tiny-test"]
    padded = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    assert sorted(padded.values()) == [i for i in range(16) if i != 10]  # id 10 stays the added token
    assert json.loads((folder / "config.json").read_text()) == shape
    assert (folder / "chat_template.jinja").is_file() and (folder / "specscope-model.json").is_file()
    with pytest.raises(ConfigError, match="No model shape 'Qwen9'"):
        shapes.build("Qwen9", source, tmp_path / "models")


def _row(method, k, throughput, **extra):
    return {
        "source": "specscope",
        "model": "shape-Qwen3-32B",
        "dataset": "code-editing",
        "hardware": "1xH100-80GB",
        "host": "gpu",
        "vllm_version": "0.24.0",
        "torch_version": "2.11.0+cu130",
        "weights": "dummy",
        "output_len": 128,
        "temperature": 0.0,
        "concurrency": 1,
        "method": method,
        "k": k,
        "output_throughput": throughput,
        "acceptance_length": 2.2 if k else None,
        "status": "ok",
        **extra,
    }


def test_synthetic_and_real_acceptance_are_two_setups_with_one_baseline(tmp_path):
    rows = [
        _row("none", 0, 30.0),
        _row("eagle3", 3, 60.0, acceptance="synthetic"),
        _row("eagle3", 3, 45.0, acceptance="real"),
    ]
    writing.write_results(rows, run_id="gpu", directory=tmp_path)
    points = explore.speedup_vs_k(Store(result_dirs=[tmp_path], request_dirs=[])).set_index("acceptance")
    assert points.loc["synthetic", "speedup"] == pytest.approx(2.0)
    assert points.loc["real", "speedup"] == pytest.approx(1.5)
    assert "dummy weights, synthetic acceptance" in points.loc["synthetic", "setup"]
    assert "synthetic" not in points.loc["real", "setup"]
    # the advisor fits drafters: the synthetic rows measure the engine, so only the real family is fitted
    [fit] = fitting.fit_families(Store(result_dirs=[tmp_path], request_dirs=[]).speedup())
    assert fit.keys["acceptance"] == "real" and "synthetic" not in fitting.family_label(fit.keys)


def test_rows_of_other_weights_or_vllm_never_share_a_baseline(tmp_path):
    writing.write_results(
        [_row("none", 0, 30.0, weights="real"), _row("eagle3", 3, 60.0, acceptance="synthetic")],
        run_id="a",
        directory=tmp_path,
    )
    writing.write_results(
        [
            _row("none", 0, 20.0, vllm_version="0.32.0"),
            _row("eagle3", 3, 50.0, vllm_version="0.32.0", acceptance="synthetic"),
        ],
        run_id="b",
        directory=tmp_path,
    )
    cells = Store(result_dirs=[tmp_path], request_dirs=[]).speedup().set_index("run_id")
    assert cells.loc["b"].query("method == 'eagle3'")["speedup"].iloc[0] == pytest.approx(2.5)
    # run a's dummy-weight method has no dummy-weight baseline of its vLLM: no speedup, not 60/30 or 60/20
    assert cells.loc["a"].query("method == 'eagle3'")["speedup"].isna().all()


def test_synthetic_lengths_reach_the_servers_config():
    assert sweep.parse_lengths("4=2.9,6=3.4") == ((4, 2.9), (6, 3.4))
    assert sweep.synthetic_length_for(sweep.parse_lengths("2.5"), 7) == 2.5
    with pytest.raises(ConfigError, match="one per K such as 4=2.9"):
        sweep.parse_lengths("four=3")
    with pytest.raises(ConfigError, match="at K=1 must lie between 1 and 2"):
        sweep.SweepSpec(
            preset="cpu-smollm2",
            methods=("none", "ngram"),
            ks=(1,),
            concurrencies=(1,),
            prompts=Path("p.jsonl"),
            synthetic_length=((0, 2.5),),
        )
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(4,),
        concurrencies=(1, 16),
        prompts=Path("p.jsonl"),
        num_prompts=8,
        per_concurrency=4,
    )
    assert [sweep.requests_of(spec, c) for c in (1, 16)] == [8, 64]


def test_gpu_bench_skips_without_a_gpu(monkeypatch, capsys):
    sys.path.insert(0, str(BENCH))
    import gpu

    monkeypatch.setattr(provenance, "nvidia_smi", lambda: "")
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--phase", "engine"])
    assert gpu.main() == 0
    assert "skipped (nvidia-smi lists no GPU" in capsys.readouterr().out


def test_a_server_on_some_gpus_of_a_node_is_labelled_with_those(monkeypatch):
    smi = "NVIDIA H100 80GB HBM3, 81559\nNVIDIA H100 80GB HBM3, 81559\nNVIDIA H200, 143771\n"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert provenance.gpu_label(provenance.visible_cards(smi)) == "1xH200-140GB"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert provenance.gpu_label(provenance.visible_cards(smi)) == "2xH100-80GB"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert provenance.gpu_label(provenance.visible_cards(smi)) == "2xH100-80GB+1xH200-140GB"
