"""Room for real vLLM servers when tests/run.sh runs two pytest streams side by side: tests marked
``many_servers`` (and the users of the demo servers the browser and integration tests share) hold the room
alone, tests marked ``few_servers`` share it. One lock file per run, named by
SPECSCOPE_TEST_LOCK; without it (one pytest), no lock. A CPU demo server holds about 3.4 GB, so a test
of four servers beside one of three would not fit 24 GB. A wait for the room of a second or more is written
to ``SPECSCOPE_TEST_LOCK``.waits (stream, seconds, who), which tests/helpers/slowest.py adds up: a test's JUnit time
counts its wait as its own."""

from __future__ import annotations

import fcntl
import os
import time
from typing import IO

_held: list[bool] = []  # this process's holds: alone or not
_file: list[IO] = []


def enter(alone: bool, who: str = "") -> None:
    """Hold the room, alone or shared; one lock per process, alone while any hold here wants it."""
    if os.environ.get("SPECSCOPE_TEST_LOCK"):
        _held.append(alone)
        began = time.monotonic()
        _apply()
        waited = time.monotonic() - began
        if waited >= 1.0:
            with open(os.environ["SPECSCOPE_TEST_LOCK"] + ".waits", "a") as waits:
                waits.write(f"{os.environ.get('SPECSCOPE_TEST_STREAM', '-')}\t{waited:.1f}\t{who}\n")


def leave(alone: bool) -> None:
    if alone in _held:
        _held.remove(alone)
        _apply()


def _apply() -> None:
    if not _held:
        if _file:
            fcntl.flock(_file[0], fcntl.LOCK_UN)
            _file.pop().close()
        return
    if not _file:
        _file.append(open(os.environ["SPECSCOPE_TEST_LOCK"], "a"))  # noqa: SIM115 - held across tests
    fcntl.flock(_file[0], fcntl.LOCK_EX if any(_held) else fcntl.LOCK_SH)
