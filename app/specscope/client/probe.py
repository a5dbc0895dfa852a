"""Small questions to a running vLLM server over HTTP: its base URL, ``/health``, ``/v1/models``, ``/version``.

    root = base_url("http://gpu-node:8000/v1/")   # "http://gpu-node:8000"
    healthy(root)                                 # True when /health answers 200
    models(root)[0]["id"]                         # the served model (ServerUnreachable / ServerError)

Each takes an optional ``httpx.Client``, so a caller with its own transport (tests replaying
recorded bytes) asks through it. ``read`` reads at most ``MAX_ANSWER_BYTES`` of an answer within
its timeout overall (a server that drips or floods is cut off), and only over http(s); its
errors never quote what was read.
"""

from __future__ import annotations

import time

import httpx

from specscope.errors import ConfigError, ServerError, ServerUnreachable

__all__ = ["MAX_ANSWER_BYTES", "AnswerTooLarge", "base_url", "check_http", "read", "healthy", "models", "vllm_version"]

MAX_ANSWER_BYTES = 2 * 2**20  # a vLLM server's /metrics is a few hundred KiB at most


class AnswerTooLarge(ServerError):
    """An answer was longer than SpecScope reads."""


def base_url(url: str) -> str:
    """``url`` without surrounding spaces, trailing slashes and a trailing ``/v1``."""
    return url.strip().rstrip("/").removesuffix("/v1")


def check_http(url: str) -> str:
    """``url``'s base when it is http(s); ConfigError (naming the scheme only) for file://, gopher://, ..."""
    base = base_url(url)
    scheme = base.split("://", 1)[0].lower() if "://" in base else ""
    if scheme not in ("http", "https") or not httpx.URL(base).host:
        shown = f"a {scheme}:// address" if scheme else "not a URL"
        raise ConfigError(
            f"That is {shown}; SpecScope talks to servers over http(s) only: give one like http://host:8000."
        )
    return base


def read(
    url: str, timeout: float, *, client: httpx.Client | None = None, limit: int = MAX_ANSWER_BYTES
) -> httpx.Response:
    """GET ``url`` (no redirects followed), reading at most ``limit`` bytes within ``timeout`` seconds
    in all; AnswerTooLarge past the limit, httpx.TimeoutException past the time."""
    deadline = time.monotonic() + timeout
    asker = client if client is not None else httpx
    with asker.stream("GET", url, timeout=timeout, follow_redirects=False) as response:
        if int(response.headers.get("content-length") or 0) > limit:
            raise AnswerTooLarge(
                f"{url} answered with more than {limit // 2**20} MiB; SpecScope reads "
                "no more than that from a server: is this a vLLM server?"
            )
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise AnswerTooLarge(
                    f"{url} answered with more than {limit // 2**20} MiB; SpecScope "
                    "reads no more than that from a server: is this a vLLM server?"
                )
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"no whole answer within {timeout:g} s")
    kept = {k: v for k, v in response.headers.items() if k.lower() == "content-type"}
    return httpx.Response(response.status_code, headers=kept, content=bytes(body), request=response.request)


def _get(url: str, timeout: float, client: httpx.Client | None) -> httpx.Response:
    return read(url, timeout, client=client)


def healthy(url: str, timeout: float = 2.0, *, client: httpx.Client | None = None) -> bool:
    """Whether ``/health`` answers 200."""
    try:
        return _get(f"{base_url(url)}/health", timeout, client).status_code == 200
    except (httpx.HTTPError, AnswerTooLarge):
        return False


def models(url: str, timeout: float = 10.0, *, client: httpx.Client | None = None) -> list[dict]:
    """The entries of ``/v1/models`` (``id``, ``max_model_len``, ...), at least one."""
    root = base_url(url)
    try:
        response = _get(f"{root}/v1/models", timeout, client)
    except AnswerTooLarge:
        raise
    except httpx.HTTPError as exc:
        raise ServerUnreachable(
            f"Nothing answers at {root} ({exc.__class__.__name__}); check that the server is running."
        ) from exc
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
    except (httpx.HTTPError, ValueError, AttributeError, AnswerTooLarge):
        return None
