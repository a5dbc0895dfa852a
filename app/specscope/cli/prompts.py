"""``specscope prompts check``: validate a prompt set file, naming every problem's line."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from specscope import prompts
from specscope.errors import InputError
from specscope.prompts import library

__all__ = ["register"]


def _check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror}); check the path.") from exc
    found = prompts.problems(data, path.name)
    if found:
        for problem in found[:50]:
            print(problem)
        if len(found) > 50:
            print(f"... and {len(found) - 50} more problems")
        return 1
    prompt_set = prompts.parse(data, path.name)
    print(
        f"{path.name}: {len(prompt_set)} prompts ({prompt_set.format}), set name "
        f"'{prompt_set.name}', sha256 {prompt_set.sha256[:16]}"
    )
    categories = Counter(p.category for p in prompt_set.prompts if p.category)
    if categories:
        print("categories: " + ", ".join(f"{name} {count}" for name, count in sorted(categories.items())))
    if args.save:
        print(f"saved as {library.save(data, path.name)[1]}")
    return 0


def register(subparsers) -> None:
    """Add ``specscope prompts check``."""
    prompts_parser = subparsers.add_parser("prompts", help="check and store prompt sets")
    sub = prompts_parser.add_subparsers(dest="prompts_command", required=True)
    check = sub.add_parser("check", help="validate a prompt set file, naming every problem's line")
    check.add_argument("file")
    check.add_argument("--save", action="store_true", help="store it in the SpecScope home")
    check.set_defaults(func=_check)
