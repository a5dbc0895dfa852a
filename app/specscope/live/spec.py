"""The servers a Live session compares: ``PaneSpec``, typed server lines, and a server's method found out.

A pane names its server by label and URL; ``method`` 'none' is the baseline and 'auto' asks the server
(SpecScope's registry, else the command line of the local process serving the URL, else /metrics).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from specscope import access, launch, procfs
from specscope.client import metrics
from specscope.engine import catalog, models
from specscope.errors import ConfigError, SpecScopeError
from specscope.launch.registry import ServerState, read_states
from specscope.schema import BASELINE_METHOD

__all__ = [
    "PaneSpec",
    "MODES",
    "AUTO",
    "MAX_PANES",
    "host_port",
    "resolve_method",
    "default_servers",
    "launched_specs",
    "parse_server_lines",
]

MODES = ("race", "fair")
AUTO = "auto"
MAX_PANES = 6


@dataclass(frozen=True)
class PaneSpec:
    """One server to compare: ``method`` 'none' is a baseline; ``speculative_config`` the
    server's ``--speculative-config`` (ngram settings enable the exact rebuild)."""

    label: str
    url: str
    method: str = BASELINE_METHOD
    speculative_config: dict[str, Any] | None = None
    vllm_version: str | None = None  # the server's vLLM, where known
    per_request: bool | None = None  # whether it was started to report per-request SD counts (None: not known)

    @property
    def speculative(self) -> bool:
        """Whether the server speculates (its method is not 'none')."""
        return self.method != BASELINE_METHOD

    @property
    def synthetic(self) -> bool:
        """Whether it accepts drafts synthetically (vLLM's synthetic sampler): its output is not the target's."""
        return (self.speculative_config or {}).get("rejection_sample_method") == "synthetic"

    def exact_labels_hint(self) -> str:
        """How this server's labels could be exact, naming only what its vLLM has."""
        if self.per_request is False:
            version = f" ({self.vllm_version})" if self.vllm_version else ""
            return (
                f"This server's vLLM{version} reports no per-request counts, so per-step labels stay estimates; "
                "its acceptance comes from /metrics."
            )
        return (
            "A vLLM that reports per-request counts gives exact labels (--per-request-spec-decode-metrics "
            "detailed in 0.32; --per-request-spec-decode-stats detailed in later releases)."
        )


def host_port(url: str) -> tuple[str, int | None]:
    """(host, port) of a URL, every loopback name read as 'localhost'."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = "localhost" if access.is_this_machine(host) else host
    try:
        return host, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return host, None


def _spec_of_state(spec: PaneSpec, state: ServerState) -> PaneSpec:
    """``spec`` with what SpecScope's registry knows of its server: method, config, vLLM, per-request counts."""
    config = spec.speculative_config or models.named_config(state.speculative_config) or None  # no local paths
    method = spec.method if spec.method != AUTO else (config or {}).get("method") or state.kind or state.method
    per_request = (
        None
        if state.attached
        else any(flag in state.argv for flag in (catalog.PER_REQUEST_METRICS_FLAG, catalog.PER_REQUEST_STATS_FLAG))
    )
    return replace(
        spec,
        method=method or BASELINE_METHOD,
        speculative_config=config,
        vllm_version=spec.vllm_version or state.vllm_version or None,
        per_request=spec.per_request if spec.per_request is not None else per_request,
    )


def default_servers(specs: Iterable[PaneSpec]) -> list[str]:
    """The labels Live opens with: the first baseline server, then every speculative one, at most MAX_PANES;
    none where there is nothing to compare (fewer than two)."""
    specs = list(specs)
    baseline = [s.label for s in specs if not s.speculative][:1]
    chosen = (baseline + [s.label for s in specs if s.speculative])[:MAX_PANES]
    return chosen if len(chosen) >= 2 else []


def launched_specs() -> list[PaneSpec]:
    """The healthy servers SpecScope started or attached (state files under ``servers_dir()``)."""
    return [
        _spec_of_state(PaneSpec(label=s.state.name, url=s.state.url, method=s.state.method), s.state)
        for s in launch.list_servers()
        if s.status == "healthy"
    ]


def _argv_config(argv: list[str]) -> dict[str, Any] | None:
    """The ``--speculative-config`` JSON on a vLLM command line ({} when it has none)."""
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in ("--speculative-config", "--speculative_config", "-sc"):
            try:
                found = json.loads(value if eq else argv[i + 1])
            except (ValueError, IndexError):
                return None
            return found if isinstance(found, dict) else None
    return {}


def resolve_method(spec: PaneSpec) -> PaneSpec:
    """'auto' becomes the server's method: from SpecScope's registry, else from the command line of the local
    process serving the URL, else 'none' or 'speculative' by whether the server exports SD counters."""
    host, port = host_port(spec.url)
    state = next(
        (s for s in read_states() if host_port(s.url) == (host, port) and (s.attached or procfs.alive(s.pid, s.pgid))),
        None,
    )
    if state is not None:
        return _spec_of_state(spec, state)
    if spec.method != AUTO:
        return spec
    argv = procfs.listening_argv(port) if host == "localhost" and port else None
    config = _argv_config(argv) if argv else None
    if argv and config is not None:
        flags = (catalog.PER_REQUEST_METRICS_FLAG, catalog.PER_REQUEST_STATS_FLAG)
        return replace(
            spec,
            method=config.get("method") or BASELINE_METHOD,
            speculative_config=config or None,
            per_request=any(flag in argv for flag in flags) or None,
        )
    try:
        speculative = metrics.scrape(spec.url, timeout=3.0).spec_decode
    except SpecScopeError:
        return replace(spec, method="unknown")
    return replace(spec, method="speculative" if speculative else BASELINE_METHOD)


def parse_server_lines(text: str) -> list[PaneSpec]:
    """Servers typed one a line: ``label url [method] [speculative-config JSON]``.

    ``none`` marks the baseline; a JSON config sets the method itself; without either the
    method is found out from the server's /metrics when the session is created.
    """
    specs = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, brace, rest = line.partition("{")
        words = head.split()
        if len(words) < 2 or not words[1].startswith(("http://", "https://")):
            raise ConfigError(
                f"Server line {number} needs 'label URL [method] [config JSON]', e.g. "
                "'ngram http://127.0.0.1:8000 ngram'."
            )
        config = None
        if brace:
            try:
                config = json.loads(brace + rest)
            except ValueError as exc:
                raise ConfigError(f"Server line {number}: the speculative config is not valid JSON ({exc}).") from exc
        method = (config or {}).get("method") or (words[2] if len(words) > 2 else AUTO)
        specs.append(PaneSpec(label=words[0], url=words[1], method=method, speculative_config=config))
    return specs
