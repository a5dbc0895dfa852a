"""The Explorer's import: a recognised file imports at once; a benchmark tool's export (a registered
importer's, ``specscope.results.tool_exports``) asks for the method and K behind its server (and the
hardware) first; any other CSV or Parquet gets a column map (a column per canonical field, or one value for
every row), a preview, then import."""

from __future__ import annotations

import zlib

import streamlit as st

from specscope.errors import SpecScopeError
from specscope.results import importers, tool_exports
from ui.common import show_error

__all__ = ["import_upload", "uploader_label", "TYPES", "TOOL_GIVEN"]

NOT_MAPPED = "(not in the file)"
HELP = {
    "model": "the target model",
    "method": "ngram, suffix, eagle3, ...; the baseline may read none, nosd, baseline, no-spec or be empty",
    "concurrency": "requests in flight",
    "output_throughput": "output tokens per second",
    "k": "speculative tokens per step",
}
# Fields a file may lack but the user can state once for every row.
GIVEN = ("model", "hardware", "dataset", "draft_model")
# What a benchmark tool's export may lack besides the method and K.
TOOL_GIVEN = ("hardware", "draft_model", "model", "concurrency")
_NO_CONCURRENCY = tool_exports.unstated("concurrency")  # the tools' files that never state it: "an AIPerf CSV"
TOOL_HELP = {
    "hardware": "what the server ran on, e.g. cpu, 1xH100",
    "draft_model": "the draft model or EAGLE head, for draft_model and eagle methods",
    "model": "only when the file does not name it",
    "concurrency": f"only for {_NO_CONCURRENCY}, which does not state it"
    if _NO_CONCURRENCY
    else "only when the file does not state it",
}
TYPES = [suffix.lstrip(".") for suffix in importers.UPLOAD_SUFFIXES]  # the uploader's file types


def uploader_label(max_mb: int) -> str:
    """The uploader's label: the formats it takes, the tools' from their importers."""
    return f"{importers.known_formats()} or any CSV / Parquet (you map its columns; at most {max_mb} MB)"


def _run_import(name: str, data: bytes, **kwargs) -> None:
    try:
        result = importers.import_upload(name, data, **kwargs)
    except SpecScopeError as exc:
        show_error(exc)
        return
    st.success(f"Imported {result.rows} rows ({result.format}).")
    for note in result.notes:
        st.caption(note)


def _field_picker(field: str, columns: list[str], guess: dict[str, str], key: str) -> str | None:
    options = [NOT_MAPPED, *columns]
    required = field in importers.REQUIRED_FIELDS
    chosen = st.selectbox(
        f"{field}{' (required)' if required else ''}",
        options,
        index=options.index(guess[field]) if field in guess else 0,
        help=HELP.get(field),
        key=f"{key}_{field}",
    )
    return None if chosen == NOT_MAPPED else chosen


def _column_map(name: str, data: bytes, columns: list[str], source: str | None) -> None:
    st.info(
        f"{name} is not a format SpecScope knows. Pick the column that holds each field (or give "
        "one value for every row), check the preview, then import."
    )
    key = f"explorer_map_{zlib.crc32(data)}"
    guess = importers.guess_map(columns)
    column_map, given = {}, {}
    optional = [f for f in importers.MAP_FIELDS if f not in importers.REQUIRED_FIELDS]
    for field in importers.REQUIRED_FIELDS:
        column_map[field] = _field_picker(field, columns, guess, key)
    with st.expander("More fields", expanded=False):
        for field in optional:
            column_map[field] = _field_picker(field, columns, guess, key)
    for field in GIVEN:
        if column_map.get(field) is None:
            given[field] = st.text_input(
                f"{field} for every row",
                key=f"{key}_given_{field}",
                help=f"the file has no {field} column: one value for all its rows",
            )
    mapped = {f: c for f, c in column_map.items() if c}
    given = {f: v.strip() for f, v in given.items() if v and v.strip()}
    try:
        preview, notes, rows = importers.preview_upload(name, data, mapped, given)
    except SpecScopeError as exc:
        show_error(exc)
        return
    st.caption(f"Preview: the first {len(preview)} of {rows} rows as SpecScope will store them.")
    st.dataframe(preview, hide_index=True, key=f"{key}_preview")
    for note in notes:
        st.caption(note)
    if st.button(f"Import {rows} rows", key="explorer_import_mapped"):
        _run_import(name, data, source=source, column_map=mapped, overrides=given)


def _tool_setup(name: str, data: bytes, tool: str, source: str | None) -> None:
    """A benchmark tool's export: the user gives what the file does not say, once for all its rows."""
    st.info(
        f"{name} is a {tool_exports.MARKS[tool]} export. It does not say which speculative "
        "decoding the server ran: give it for the whole file (a value the file states wins; one that "
        "contradicts it is refused)."
    )
    key = f"explorer_tool_{zlib.crc32(data)}"
    method = st.text_input(
        "method (required)", key=f"{key}_method", help="none for the baseline; ngram, suffix, eagle3, draft_model, ..."
    )
    k = st.number_input(
        "K (draft tokens per step)",
        min_value=0,
        value=None,
        step=1,
        key=f"{key}_k",
        help="the server's num_speculative_tokens; leave empty for the baseline",
    )
    given: dict[str, str | int | None] = {"method": method.strip() or None, "k": None if k is None else int(k)}
    for field in TOOL_GIVEN:
        value = st.text_input(
            f"{field.replace('_', ' ')} for every row", key=f"{key}_{field}", help=TOOL_HELP.get(field)
        )
        given[field] = value.strip() or None
    concurrency = given["concurrency"]
    if isinstance(concurrency, str) and concurrency.isdigit():
        given["concurrency"] = int(concurrency)
    if st.button("Import", key="explorer_import_tool", disabled=not given["method"]):
        _run_import(name, data, source=source, overrides={f: v for f, v in given.items() if v is not None})


def import_upload(upload, source: str | None) -> None:
    """The import controls for one uploaded file (``st.file_uploader``'s value)."""
    data = upload.getvalue()
    try:
        tool = importers.upload_tool(upload.name, data)
        columns = None if tool else importers.upload_columns(upload.name, data)
    except SpecScopeError as exc:
        show_error(exc)
        return
    if tool:
        _tool_setup(upload.name, data, tool, source)
    elif columns is not None:
        _column_map(upload.name, data, columns, source)
    elif st.button("Import", key="explorer_import"):
        _run_import(upload.name, data, source=source)
