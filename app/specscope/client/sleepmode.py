"""vLLM's sleep mode, asked over HTTP: a server started with ``--enable-sleep-mode`` (and
``VLLM_SERVER_DEV_MODE=1``, which exposes the endpoints) gives its GPU memory back while asleep and
takes it again on waking, without a new start.

    fall_asleep(url, level=1)   # level 1: weights to host memory, KV cache dropped; level 2: both dropped
    wake_up(url)                # the engine holds its memory again
    is_sleeping(url)            # what the server says

Level 1 keeps the weights, so a woken server computes what a fresh one does; level 2 drops them
(a woken server then runs on whatever the memory holds: fit only for dummy weights).
"""

from __future__ import annotations

import httpx

from specscope.client.probe import base_url
from specscope.errors import ServerError, ServerUnreachable

__all__ = ["SLEEP_FLAG", "DEV_MODE_ENV", "LEVELS", "fall_asleep", "wake_up", "is_sleeping"]

SLEEP_FLAG = "--enable-sleep-mode"
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"  # vLLM serves /sleep and /wake_up only in its development mode
LEVELS = (1, 2)
TIMEOUT_S = 300.0  # level 1 copies the weights to host memory: seconds for an 8B model, minutes for 70B


def _post(url: str, path: str, params: dict | None = None) -> None:
    root = base_url(url)
    try:
        response = httpx.post(f"{root}{path}", params=params, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(
            f"Nothing answered {path} at {root} ({exc.__class__.__name__}); check that the server runs."
        ) from exc
    if response.status_code == 404:
        raise ServerError(
            f"{root} has no {path}: start it with {SLEEP_FLAG} and {DEV_MODE_ENV}=1 (SpecScope's sweeps do on a GPU)."
        )
    if response.status_code != 200:
        raise ServerError(f"{root}{path} answered HTTP {response.status_code}.")


def fall_asleep(url: str, level: int = 1) -> None:
    """Put the server to sleep at ``level`` (1 or 2); returns once the engine sleeps."""
    if level not in LEVELS:
        raise ValueError(f"sleep level {level} is not 1 or 2")
    _post(url, "/sleep", {"level": str(level)})


def wake_up(url: str) -> None:
    """Wake the server; returns once the engine holds its memory again."""
    _post(url, "/wake_up")


def is_sleeping(url: str) -> bool:
    """Whether the server says it sleeps (ServerError when it has no sleep mode)."""
    root = base_url(url)
    try:
        response = httpx.get(f"{root}/is_sleeping", timeout=10.0)
        response.raise_for_status()
        return bool(response.json()["is_sleeping"])
    except httpx.HTTPStatusError as exc:
        raise ServerError(f"{root} has no sleep mode (HTTP {exc.response.status_code}).") from exc
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"Nothing answered at {root} ({exc.__class__.__name__}).") from exc
    except (ValueError, KeyError) as exc:
        raise ServerError(f"{root}/is_sleeping did not say whether it sleeps.") from exc
