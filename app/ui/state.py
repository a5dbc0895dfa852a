"""The session-state keys the pages set and read themselves (widget keys stay beside their widgets).

One place, so two pages never pick the same key and a reader sees what a session remembers.
"""

from __future__ import annotations

__all__ = [
    "LIVE_SESSION",
    "RUNS_UPLOADED",
    "RUNS_SET",
    "RUNS_CURRENT",
    "RUNS_VIEW",
    "RUNS_FOLLOWED",
    "RUNS_FINISHED_SEEN",
    "ACCESS_PROVEN",
    "ACCESS_REFUSED",
    "ACCESS_PASS",
    "ACCESS_POST",
    "ACCESS_LEFT",
    "LIVE_HISTORY",
    "LIVE_DEFAULT_SERVERS",
    "LIVE_SENT",
]

LIVE_SESSION = "live_session"  # the Live page's LiveSession (running, finished or loaded)
RUNS_UPLOADED = "runs_uploaded"  # sha256 of the prompt set uploaded last
RUNS_SET = "runs_set"  # the prompt-set selectbox (set to a new upload)
RUNS_CURRENT = "runs_current"  # run id of the sweep started last
RUNS_VIEW = "runs_view"  # the results' run selectbox (follows a new sweep)
RUNS_FOLLOWED = "runs_followed"  # the run id the results already switched to
RUNS_FINISHED_SEEN = "runs_finished_seen"  # run ids whose end already refreshed the page
ACCESS_PROVEN = "access_proven"  # sha256 of the operator token this session gave (ui.access)
ACCESS_REFUSED = "access_refused"  # the last token this session gave was wrong
ACCESS_PASS = "access_pass"  # the operator pass this session handed its browser (ui.access)
ACCESS_POST = "access_post"  # (path, body) the page still has to POST: claim or clear the pass
ACCESS_LEFT = "access_left"  # the pass cookie this session gave back on leaving operator mode
LIVE_HISTORY = "live_history"  # the Live page's finished runs, for repeated-run intervals
LIVE_DEFAULT_SERVERS = "live_default_servers"  # the servers Live chose itself (kept while the user keeps them)
LIVE_SENT = "live_sent"  # the prompt a "Run a prompt variant" sent, shown above the panes
