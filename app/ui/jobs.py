"""Sweeps running in this SpecScope process, by run id: they outlive page reruns and browser tabs."""

from __future__ import annotations

import streamlit as st

from specscope import access, cluster, sweep, sweeplock

__all__ = ["sweep_jobs", "start_sweep", "cancel_sweep"]


@st.cache_resource
def sweep_jobs() -> dict[str, sweep.SweepJob]:
    """The registry of background sweeps (one per process), finished ones included."""
    return {}


def start_sweep(plan: sweep.SweepPlan, ray_address: str | None = None) -> bool:
    """Start a sweep's ``plan`` on a background thread (its groups as tasks on the Ray cluster at ``ray_address``,
    if given) unless that run is already going; False if it is. Only an operator starts one
    (NotAllowed); on this machine one sweep runs at a time (Busy names the one running). The
    sweep's thread acts as the operator who started it, whom its servers' audit trail names."""
    actor = access.require("run a sweep")
    run_id = plan.run_id
    running = sweep_jobs().get(run_id)
    if running is not None and not running.done:
        return False
    if ray_address:
        def run(plan, progress, stop):
            with access.acting_as(actor):
                return cluster.run_on_ray(plan, ray_address, progress, stop)
    else:
        lock = sweeplock.take(run_id)

        def run(plan, progress, stop):
            try:
                with access.acting_as(actor):
                    return sweep.run_sweep(plan, sweep.launcher_for(plan.spec), progress, stop)
            finally:
                lock.release()
    sweep_jobs()[run_id] = sweep.SweepJob(plan, run=run).start()
    return True


def cancel_sweep(run_id: str) -> None:
    """Stop the sweep after its current cell (finished cells are kept); operators only."""
    access.require("stop a sweep")
    job = sweep_jobs().get(run_id)
    if job is not None:
        job.cancel()
