"""The one door to a sweep: ``execute`` runs a plan here or on a Ray cluster, with the launch options
built once from the CLI or the Runs form, under this machine's sweep lock when it runs here. The CLI and
the Runs page call only this (the Runs page through ``SweepJob``, which claims first so a busy machine is
refused on the page, not in its thread).

    result = execute(plan, Here(), LaunchOptions(sleep_mode=False), progress=print)
    result = execute(plan, OnRay("ray://head:10001"), LaunchOptions(starts_at_once=2))
"""

from __future__ import annotations

from dataclasses import dataclass

from specscope import access
from specscope.client.progress import Progress
from specscope.sweep import lock, on_ray
from specscope.sweep.lane import Advise
from specscope.sweep.options import LaunchOptions, launcher_for
from specscope.sweep.plan import SweepPlan
from specscope.sweep.record import SweepResult
from specscope.sweep.run import Stop, run_sweep

__all__ = ["Here", "OnRay", "Where", "Claim", "claim", "execute"]


@dataclass(frozen=True)
class Here:
    """This machine: one sweep at a time, under its lock."""


@dataclass(frozen=True)
class OnRay:
    """A Ray cluster: ``address`` (``ray://head:10001``), None for RAY_ADDRESS, else the one on this machine."""

    address: str | None = None


Where = Here | OnRay


@dataclass
class Claim:
    """Who runs a sweep, and this machine's lock when it runs here; ``release`` when it ends."""

    actor: access.Actor
    held: lock.MachineLock | None = None

    def release(self) -> None:
        """Free this machine's lock, if the claim holds it."""
        if self.held is not None:
            self.held.release()


def claim(plan: SweepPlan, where: Where) -> Claim:
    """The right to run ``plan`` ``where`` it runs, taken now: NotAllowed for a viewer, Busy (naming the
    sweep) while another runs on this machine."""
    actor = access.require("run a sweep")
    return Claim(actor, lock.take(plan.run_id) if isinstance(where, Here) else None)


def execute(
    plan: SweepPlan,
    where: Where = Here(),
    options: LaunchOptions = LaunchOptions(),
    progress: Progress | None = None,
    stop: Stop = None,
    advise: Advise | None = None,
    claimed: Claim | None = None,
) -> SweepResult:
    """Run (or resume) ``plan`` ``where`` it says, its servers launched as ``options`` say; ``advise`` makes
    an ``auto`` K schedule concrete (sweeps here only). ``claimed``: the claim taken beforehand (else taken
    now); released when the sweep ends. Servers started act as the claim's operator."""
    held = claimed or claim(plan, where)
    try:
        with access.acting_as(held.actor):
            if isinstance(where, OnRay):
                return on_ray.run_on_ray(plan, where.address, options, progress, stop)
            return run_sweep(plan, launcher_for(plan.spec, options), progress, stop, advise=advise)
    finally:
        held.release()
