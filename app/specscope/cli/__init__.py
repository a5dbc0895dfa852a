"""The specscope command: see and measure speculative decoding on vLLM.

Each submodule of this package adds its subcommands through ``register(subparsers)``
and handles them in the function it sets as ``func`` (``layout``, which fits tables and prose to the
terminal, adds none). Errors a user can cause are
printed as one sentence with exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys
import threading

import specscope
from specscope.errors import SpecScopeError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``specscope`` argument parser with every submodule's subcommands."""
    parser = argparse.ArgumentParser(prog="specscope", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"specscope {specscope.__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):  # a helper module (layout) adds no command
            module.register(subparsers)
    return parser


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the command; a SpecScopeError prints one sentence and returns 1. SIGTERM (a job's time
    limit, a pod deleted, ``kill``) stops a command like Ctrl-C: the servers it started are stopped
    and finished results are saved."""
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.func(args) or 0)
    except SpecScopeError as exc:
        print(f"specscope: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("specscope: interrupted; finished results are saved.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
