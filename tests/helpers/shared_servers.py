"""Servers that several tests share: started by a session fixture on first use, stopped right after
the last test of the run that uses that fixture (left to the session's end, they would hold their
memory and cores through every later test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import server_room

# the cpu-smollm2 demo servers the browser and integration tests share (tests/conftest.py): method, core, warmed
DEMO_SERVERS = (("none", "0", True), ("ngram", "1", True), ("suffix", "1", False))


class SharedServers:
    """The homes whose launched servers the tests using ``fixture`` share; ``stop_after`` goes in the
    ``pytest_runtest_teardown`` hook of the conftest that defines the fixture."""

    def __init__(self, fixture: str, alone: bool) -> None:
        self.fixture = fixture
        self.homes: list[Path] = []
        self.alone = alone  # whether they hold the server room alone until stopped, or share it

    def add(self, home: Path) -> Path:
        if not self.homes:
            server_room.enter(self.alone, f"the {self.fixture} fixture")
        self.homes.append(home)
        return home

    def stop(self) -> None:
        from specscope import launch

        while self.homes:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("SPECSCOPE_HOME", str(self.homes.pop()))
                launch.stop_all()
            if not self.homes:
                server_room.leave(self.alone)

    def stop_after(self, item: pytest.Item) -> None:
        """Stop them once no test after ``item`` in this run uses the fixture."""
        if not self.homes:
            return
        items = item.session.items
        later = items[items.index(item) + 1 :] if item in items else []
        if not any(self.fixture in getattr(other, "fixturenames", ()) for other in later):
            self.stop()
