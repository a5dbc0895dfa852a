"""Live: 2-6 servers on one prompt, side by side, every token marked as accepted draft, target token
or rejected draft (``steps``, ``ngram``; the labelled tokens and steps: ``labels``); the servers (``spec``),
who shares cores or a GPU (``contention``), a pane's stream (``pane``) and figures (``figures``), whether its
server reused earlier work (``freshness``), the session with its recordings (``session``), how its panes
stream (``streaming``) and what they show against the baseline (``comparison``), and a recording read back
(``recording``)."""

from specscope.live.contention import default_mode, shared_cores, shared_gpus, sharing
from specscope.live.figures import (
    MIN_REPEATS,
    PaneMetrics,
    Repeats,
    RunHistory,
    answer_problem,
    compare_lossless,
    pane_metrics,
    special_tokens,
)
from specscope.live.pane import Pane, PaneView
from specscope.live.recording import load_recording
from specscope.live.session import REPLAY_LEAD_S, LiveSession, recordings_dir
from specscope.live.spec import (
    AUTO,
    MAX_PANES,
    MODES,
    PaneSpec,
    default_servers,
    launched_specs,
    parse_server_lines,
    resolve_method,
)

__all__ = [
    "AUTO",
    "MAX_PANES",
    "MIN_REPEATS",
    "MODES",
    "REPLAY_LEAD_S",
    "LiveSession",
    "Pane",
    "PaneMetrics",
    "PaneSpec",
    "PaneView",
    "Repeats",
    "RunHistory",
    "answer_problem",
    "compare_lossless",
    "default_mode",
    "default_servers",
    "launched_specs",
    "load_recording",
    "pane_metrics",
    "parse_server_lines",
    "recordings_dir",
    "resolve_method",
    "shared_cores",
    "shared_gpus",
    "sharing",
    "special_tokens",
]
