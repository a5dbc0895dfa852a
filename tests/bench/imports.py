"""What importing one SpecScope module costs: the modules it loads, whether the sweep machinery (and
Ray) comes with it, the time, and its longest chain of imports among SpecScope's own modules.

Each pass is a fresh ``python -X importtime -c "import <module>"``; the time is the sum of every
module's own time in that log (the interpreter's start included), the median of ``--passes``. The
chain is read from the source (``tests/unit/test_architecture.import_graph``: imports inside functions
and the package inits a module runs first included): the longest path from the module down the graph,
and the longest anywhere under ``app/``. Last line:

    imports module=<name> modules=<n> specscope_modules=<n> ray=<yes|no> sweep=<yes|no> median_ms=<ms>
        chain=<files from the module> longest_chain=<files anywhere under app/>

    .venv/bin/python tests/bench/imports.py [--module specscope.advice.calibrate] [--passes 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from unit.test_architecture import APP, import_graph  # noqa: E402


def one_pass(module: str) -> tuple[list[str], float]:
    """The modules ``import module`` loads in a fresh interpreter, and the sum of their own times (ms)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(APP), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    names, own_us = [], 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _cumulative, name = line.removeprefix("import time:").split("|", 2)
        names.append(name.strip())
        own_us += int(own)
    return names, own_us / 1000


def longest_chain(graph: dict[str, set[str]], start: str) -> list[str]:
    """The longest path of imports from ``start`` (the graph has no circle: the architecture test sees to it)."""

    @functools.cache
    def down(node: str) -> tuple[str, ...]:
        below = [down(nxt) for nxt in sorted(graph[node])]
        return (node, *max(below, key=len, default=()))

    return list(down(start))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", default="specscope.advice.calibrate")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    passes = [one_pass(args.module) for _ in range(args.passes)]
    names = passes[0][0]
    graph = import_graph(APP)
    chain = longest_chain(graph, args.module)
    anywhere = max((longest_chain(graph, node) for node in graph), key=len)
    print("chain from the module: " + " -> ".join(chain))
    print("longest chain under app/: " + " -> ".join(anywhere))
    ray = any(n == "ray" or n.startswith("ray.") for n in names)
    sweep = any(n == "specscope.sweep" or n.startswith("specscope.sweep.") for n in names)
    print(
        f"imports module={args.module} modules={len(names)} "
        f"specscope_modules={sum(n.startswith('specscope') for n in names)} ray={'yes' if ray else 'no'} "
        f"sweep={'yes' if sweep else 'no'} median_ms={statistics.median(t for _, t in passes):.0f} "
        f"chain={len(chain)} longest_chain={len(anywhere)}"
    )


if __name__ == "__main__":
    main()
