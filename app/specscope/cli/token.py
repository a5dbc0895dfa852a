"""``specscope token``: the operator token of a shared dashboard (made on first use), or a new one.

specscope token            # the token and the file that keeps it (owner-only)
specscope token --rotate   # a new token: sessions that gave the old one are viewers again
"""

from __future__ import annotations

import argparse
import sys

from specscope import access

__all__ = ["register"]


def _token(args: argparse.Namespace) -> int:
    value = access.rotate() if args.rotate else access.token()
    print(value)
    print(
        f"kept in {access.token_path()} (readable by you only); operators give it once as ?token=... "
        "or in the dashboard's sidebar",
        file=sys.stderr,
    )
    return 0


def register(subparsers) -> None:
    """Add ``specscope token``."""
    sp = subparsers.add_parser("token", help="the operator token of a shared dashboard (--rotate: a new one)")
    sp.add_argument("--rotate", action="store_true", help="replace the token; operator sessions become viewers")
    sp.set_defaults(func=_token)
