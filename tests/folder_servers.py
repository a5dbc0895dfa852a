"""Servers one test folder's tests share: started by a session fixture on first use, stopped after
the folder's last test (left to the session's end, they would hold their memory and cores through
the other folders' tests)."""

from __future__ import annotations

from pathlib import Path

import pytest


class FolderServers:
    """The homes whose launched servers a folder's tests share; ``stop_after`` goes in the folder's
    ``pytest_runtest_teardown`` hook."""

    def __init__(self) -> None:
        self.homes: list[Path] = []

    def add(self, home: Path) -> Path:
        self.homes.append(home)
        return home

    def stop(self) -> None:
        from specscope import launch

        while self.homes:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("SPECSCOPE_HOME", str(self.homes.pop()))
                launch.stop_all()

    def stop_after(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Stop them once ``item`` is the folder's last test of the run."""
        if nextitem is None or nextitem.path.parent != item.path.parent:
            self.stop()
