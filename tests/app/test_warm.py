"""Warming at server start: the landing pages run bare and fill the caches their viewers read."""

from __future__ import annotations

import functools

import pytest

from specscope import explore

pytestmark = pytest.mark.app


def test_warming_runs_the_landing_pages_and_fills_the_shared_caches(page_env, monkeypatch):
    from ui import cache, warm

    from ui import k_charts

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
    done = warm.warm()
    assert set(done) == set(warm.LANDING)
    assert all(isinstance(seconds, float) for seconds in done.values()), done  # no page failed bare
    assert len(calls) == 1
    assert len(drawn) == 1  # the landing figure, drawn in a fragment, which a bare run runs in place
    best = cache.frame(explore.by_concurrency, {})  # what the first viewer's Explorer asks for
    assert len(calls) == 1 and not best.empty


def test_a_page_that_fails_while_warming_is_reported_not_raised(page_env, tmp_path, monkeypatch):
    from ui import warm

    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "broken.py").write_text("raise ValueError('no store here')\n")
    monkeypatch.setattr(warm, "APP_DIR", tmp_path)
    assert warm.warm(("views/broken.py",)) == {"views/broken.py": "ValueError: no store here"}


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
