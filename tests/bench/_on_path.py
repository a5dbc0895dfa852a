"""Imported first by the benchmark scripts: puts this checkout's app/ and tests/ on sys.path right after the
script's folder, so ``python tests/bench/NAME.py`` measures this checkout's SpecScope and finds ``helpers``
(whose ``paths`` names every other folder)."""

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]  # the one folder worked out here, to reach helpers.paths
sys.path[1:1] = [str(_TESTS.parent / "app"), str(_TESTS)]  # after bench/: its dashboard.py first
