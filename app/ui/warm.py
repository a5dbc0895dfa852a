"""Work done once at server start: the landing pages run without a browser (bare, every widget at
its default), which fills the shared caches of ``ui.cache`` with their queries, fits and first
figures. The first viewer then waits only for their browser, like every later one.

Then the heap is frozen (``gc.freeze``), so later garbage collections skip the warmed caches and no
pause of a full collection falls inside a Live redraw. A page that fails while warming is logged and
skipped; its first viewer computes it (and sees the error) as without warming. The server waits at most ``WAIT_S``
for the warming; past that it serves, and a viewer arriving early shares the work still under way (the caches lock
per key). Then ``follow`` checks the results every ``RECHECK_S``: when a run lands (a sweep, an import, a file
copied in), it computes the landing pages again (Theory at once, the Explorer ``SETTLE_S`` later), so the first
viewer of the new results does not wait for them. None of this falls inside a cell measured on this machine
(``sweep.lock.quiet``): the dashboard does not measure itself.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import runpy
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

from specscope import settings
from specscope.sweep import lock

__all__ = ["LANDING", "NEW_RUN", "THEN", "warm", "follow", "summary", "freeze_heap", "lifespan"]

APP_DIR = Path(__file__).resolve().parents[1]
LANDING = ("views/explorer.py", "views/theory.py")
# after a new run, Theory at once: its work for the run is the costlier (a fit per setup), and a viewer opening it
# then shares that work; the Explorer SETTLE_S later, so its work (~1.5 s of the server's one interpreter) does not
# slow the page a viewer opened as the run landed, while it loads
NEW_RUN = ("views/theory.py",)
THEN = ("views/explorer.py",)
SETTLE_S = 2.0
WAIT_S = 30.0
# how often the results are checked for a new run (a listing and a stat of each file, ~1 ms): soon enough that
# the landing pages are computed while a viewer who opens one as the run lands still loads the page's scripts
RECHECK_S = 0.2
_BARE_WARNINGS = (
    "streamlit.runtime.scriptrunner_utils.script_run_context",
    "streamlit.runtime.caching.cache_data_api",
    "streamlit.runtime.state.session_state_proxy",
)


def warm(pages: tuple[str, ...] = LANDING, why: str = "before the first viewer") -> dict[str, float | str]:
    """Run each page once, bare; per page the seconds it took, or why it failed."""
    quiet = [logging.getLogger(name) for name in _BARE_WARNINGS]
    levels = [logger.level for logger in quiet]
    for logger in quiet:  # "missing ScriptRunContext" is what bare means here
        logger.setLevel(logging.ERROR)
    done: dict[str, float | str] = {}
    try:
        for page in pages:
            started = time.perf_counter()
            try:
                runpy.run_path(str(APP_DIR / page), run_name="__main__")
                done[page] = round(time.perf_counter() - started, 2)
            except Exception as exc:  # noqa: BLE001 - warming must never stop the server
                done[page] = f"{type(exc).__name__}: {exc}"
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    freeze_heap()
    print(f"SpecScope computed its landing pages {why}: {summary(done)}.", file=sys.stderr, flush=True)
    return done


def _version() -> str | None:
    from ui.common import store  # the shared store every session reads

    try:
        return store().refresh()
    except Exception:  # noqa: BLE001 - a results file being written; the pages will say what is wrong
        return None


def follow(stop: threading.Event, seen: str | None, every: float = RECHECK_S) -> None:
    """Until ``stop`` is set: when the results change from ``seen``, warm the landing pages again for them
    (``NEW_RUN`` at once, ``THEN`` ``SETTLE_S`` later). Never while a cell is measured on this machine: the
    work waits for a moment between cells, or the sweep's end, and the next cell waits for it to end."""
    due: dict[tuple[str, ...], float] = {}  # pages to warm for the newest results -> when
    while not stop.wait(every):
        with lock.quiet() as free:
            if not free:
                continue
            now = _version()
            if now is not None and now != seen:
                seen, at = now, time.monotonic()
                due = {NEW_RUN: at, THEN: at + SETTLE_S}
            pages = next((pages for pages, at in due.items() if at <= time.monotonic()), None)
            if pages is not None:
                del due[pages]
                warm(pages, why="for the new results")


def freeze_heap() -> None:
    """Move everything alive now (modules, the warmed caches: ~200,000 objects) out of the garbage collector's
    reach. A full collection of this heap takes 150-220 ms on the 2-core demo machine, and one falling
    inside a Live replay held a token's redraw that long (live_p95_ms read 137); after the freeze, a
    collection walks only what was made since. Objects frozen here are still freed by their reference counts."""
    gc.collect()
    gc.freeze()


def summary(done: dict[str, float | str]) -> str:
    """``Explorer 1.2 s, Theory 0.8 s`` (a page that failed: its error) for the start's one line."""
    return ", ".join(
        f"{Path(page).stem.capitalize()} " + (f"{took:.1f} s" if isinstance(took, float) else f"failed ({took})")
        for page, took in done.items()
    )


@asynccontextmanager
async def lifespan(app):
    """st.App's start and stop: warm in a thread, serve once it is done or ``WAIT_S`` passed, then follow the
    results."""
    if not settings.warm_landing():
        yield
        return
    stop, warmed = threading.Event(), threading.Event()

    def warm_then_follow() -> None:
        seen = None
        while not stop.is_set():
            with lock.quiet() as free:  # a dashboard started during a sweep's cell warms after it
                if free:
                    seen = _version()
                    warm()
                    break
            stop.wait(RECHECK_S)
        warmed.set()
        follow(stop, seen)

    threading.Thread(target=warm_then_follow, name="specscope-warm", daemon=True).start()
    await asyncio.to_thread(warmed.wait, WAIT_S)
    try:
        yield
    finally:
        stop.set()
