"""Fresh prompts on Live: whether a server answered a prompt before, and a variant new to it.

A prompt sent to a server again is not a new measurement. Its prefix cache skips the prompt's
prefill (TTFT reads lower for every method alike), and suffix decoding drafts from the answer it
cached the first time (acceptance near 100%, a speedup no new prompt gets). Two signals:

- ``PromptLog``: the prompts SpecScope sent to each server process (a server is its URL and its
  start time from /metrics, so a restart starts a clean log), kept in ``home()/prompts-seen.json``;
- the share of the request's prompt tokens that came from the prefix cache (/metrics before and
  after the request), which also catches prompts sent by anyone else.

A variant (``variant``) changes the prompt's first tokens, so no prefix cache holds it; its
answer stays close to the original's, so for suffix decoding a variant is still a repeat (the
log compares suffix panes by the prompt without its variant mark) and only a restart clears it.

    log = PromptLog()
    key = server_key(url, metrics.scrape(url))
    fresh = Freshness(seen_before=log.seen(key, prompt, drafts_from_answers=True), prefix_hit_rate=0.9,
                      drafts_from_answers=True)
    fresh.badge     # 'repeated prompt: cached drafts'
    log.add(key, prompt)
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass

from specscope import files, hygiene, settings
from specscope.metrics import MetricsSnapshot

__all__ = ["Freshness", "PromptLog", "server_key", "variant", "base_prompt", "drafts_from_answers",
           "CACHED_DRAFTS", "PREFIX_CACHED"]

CACHED_DRAFTS = "repeated prompt: cached drafts"
PREFIX_CACHED = "repeated prompt: prefix cache"
_MARK = re.compile(r"^\(variant \d+\) ")
_KEEP_SERVERS = 50     # server processes remembered
_KEEP_PROMPTS = 500    # prompts remembered per server process


def drafts_from_answers(method: str, speculative_config: dict | None) -> bool:
    """Whether the method drafts from answers it cached earlier (suffix decoding)."""
    return method == "suffix" or (speculative_config or {}).get("method") == "suffix"


def server_key(url: str, snapshot: MetricsSnapshot | None) -> str:
    """One server process: its URL and the second it started (its URL alone when /metrics is silent)."""
    started = snapshot.started_at if snapshot is not None else None
    return url.rstrip("/") if started is None else f"{url.rstrip('/')}@{started:.0f}"


def base_prompt(prompt: str) -> str:
    """The prompt without its variant mark."""
    return _MARK.sub("", prompt)


def variant(prompt: str) -> str:
    """The prompt with new first tokens, so no prefix cache holds it: ``(variant 1) ...``, and the
    next number for a prompt that is a variant already."""
    mark = _MARK.match(prompt)
    number = int(mark.group(0).split()[1].rstrip(")")) + 1 if mark else 1
    return f"(variant {number}) {base_prompt(prompt)}"


def _digest(kind: str, prompt: str) -> str:
    return f"{kind}:{hashlib.sha256(prompt.encode()).hexdigest()[:24]}"


@dataclass(frozen=True)
class Freshness:
    """Whether a pane's prompt was new to its server, and what to call it if not."""

    seen_before: bool
    prefix_hit_rate: float | None = None
    drafts_from_answers: bool = False

    @property
    def repeated(self) -> bool:
        """The server answered this prompt before, or most of its tokens came from the prefix cache."""
        return self.seen_before or (self.prefix_hit_rate or 0.0) > hygiene.PREFIX_CACHE_LIMIT

    @property
    def badge(self) -> str | None:
        """The pane's badge text, None for a fresh prompt."""
        if not self.repeated:
            return None
        return CACHED_DRAFTS if self.drafts_from_answers else PREFIX_CACHED

    @property
    def explanation(self) -> str:
        """One sentence on what the repeat does to the pane's figures."""
        hits = f" {self.prefix_hit_rate:.0%} of its prompt tokens came from the prefix cache." \
            if self.prefix_hit_rate is not None else ""
        if self.drafts_from_answers:
            return ("This server answered this prompt (or a variant of it) before: suffix decoding drafts from "
                    "the answer it cached, so acceptance and speedup read far higher than for a new prompt; "
                    "restart the server for a fair comparison." + hits)
        return ("This server saw this prompt before: its prefix cache skips the prompt's prefill, so TTFT "
                "reads lower than for a new prompt; run a variant of the prompt for a fair comparison." + hits)


class PromptLog:
    """The prompts SpecScope sent to each server process, in ``home()/prompts-seen.json`` (not beside
    the servers' state files, which are every ``*.json`` of ``servers_dir()``)."""

    _lock = threading.Lock()

    def __init__(self):
        self.path = settings.home() / "prompts-seen.json"

    def _read(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def seen(self, key: str, prompt: str, drafts_from_answers: bool = False) -> bool:
        """Whether ``prompt`` went to the server before (for suffix decoding: any variant of it)."""
        wanted = _digest("base", base_prompt(prompt)) if drafts_from_answers else _digest("exact", prompt)
        return wanted in self._read().get(key, [])

    def add(self, key: str, prompt: str) -> None:
        """Remember that ``prompt`` went to the server."""
        with self._lock:
            data = self._read()
            kept = [d for d in data.pop(key, []) if d not in (_digest("exact", prompt),
                                                             _digest("base", base_prompt(prompt)))]
            data[key] = (kept + [_digest("exact", prompt), _digest("base", base_prompt(prompt))])[-_KEEP_PROMPTS:]
            data = dict(list(data.items())[-_KEEP_SERVERS:])
            files.write_atomic(self.path, json.dumps(data))
