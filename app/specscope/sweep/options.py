"""How a sweep's servers start: the launch options, one frozen value, and the Launcher they give a spec."""

from __future__ import annotations

from dataclasses import dataclass

from specscope.errors import ConfigError
from specscope.sweep.launchers import PresetLauncher, ServersLauncher
from specscope.sweep.server import Launcher
from specscope.sweep.spec import SweepSpec

__all__ = ["LaunchOptions", "launcher_for"]


@dataclass(frozen=True)
class LaunchOptions:
    """How a sweep's servers start and stay ready, built once from the CLI or the Runs form and handed to
    whichever executor runs the sweep (here, or each Ray task on its node). On a GPU: ``sleep_mode`` False
    stops each server after its cells and starts it again in the next round instead of letting it sleep;
    ``starts_at_once`` servers start together (None: as many as the preset's memory share fits)."""

    sleep_mode: bool | None = None
    starts_at_once: int | None = None
    keep: bool | None = None  # servers stay after the sweep for the lease (None: on a GPU whose servers sleep)

    def __post_init__(self) -> None:
        if self.starts_at_once is not None and self.starts_at_once < 1:
            raise ConfigError("Servers started at once must be at least 1.")


def launcher_for(spec: SweepSpec, options: LaunchOptions = LaunchOptions(), fresh: bool = False) -> Launcher:
    """The Launcher a spec needs: its known servers, else its preset's (fresh ones per cell when
    ``restart_each_cell``; never a running one when ``fresh``, as on a Ray node; drafts accepted
    synthetically when the spec says so; on a GPU, as ``options`` say). Servers a sweep starts end with the
    process running it, even when that process is killed outright, unless they are kept for the lease
    (``options.keep``, by default on a GPU whose servers sleep): those end themselves once unused."""
    if spec.servers:
        return ServersLauncher(spec.servers)
    launcher = PresetLauncher(
        spec.preset,
        reuse=not (spec.restart_each_cell or fresh),
        die_with_parent=True,
        synthetic=spec.synthetic,
        sleep_mode=options.sleep_mode,
        starts_at_once=options.starts_at_once,
    )
    keep = launcher.sleeps if options.keep is None else options.keep
    if keep and not (fresh or spec.restart_each_cell):  # a Ray task's servers end with it, as fresh ones do
        launcher.keep, launcher.die_with_parent = True, False
    return launcher
