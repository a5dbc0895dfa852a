"""A Live session: 2-6 panes on one prompt, raced or in fair replay, and its recordings.

- *race*: every pane streams at once, one thread each.
- *fair replay*: panes stream one after another (so methods sharing a CPU or GPU do not slow each other
  down), then play back side by side on their recorded arrival times.

Every pane is prepared (warm-up, the fresh-prompt check) before any streams, so no warm-up runs beside a
measurement. A session saves to a JSON recording (under ``runs_dir()/recordings``) that loads anywhere,
e.g. a GPU run replayed on a laptop.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from specscope import access, files, procfs, settings
from specscope.client.stream import GenerationRequest
from specscope.errors import ConfigError
from specscope.launch.registry import read_states
from specscope.live import freshness
from specscope.live.comparison import compare, pane_view
from specscope.live.figures import RunHistory
from specscope.live.pane import Pane, PaneView
from specscope.live.spec import MAX_PANES, MODES, PaneSpec, host_port, resolve_method
from specscope.live.streaming import stream

__all__ = ["LiveSession", "REPLAY_LEAD_S", "RECORDING_VERSION", "recordings_dir"]

RECORDING_VERSION = 1
# A replay begins this long after its panes are first drawn: the page's own rerun (every widget, the settings
# folding away) reaches the browser first, so the first tokens are not drawn late behind it, then in a bunch.
REPLAY_LEAD_S = 0.5


@dataclass
class LiveSession:
    """Several panes run in ``mode`` ('race' or 'fair'); ``views()`` is safe to call any time.

    ``shared`` names the panes whose servers share CPU cores or a GPU; ``recorded_mode`` is the mode a
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
    _arrivals: int = 0  # chunks received (and panes finished) so far
    _shown: int = 0  # _arrivals at the last views()
    _shown_until: float | None = None  # replay time of the last views()

    def __post_init__(self) -> None:
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
            assert self.replay_started is not None  # replaying() sets it
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
        """Whether the speedups were raced on shared cores or a GPU, so they measure contention."""
        return self.timing == "race" and len(self.shared) > 1

    @property
    def setup_key(self) -> str:
        """What makes two runs repeats of one another: the request, the servers and the mode."""
        return json.dumps(
            {
                "request": asdict(self.panes[0].request),
                "mode": self.timing,
                "panes": [asdict(p.spec) for p in self.panes],
            },
            sort_keys=True,
        )

    @classmethod
    def create(
        cls,
        specs: list[PaneSpec],
        request: GenerationRequest,
        mode: str,
        shared: Iterable[str] = (),
        history: RunHistory | None = None,
    ) -> LiveSession:
        """A session of 2-6 panes on one request, the baseline's first; ConfigError on a bad mode,
        count or label. ``shared``: the labels ``sharing`` found. Operators only: an 'auto'
        method asks the URL."""
        access.require("stream from servers")
        if mode not in MODES:
            raise ConfigError(f"Unknown mode {mode!r}; choose one of {', '.join(MODES)}.")
        if not 2 <= len(specs) <= MAX_PANES:
            raise ConfigError(f"Pick between 2 and {MAX_PANES} servers to compare (got {len(specs)}).")
        if len({s.label for s in specs}) != len(specs):
            raise ConfigError("Two panes have the same label; give each server its own name.")
        specs = [resolve_method(s) for s in specs]
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
            stream(self.panes, self.mode, transports)
            if self.history is not None and not any(p.error for p in self.panes):
                views = self._views(None)
                self.history.record(
                    self.setup_key,
                    {v.spec.label: v.metrics for v in views},
                    cached=[v.spec.label for v in views if v.freshness and v.freshness.repeated],
                )
        finally:
            self._settled.set()
            self._arrived()  # a page waiting for a change draws the final panes, their repeats included

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
        """Fair mode (and loaded recordings) play back once every pane has finished, ``REPLAY_LEAD_S`` after
        the first call (the panes' first draw)."""
        if self.mode != "fair" or not self.finished:
            return False
        now = time.monotonic() if now is None else now
        if self.replay_started is None:
            self.replay_started = now + REPLAY_LEAD_S
            self.replay_started_wall = time.time() - (time.monotonic() - now) + REPLAY_LEAD_S
        return now - self.replay_started <= self.replay_length_s

    def restart_replay(self) -> None:
        """Play the recorded streams again from the start (after ``REPLAY_LEAD_S``)."""
        self.replay_started = time.monotonic() + REPLAY_LEAD_S
        self.replay_started_wall = time.time() + REPLAY_LEAD_S

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
            assert self.replay_started is not None  # replaying() sets it
            until = now - self.replay_started
        self._shown_until = until
        return self._views(until)

    def _views(self, until: float | None) -> list[PaneView]:
        length = 0.0 if until is None else self.replay_length_s  # a replay's panes are complete at its end
        views = [pane_view(pane, until, length, self.replay_started_wall) for pane in self.panes]
        compare(views, greedy=self.panes[0].request.temperature == 0)
        if self.history is not None:
            for view in views:
                view.repeats = self.history.repeats(self.setup_key, view.spec.label) if view.done else None
        return views

    def repeated(self) -> list[Pane]:
        """The panes whose server reused cached work (their figures read better than a new prompt's)."""
        return [p for p in self.panes if p.freshness is not None and p.freshness.repeated]

    def restartable(self) -> list[str]:
        """The servers SpecScope launched (so can restart) under the repeated panes that draft from
        cached answers (suffix): a variant of the prompt does not make those fresh, a restart does."""
        states = [s for s in read_states() if not s.attached and procfs.alive(s.pid, s.pgid)]
        urls = {
            host_port(p.spec.url) for p in self.repeated() if p.freshness is not None and p.freshness.cached_answer
        }  # a repeated pane has its freshness
        return [s.name for s in states if host_port(s.url) in urls]

    def fresh_request(self) -> GenerationRequest:
        """This session's request on a variant of its prompt that no prefix cache holds."""
        request = self.panes[0].request
        return replace(request, prompt=freshness.variant(request.prompt))

    def recording(self) -> dict[str, Any]:
        """The session as a JSON-ready recording."""
        return {
            "specscope_recording": RECORDING_VERSION,
            "mode": self.timing,
            "created_at": self.created_at,
            "shared_cores": list(self.shared),
            "panes": [p.to_dict() for p in self.panes],
        }

    def save(self, directory: Path | None = None, name: str | None = None) -> Path:
        """Write the recording atomically; returns its path."""
        folder = Path(directory) if directory else recordings_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.created_at))
        labels = "-".join(p.spec.label for p in self.panes)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", name or f"{stamp}-{labels}").strip("-")[:80] or stamp
        return files.write_atomic(folder / f"{slug}.json", json.dumps(self.recording()))


def recordings_dir() -> Path:
    """Where recordings are saved by default."""
    path = settings.runs_dir() / "recordings"
    path.mkdir(parents=True, exist_ok=True)
    return path
