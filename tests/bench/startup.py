"""The CPU demo's start: its servers one after another vs together (``launch.start_together``).

Side by side in one run, in a scratch SpecScope home: ``--methods`` of ``--preset`` started one
after another (``launch.start``, each warmed), all stopped, then the same servers started together,
each on its least used core as ``specscope demo`` starts them. Each time runs from the first start
until every server is healthy and warmed. Other processes slow both: the load average is printed.
Last line:

    startup servers=<n> one_by_one_s=<s> together_s=<s> ratio=<one_by_one / together> load=<1-min>

    SPECSCOPE_MODELS=... .venv/bin/python tests/bench/startup.py [--methods none,ngram,suffix,draft_model]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from specscope import launch
from specscope.engine import presets  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu-smollm2")
    parser.add_argument("--methods", default="none,ngram,suffix,draft_model")
    args = parser.parse_args()
    os.environ["SPECSCOPE_HOME"] = tempfile.mkdtemp(prefix="specscope-startup-")
    preset = presets.get_preset(args.preset)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]

    began = time.monotonic()
    try:
        for method in methods:
            launch.start(launch.plan(preset, method))
        one_by_one = time.monotonic() - began
    finally:
        launch.stop_all()

    began = time.monotonic()
    try:
        started = launch.start_together(launch.plan(preset, method) for method in methods)
        together = time.monotonic() - began
        failed = [str(failure) for _, failure in started if failure]
        if failed:
            sys.exit("; ".join(failed))
    finally:
        launch.stop_all()
    print(
        f"startup servers={len(methods)} one_by_one_s={one_by_one:.1f} together_s={together:.1f} "
        f"ratio={one_by_one / together:.2f} load={os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
