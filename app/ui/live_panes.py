"""The Live page's panes, redrawn the moment a token arrives, one pane at a time.

Instead of rerunning on a timer, the script holds one ``st.empty`` slot per pane and, while
the session streams (or replays), waits on the session for the next arrival and rewrites
only the slots whose HTML changed. A token therefore reaches the browser within the time
it takes to draw one pane, and panes that received nothing are never resent. A click on
any widget stops the loop at the next arrival and reruns the page, which resumes it.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from specscope.live import LiveSession, PaneView

__all__ = ["stream_panes", "IDLE_WAIT_S"]

IDLE_WAIT_S = 0.25  # longest wait between checks when nothing arrives


def stream_panes(session: LiveSession, pane_html: Callable[[PaneView], str]) -> None:
    """Draw every pane, then keep them current until the session is done streaming or replaying."""
    count = len(session.panes)
    per_row = 3 if count > 4 else count
    slots = [column.empty() for first in range(0, count, per_row) for column in st.columns(per_row)]
    shown: list[str | None] = [None] * count
    while True:
        # asked before the views are taken, so the last views drawn are those of the finished state
        active = not session.finished or session.replaying()
        for i, view in enumerate(session.views()):
            text = pane_html(view)
            if text != shown[i]:
                slots[i].html(text)
                shown[i] = text
        if not active:
            return
        session.wait_for_change(IDLE_WAIT_S)
