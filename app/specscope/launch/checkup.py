"""Whether SpecScope serves what it promised: its dashboard answers and no server it launched has died.

The Docker image's HEALTHCHECK runs ``specscope health``, which prints these problems one a line (Docker
keeps the output beside the status), so a container reads unhealthy while a demo server it started lies
dead, not only while its dashboard is down. A server still starting is no problem; one that exited, or
whose start failed (until it starts again or an operator dismisses it), is. Attached servers run
elsewhere and are left out.

    problems("http://127.0.0.1:8501")  # [] or ["the dashboard does not answer ...", "cpu-smollm2-none exited: ..."]
"""

from __future__ import annotations

import httpx

from specscope.launch import failures, process, registry

__all__ = ["problems", "dashboard_healthy"]


def dashboard_healthy(url: str, timeout: float = 5.0) -> bool:
    """Whether the Streamlit dashboard at ``url`` answers its health address."""
    try:
        return httpx.get(f"{url.rstrip('/')}/_stcore/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def problems(dashboard: str | None) -> list[str]:
    """What is wrong, one sentence each: the dashboard at ``dashboard`` (None: not checked), then each
    launched server that exited, then each recorded failed start."""
    found = []
    if dashboard is not None and not dashboard_healthy(dashboard):
        found.append(f"the dashboard does not answer at {dashboard}.")
    found.extend(ended for state in registry.read_states() if (ended := process.death(state)))
    found.extend(f"{failures.said(failed)}." for failed in failures.listed())
    return found
