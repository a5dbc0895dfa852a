"""Warming at server start: the landing pages run bare and fill the caches their viewers read."""

from __future__ import annotations

import functools

import pytest

from specscope.analysis import explore

pytestmark = pytest.mark.app


def test_warming_runs_the_landing_pages_and_fills_the_shared_caches(page_env, monkeypatch):
    from ui import cache, k_charts, warm

    calls, drawn = [], []
    query, draw = explore.by_concurrency, k_charts.speedup_vs_k

    @functools.wraps(query)
    def counted(store, filters=None):
        calls.append(filters)
        return query(store, filters)

    @functools.wraps(draw)
    def counted_draw(frame, setups):
        drawn.append(setups)
        return draw(frame, setups)

    monkeypatch.setattr(explore, "by_concurrency", counted)
    monkeypatch.setattr(k_charts, "speedup_vs_k", counted_draw)
    import gc

    gc.unfreeze()
    try:
        done = warm.warm()
        # the warmed heap is out of the collector's reach: a full collection no longer walks it (150-220 ms)
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()  # the test process goes on collecting as before
    assert set(done) == set(warm.LANDING)
    assert all(isinstance(seconds, float) for seconds in done.values()), done  # no page failed bare
    assert len(calls) == 1
    assert len(drawn) == 1  # the landing figure, drawn in a fragment, which a bare run runs in place
    best = cache.frame(explore.by_concurrency, {})  # what the first viewer's Explorer asks for
    assert len(calls) == 1 and not best.empty


def test_a_page_that_fails_while_warming_is_reported_not_raised(page_env, tmp_path, monkeypatch, capsys):
    from ui import warm

    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "broken.py").write_text("raise ValueError('no store here')\n")
    monkeypatch.setattr(warm, "APP_DIR", tmp_path)
    assert warm.warm(("views/broken.py",)) == {"views/broken.py": "ValueError: no store here"}
    assert capsys.readouterr().err == (
        "SpecScope computed its landing pages before the first viewer: Broken failed (ValueError: no store here).\n"
    )  # a sentence, not a dict
    assert warm.summary({"views/explorer.py": 1.234, "views/theory.py": 0.8}) == "Explorer 1.2 s, Theory 0.8 s"


def test_warm_0_serves_at_once_without_computing_the_landing_pages(monkeypatch):
    import asyncio

    from ui import warm

    calls = []
    monkeypatch.setattr(warm, "warm", lambda *a: calls.append(a))

    async def serve(value: str) -> None:
        monkeypatch.setenv("SPECSCOPE_WARM", value)
        async with warm.lifespan(None):
            pass

    asyncio.run(serve("0"))
    assert calls == []
    asyncio.run(serve("1"))
    assert calls == [()]


def test_a_new_run_is_warmed_for_its_first_viewer_as_soon_as_it_lands(page_env, monkeypatch):
    import threading
    import time

    import pyarrow.parquet as pq

    from specscope import settings
    from specscope.results import writing
    from ui import warm

    warmed, stop = [], threading.Event()
    monkeypatch.setattr(warm, "warm", lambda pages=warm.LANDING, why="": warmed.append((pages, why)) or {})
    monkeypatch.setattr(warm, "SETTLE_S", 0.3)
    follower = threading.Thread(target=warm.follow, args=(stop, warm._version(), 0.05), daemon=True)
    follower.start()
    try:
        stop.wait(0.3)
        assert warmed == []  # nothing new: nothing warmed again
        rows = pq.read_table(settings.bundled_data_dir() / "results" / "specscope-cpu-code-editing.parquet")
        writing.write_results(rows.drop_columns(["run_id", "created_at"]), run_id="just-landed")
        deadline = time.monotonic() + 60  # a reload of every results file; slow while CI's servers load the cores
        while not warmed and time.monotonic() < deadline:
            stop.wait(0.05)
        # Theory at once: a viewer opening it shares its fit rather than waiting behind the Explorer's work
        assert warmed == [(("views/theory.py",), "for the new results")]
        stop.wait(0.1)
        assert len(warmed) == 1  # the Explorer a moment later, not while that viewer's page loads
        deadline = time.monotonic() + 60
        while len(warmed) < 2 and time.monotonic() < deadline:
            stop.wait(0.05)
        assert warmed[1] == (("views/explorer.py",), "for the new results")
        assert set(warm.NEW_RUN + warm.THEN) == set(warm.LANDING)
        stop.wait(0.5)
        assert len(warmed) == 2  # once per new version of the results
    finally:
        stop.set()
        follower.join(5)


def test_a_run_landing_while_a_cell_is_measured_here_is_warmed_after_the_cell(page_env, monkeypatch):
    """A dashboard sweep writes its run after every cell while the next one is measured on the same cores: the
    landing pages wait for a moment between cells (or the sweep's end), then the next cell waits for them."""
    import threading
    import time

    import pyarrow.parquet as pq

    from specscope import settings
    from specscope.results import writing
    from specscope.sweep import lock
    from ui import warm

    warmed, stop = [], threading.Event()
    monkeypatch.setattr(warm, "warm", lambda pages=warm.LANDING, why="": warmed.append(pages) or {})
    monkeypatch.setattr(warm, "SETTLE_S", 0.3)
    follower = threading.Thread(target=warm.follow, args=(stop, warm._version(), 0.05), daemon=True)
    follower.start()
    rows = pq.read_table(settings.bundled_data_dir() / "results" / "specscope-cpu-code-editing.parquet")
    try:
        with lock.measuring():  # the next cell, measured as the first one's results land
            writing.write_results(rows.drop_columns(["run_id", "created_at"]), run_id="cell-1")
            stop.wait(1.5)
            assert warmed == []  # nothing computed on the measured cores
        deadline = time.monotonic() + 60
        while len(warmed) < 2 and time.monotonic() < deadline:
            stop.wait(0.05)
        assert warmed == [warm.NEW_RUN, warm.THEN]  # caught up once the cell was over
        with lock.measuring():
            writing.write_results(rows.drop_columns(["run_id", "created_at"]), run_id="cell-2")
            stop.wait(0.2)
            # the Explorer, due SETTLE_S after Theory, also waits for the cell after this one
        while len(warmed) < 3 and time.monotonic() < deadline:
            stop.wait(0.05)
        with lock.measuring():
            stop.wait(1.0)
            assert warmed == [warm.NEW_RUN, warm.THEN, warm.NEW_RUN]
        while len(warmed) < 4 and time.monotonic() < deadline:
            stop.wait(0.05)
        assert warmed[3] == warm.THEN
    finally:
        stop.set()
        follower.join(5)
