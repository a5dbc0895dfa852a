"""Results of the benchmark tools teams already run, guidellm and NVIDIA AIPerf, as canonical rows.

``read(path, data, given)`` recognises a tool's export by its content and returns its rows (source
``guidellm`` or ``aiperf``), the per-request rows it holds and notes; None for any other file, which
``specscope.results.importers`` then reads as before. What the export does not say (the method and K behind
the server, the hardware) comes from ``given``, once for the whole file (``given.speculation``,
``given.settle``). Each format has its module: ``guidellm`` (report JSON, YAML, CSV) and ``aiperf``
(metrics JSON with the per-request JSON-lines beside it, CSV).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from specscope.errors import InputError
from specscope.results.tool_exports import aiperf, guidellm

__all__ = ["ToolExport", "read", "recognise", "SOURCES", "MARKS", "SUFFIXES"]

SOURCES = (guidellm.SOURCE, aiperf.SOURCE)
MARKS = {guidellm.SOURCE: "guidellm", aiperf.SOURCE: "AIPerf"}  # how the Explorer names each source
SUFFIXES = (".yaml", ".yml", ".jsonl")  # besides .json and .csv, which other formats share


@dataclass(frozen=True)
class ToolExport:
    """One tool export read: its format name, result rows, per-request rows and notes."""

    format: str
    rows: list[dict]
    requests: list[dict]
    notes: tuple[str, ...]


def _json(data: bytes):
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None  # not JSON: the vllm bench reader says so


def _yaml(name: str, data: bytes):
    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise InputError(f"{name} is not valid YAML ({exc}).") from exc


def _first_line(data: bytes) -> str:
    return data[:4096].decode("utf-8", errors="replace").lstrip("\ufeff").split("\n", 1)[0].strip()


def read(path: Path, data: bytes, given: Mapping) -> ToolExport | None:
    """The rows of a guidellm or AIPerf export at ``path`` (its bytes ``data``); None when it is neither."""
    name, suffix = path.name, path.suffix.lower()
    if suffix == ".json":
        obj = _json(data)
        if guidellm.is_report(obj):
            return ToolExport("guidellm-json", *guidellm.rows_from_report(name, obj, given))
        if aiperf.is_export(obj):
            beside = aiperf.records_beside(path)
            records = None if beside is None else aiperf.read_records(beside.name, beside.read_bytes())
            return ToolExport("aiperf-json", *aiperf.rows_from_export(name, obj, given, records))
        return None
    if suffix in (".yaml", ".yml"):
        obj = _yaml(name, data)
        if not guidellm.is_report(obj):
            raise InputError(f"{name} is YAML but not a guidellm report (it needs metadata.guidellm_version and "
                             "benchmarks); SpecScope reads YAML from guidellm only.")
        return ToolExport("guidellm-yaml", *guidellm.rows_from_report(name, obj, given))
    if suffix == ".jsonl":
        if aiperf.is_records(_first_line(data)):
            raise InputError(f"{name} holds AIPerf's per-request records; import the profile_export_aiperf.json "
                             "beside it, which reads them too.")
        raise InputError(f"{name} is not an AIPerf per-request file; SpecScope reads JSON-lines from AIPerf only.")
    if suffix == ".csv":
        first = _first_line(data)
        if guidellm.is_csv(first):
            return ToolExport("guidellm-csv", *guidellm.rows_from_csv(name, data, given))
        if aiperf.is_csv(first):
            return ToolExport("aiperf-csv", *aiperf.rows_from_csv(name, data, given))
    return None


def recognise(path: Path, data: bytes) -> str | None:
    """Which tool wrote the file (``guidellm``, ``aiperf``), from its content; None for any other file."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        obj = _json(data)
        return guidellm.SOURCE if guidellm.is_report(obj) else aiperf.SOURCE if aiperf.is_export(obj) else None
    if suffix in (".yaml", ".yml"):
        return guidellm.SOURCE
    if suffix == ".jsonl":
        return aiperf.SOURCE
    if suffix == ".csv":
        first = _first_line(data)
        return guidellm.SOURCE if guidellm.is_csv(first) else aiperf.SOURCE if aiperf.is_csv(first) else None
    return None
