"""``specscope store``: where results are shared, what this machine mirrors, what waits to upload.

With ``SPECSCOPE_STORE=s3://bucket/prefix`` set, it lists the bucket, mirrors new runs, uploads
runs waiting in the outbox and prints the state (``--json`` for scripts); exit status 1 when the
store could not be reached.
"""

from __future__ import annotations

import argparse
import json

from specscope.results import shared

__all__ = ["register"]


def _store(args: argparse.Namespace) -> int:
    state = shared.status()
    if args.json:
        print(json.dumps(state))
    elif state["store"] is None:
        print("Results stay on this machine; set SPECSCOPE_STORE=s3://bucket/prefix to share them.")
    else:
        print(f"shared store: {state['store']} at {state['endpoint']}")
        print(f"runs from other machines mirrored here: {state['mirrored_runs']}")
        print(
            f"runs waiting to upload: {len(state['outbox'])}"
            + (f" ({', '.join(state['outbox'])})" if state["outbox"] else "")
        )
        if state["problem"]:
            print(f"problem: {state['problem']}")
    return 1 if state.get("problem") else 0


def register(subparsers) -> None:
    """Add ``specscope store``."""
    sp = subparsers.add_parser("store", help="the shared results store (SPECSCOPE_STORE): state, mirror, uploads")
    sp.add_argument("--json", action="store_true", help="print the state as JSON")
    sp.set_defaults(func=_store)
