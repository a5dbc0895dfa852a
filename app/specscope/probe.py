"""Small questions to a running vLLM server over HTTP: its base URL, ``/health``, ``/v1/models``, ``/version``.

    root = base_url("http://gpu-node:8000/v1/")   # "http://gpu-node:8000"
    healthy(root)                                 # True when /health answers 200
    models(root)[0]["id"]                         # the served model (ServerUnreachable / ServerError)

Each takes an optional ``httpx.Client``, so a caller with its own transport (tests replaying
recorded bytes) asks through it.
"""

from __future__ import annotations

import httpx

from specscope.errors import ServerError, ServerUnreachable

__all__ = ["base_url", "healthy", "models", "vllm_version"]


def base_url(url: str) -> str:
    """``url`` without surrounding spaces, trailing slashes and a trailing ``/v1``."""
    return url.strip().rstrip("/").removesuffix("/v1")


def _get(url: str, timeout: float, client: httpx.Client | None) -> httpx.Response:
    return client.get(url, timeout=timeout) if client is not None else httpx.get(url, timeout=timeout)


def healthy(url: str, timeout: float = 2.0, *, client: httpx.Client | None = None) -> bool:
    """Whether ``/health`` answers 200."""
    try:
        return _get(f"{base_url(url)}/health", timeout, client).status_code == 200
    except httpx.HTTPError:
        return False


def models(url: str, timeout: float = 10.0, *, client: httpx.Client | None = None) -> list[dict]:
    """The entries of ``/v1/models`` (``id``, ``max_model_len``, ...), at least one."""
    root = base_url(url)
    try:
        response = _get(f"{root}/v1/models", timeout, client)
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"Nothing answers at {root} ({exc.__class__.__name__}); "
                                "check that the server is running.") from exc
    try:
        response.raise_for_status()
        data = response.json()["data"]
        if not data or not all("id" in entry for entry in data):
            raise ValueError("no model listed")
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise ServerError(f"{root}/v1/models did not list a model; is this a vLLM server?") from exc
    return list(data)


def vllm_version(url: str, timeout: float = 10.0, *, client: httpx.Client | None = None) -> str | None:
    """The version ``/version`` reports, or None when the server does not say."""
    try:
        response = _get(f"{base_url(url)}/version", timeout, client)
        return response.json().get("version") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
