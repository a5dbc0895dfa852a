"""A Live recording read back: the session it saved, replayed on its own timestamps (a GPU run on a laptop)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from specscope.errors import InputError
from specscope.live.pane import Pane
from specscope.live.session import RECORDING_VERSION, LiveSession
from specscope.live.spec import MODES

__all__ = ["load_recording"]


def load_recording(source: Path | str | bytes) -> LiveSession:
    """A session from a recording file (path) or its bytes; it replays on its timestamps."""
    try:
        data = json.loads(source if isinstance(source, bytes) else Path(source).read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"The recording cannot be read ({exc}); choose a file saved by SpecScope's Live page."
        ) from exc
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
    return LiveSession(
        panes=panes, mode="fair", created_at=data.get("created_at", time.time()), shared=shared, recorded_mode=recorded
    )
