"""The Live session wakes its page the moment something new can be drawn, and a pane with
nothing new costs nothing to redraw."""

from __future__ import annotations

import threading
import time

from helpers.paths import CAPTURES
from specscope import live

RECORDING = CAPTURES / "live_4panes.json"


def test_replay_wakes_when_the_next_chunk_comes_due():
    session = live.load_recording(RECORDING)
    views = session.views()
    assert all(v.t0 == session.replay_started_wall for v in views)
    assert abs(session.replay_started_wall - time.time()) < 1.0
    shown = sum(v.metrics.tokens for v in views)
    until = time.monotonic() - session.replay_started
    # the next chunk with a token (a token-less chunk before it, e.g. the role chunk, wakes the page too)
    due = min(c.arrival_s for p in session.panes for c in p.snapshot() if c.arrival_s > until and c.token_ids)
    while True:
        session.wait_for_change(timeout=60)
        woke = time.monotonic() - session.replay_started
        now_shown = sum(v.metrics.tokens for v in session.views())
        if now_shown > shown or woke > due + 2.0:
            break
    assert due - 0.005 <= woke <= due + 2.0  # woke for that chunk (slack for a loaded machine), not the timeout
    assert now_shown > shown


def test_unchanged_pane_reuses_its_view():
    session = live.load_recording(RECORDING)
    session.replay_started = float("-inf")  # the whole recording is due
    first, second = session.views(), session.views()
    assert all(a.provenance is b.provenance for a, b in zip(first, second))
    assert [v.metrics.tokens for v in first] == [sum(len(c.token_ids) for c in p.chunks) for p in session.panes]


def test_streaming_wakes_on_arrival_not_on_timeout():
    session = live.load_recording(RECORDING)
    session.mode = "race"
    session.views()
    timer = threading.Timer(0.05, session.panes[0].on_change)
    started = time.monotonic()
    timer.start()
    session.wait_for_change(timeout=10)
    assert time.monotonic() - started < 2
    timer.join()
    started = time.monotonic()
    session.views()
    session.wait_for_change(timeout=0.2)  # nothing new: waits the whole timeout
    assert time.monotonic() - started >= 0.19
