"""What a benchmark tool's importer is: one ``Importer`` entry, which its module registers as ``IMPORTER``.

``specscope.results.tool_exports`` finds every module of the package that has one (``pkgutil``), and the
import's format detection, the CLI's help, the Explorer's uploader and its labels read them from there:
adding a tool is its module and its test. ``Export`` is the file an importer judges, parsed once for all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from specscope.errors import InputError

__all__ = ["Export", "Importer", "Rows", "every_file"]

Rows = tuple[list[dict], list[dict], tuple[str, ...]]  # result rows, per-request rows, notes


@dataclass(frozen=True)
class Export:
    """A file offered for import, its bytes read; its JSON, YAML and first line parsed on first use."""

    path: Path
    data: bytes

    @property
    def name(self) -> str:
        """The file's name, for messages."""
        return self.path.name

    @property
    def suffix(self) -> str:
        """The file's suffix, lower-case (``.json``)."""
        return self.path.suffix.lower()

    @cached_property
    def json(self):
        """The parsed JSON document; None when the bytes are not JSON (the vllm bench reader says so)."""
        try:
            return json.loads(self.data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None

    @cached_property
    def yaml(self):
        """The parsed YAML document; malformed YAML is refused in one sentence."""
        try:
            return yaml.safe_load(self.data)
        except yaml.YAMLError as exc:
            raise InputError(f"{self.name} is not valid YAML ({exc}).") from exc

    @cached_property
    def first_line(self) -> str:
        """The first line of the text, without a byte-order mark (a CSV's header)."""
        return self.data[:4096].decode("utf-8", errors="replace").lstrip("\ufeff").split("\n", 1)[0].strip()


@dataclass(frozen=True)
class Importer:
    """One benchmark tool's exports: how SpecScope names them, recognises them and reads them into rows.

    ``source``: the rows' source and the importer's name (``guidellm``); a test capture of the real tool
    is named after it (``tests/captures/guidellm_*``). ``label``: how the Explorer and the CLI name the
    tool (``AIPerf``). ``files``: the kinds of file it reads, for the CLI's help (``JSON/CSV``).
    ``suffixes``: those the Explorer's uploader offers for it. ``formats``: each suffix it reads, to the
    format a file of it is read as (``aiperf-csv``) and whether the file is the tool's (``every_file``: every file
    of that suffix is, and ``read`` says what else one is). ``read``: that file's rows, per-request rows
    and notes, given the format and what the user gives for the whole file. ``unstated``: a field some of
    its files never state, to the files that lack it (``{"concurrency": "an AIPerf CSV"}``), so the CLI
    and the form ask for it.
    """

    source: str
    label: str
    files: str
    suffixes: tuple[str, ...]
    formats: Mapping[str, tuple[str, Callable[[Export], bool]]]
    read: Callable[[Export, str, Mapping], Rows]
    unstated: Mapping[str, str] = field(default_factory=dict)

    def recognise(self, export: Export) -> str | None:
        """The format ``export`` is read as, when this tool wrote it; None otherwise."""
        fmt, test = self.formats.get(export.suffix, ("", every_file))
        return fmt if fmt and test(export) else None


def every_file(export: Export) -> bool:
    """Every file of the suffix: the tool claims them all."""
    return True
