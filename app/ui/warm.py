"""Work done once at server start: the landing pages run without a browser (bare, every widget at
its default), which fills the shared caches of ``ui.cache`` with their queries, fits and first
figures. The first viewer then waits only for their browser, like every later one.

A page that fails while warming is logged and skipped; its first viewer computes it (and sees
the error) as without warming. The server waits at most ``WAIT_S`` for the warming; past that
it serves, and a viewer arriving early shares the work still under way (the caches lock per key).
"""

from __future__ import annotations

import asyncio
import logging
import runpy
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

from specscope import settings

__all__ = ["LANDING", "warm", "lifespan"]

APP_DIR = Path(__file__).resolve().parents[1]
LANDING = ("views/explorer.py", "views/theory.py")
WAIT_S = 30.0
_BARE_WARNINGS = ("streamlit.runtime.scriptrunner_utils.script_run_context",
                  "streamlit.runtime.caching.cache_data_api", "streamlit.runtime.state.session_state_proxy")


def warm(pages: tuple[str, ...] = LANDING) -> dict[str, float | str]:
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
    print(f"SpecScope computed its landing pages before the first viewer: {done}", file=sys.stderr, flush=True)
    return done


@asynccontextmanager
async def lifespan(app):
    """st.App's start and stop: warm in a thread, serve once it is done or ``WAIT_S`` passed."""
    if not settings.warm_landing():
        yield
        return
    thread = threading.Thread(target=warm, name="specscope-warm", daemon=True)
    thread.start()
    await asyncio.to_thread(thread.join, WAIT_S)
    yield
