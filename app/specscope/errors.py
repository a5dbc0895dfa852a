"""The errors a user can cause, each carrying one sentence that says what is wrong and what to do.

    SpecScopeError
    ├── ConfigError          bad method, preset, K, column map, settings
    ├── InputError           a file SpecScope cannot read (results, prompt sets, recordings)
    ├── ServerError
    │   ├── LaunchFailed     a server did not come up (carries the log tail)
    │   ├── ServerUnreachable
    │   └── UnknownServer    no known server has that name
    ├── StreamError          a stream broke or the server answered with an error
    ├── StoreError           the results store could not be read or written
    ├── NotAllowed           a viewer asked for what only an operator may do
    ├── Busy                 the machine is already doing it (another sweep runs)
    └── UsageError           the library was called in a way it does not support

The UI shows ``str(exc)``; the CLI prints it and exits 1.
"""

from __future__ import annotations

__all__ = [
    "SpecScopeError",
    "ConfigError",
    "InputError",
    "ServerError",
    "LaunchFailed",
    "ServerUnreachable",
    "UnknownServer",
    "StreamError",
    "StoreError",
    "UsageError",
    "NotAllowed",
    "Busy",
]


class SpecScopeError(Exception):
    """Base of every error SpecScope raises on purpose."""


class ConfigError(SpecScopeError):
    """A configuration value is invalid."""


class InputError(SpecScopeError):
    """A file or upload cannot be read; ``line`` names the line when known."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None):
        super().__init__(message)
        self.line = line
        self.field = field


class ServerError(SpecScopeError):
    """A vLLM server misbehaved."""


class LaunchFailed(ServerError):
    """A server did not come up; ``log_tail`` holds its last log lines."""

    def __init__(self, message: str, *, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


class ServerUnreachable(ServerError):
    """Nothing answers at the given URL."""


class UnknownServer(ServerError):
    """No launched or attached server has the given name."""


class StreamError(SpecScopeError):
    """A streamed generation failed part way."""


class StoreError(SpecScopeError):
    """The results store could not be read or written."""


class UsageError(SpecScopeError):
    """The library was called in a way it does not support (a bug in the caller, not bad input)."""


class NotAllowed(SpecScopeError):
    """A viewer asked for what only an operator may do (start, stop, attach, sweep, import)."""


class Busy(SpecScopeError):
    """This machine already does the one thing it does at a time (a sweep); the message names who."""
