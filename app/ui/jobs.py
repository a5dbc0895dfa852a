"""Sweeps running in this SpecScope process, by run id: they outlive page reruns and browser tabs."""

from __future__ import annotations

import streamlit as st

from specscope import access, sweep
from specscope.advice import deploy

__all__ = ["sweep_jobs", "start_sweep", "cancel_sweep"]


@st.cache_resource
def sweep_jobs() -> dict[str, sweep.SweepJob]:
    """The registry of background sweeps (one per process), finished ones included."""
    return {}


def start_sweep(plan: sweep.SweepPlan, where: sweep.Where) -> bool:
    """Start a sweep's ``plan`` ``where`` chosen, on a background thread, unless that run is already going;
    False if it is. Only an operator starts one (NotAllowed); on this machine one sweep runs at a time (Busy
    names the one running). The sweep acts as the operator who started it, whom its servers' audit trail names."""
    running = sweep_jobs().get(plan.run_id)
    if running is not None and not running.done:
        return False
    sweep_jobs()[plan.run_id] = sweep.SweepJob(plan, where, advise=deploy.from_results).start()
    return True


def cancel_sweep(run_id: str) -> None:
    """Stop the sweep after its current cell (finished cells are saved); operators only."""
    access.require("stop a sweep")
    job = sweep_jobs().get(run_id)
    if job is not None:
        job.cancel()
