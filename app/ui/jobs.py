"""Sweeps running in this SpecScope process, by run id: they outlive page reruns and browser tabs."""

from __future__ import annotations

import streamlit as st

from specscope import cluster, sweep

__all__ = ["sweep_jobs", "start_sweep"]


@st.cache_resource
def sweep_jobs() -> dict[str, sweep.SweepJob]:
    """The registry of background sweeps (one per process), finished ones included."""
    return {}


def start_sweep(spec: sweep.SweepSpec, run_id: str, ray_address: str | None = None) -> bool:
    """Start ``spec`` on a background thread (its groups as tasks on the Ray cluster at ``ray_address``,
    if given) unless that run is already going; False if it is."""
    running = sweep_jobs().get(run_id)
    if running is not None and not running.done:
        return False
    on_ray = (lambda spec, progress, stop: cluster.run_on_ray(spec, ray_address, progress, stop)) \
        if ray_address else None
    sweep_jobs()[run_id] = sweep.SweepJob(spec, run=on_ray).start()
    return True
