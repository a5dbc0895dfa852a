"""Results of the benchmark tools teams already run (guidellm, NVIDIA AIPerf, ...), as canonical rows.

Each tool has its module here, which registers one ``Importer`` as ``IMPORTER`` (``importer.py`` says what
it holds); ``IMPORTERS`` are those found in the package, ordered by name. ``read(path, data, given)``
recognises a tool's export by its content and returns its rows (source the tool's name; each held to the
schema's columns, ``schema.result_row``), the per-request
rows it holds and notes; None for any other file, which ``specscope.results.importers`` then reads as
before. What the export does not say (the method and K behind the server, the hardware) comes from
``given``, once for the whole file (``given.speculation``, ``given.settle``). The CLI, the Explorer's
import form and labels name the tools through ``MARKS``, ``names``, ``listing`` and ``unstated``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specscope.results.tool_exports.importer import Export, Importer
from specscope.schema import ResultRow, result_row

__all__ = [
    "ToolExport",
    "Importer",
    "IMPORTERS",
    "read",
    "recognise",
    "names",
    "listing",
    "unstated",
    "MARKS",
    "SUFFIXES",
]


def _discover() -> tuple[Importer, ...]:
    """The ``IMPORTER`` of every module of this package, ordered by name."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        entry = getattr(importlib.import_module(f"{__name__}.{module.name}"), "IMPORTER", None)
        if isinstance(entry, Importer):
            found.append(entry)
    return tuple(sorted(found, key=lambda entry: entry.source))


IMPORTERS = _discover()
MARKS = {entry.source: entry.label for entry in IMPORTERS}  # how the Explorer and the CLI name each source
SUFFIXES = tuple(dict.fromkeys(s for entry in IMPORTERS for s in entry.suffixes))  # what the uploader offers


@dataclass(frozen=True)
class ToolExport:
    """One tool export read: its format name, result rows, per-request rows and notes."""

    format: str
    rows: list[ResultRow]
    requests: list[dict]
    notes: tuple[str, ...]


def read(path: Path, data: bytes, given: Mapping) -> ToolExport | None:
    """The rows of a registered tool's export at ``path`` (its bytes ``data``); None when no tool wrote it."""
    export = Export(path, data)
    for entry in IMPORTERS:
        if fmt := entry.recognise(export):
            rows, requests, notes = entry.read(export, fmt, given)
            return ToolExport(fmt, [result_row(row) for row in rows], requests, notes)
    return None


def recognise(path: Path, data: bytes) -> str | None:
    """Which tool wrote the file (``guidellm``, ``aiperf``), from its content; None for any other file."""
    export = Export(path, data)
    return next((entry.source for entry in IMPORTERS if entry.recognise(export)), None)


def names() -> str:
    """The tools' labels for a sentence: ``AIPerf or guidellm``."""
    labels = list(MARKS.values())
    return " or ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 1 else labels)


def listing() -> str:
    """The tools with the files each reads, for help text: ``AIPerf JSON/CSV, guidellm JSON/YAML/CSV``."""
    return ", ".join(f"{entry.label} {entry.files}" for entry in IMPORTERS)


def unstated(field: str) -> str | None:
    """The tools' files that never state ``field`` (``an AIPerf CSV``), or None when every file does."""
    return " or ".join(entry.unstated[field] for entry in IMPORTERS if field in entry.unstated) or None
