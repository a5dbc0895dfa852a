"""Work done once and shared by every viewer: figure data, figures and fits, across sessions.

Everything here lives in ``st.cache_resource`` (one object per key for the whole server, no
copy per session) and is keyed on what it is computed from:

- query results on (the store's content version, the query, the filters): the SQL of a view
  runs once per version of the results files, whoever asks;
- figures (and frames derived in pandas, and Vega-Lite specs ready to send) on a digest of the
  frames they are drawn from, plus their options, so a new run rebuilds only the figures whose
  data it changes;
- fits per family on a digest of that family's rows, so a new run refits only its family (the
  step's measured parts per setup, and what an unfitted family lacks, likewise).

The content version comes from ``Store.refresh`` on every call, so a new run, an import or a
deleted file shows up on the next rerun of every session. What these functions return is
shared: callers must not mutate it.
"""

from __future__ import annotations

import functools
import hashlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from specscope.advice import calibrate, fitting
from specscope.analysis import anatomy, anatomy_cells, explore
from specscope.errors import InputError
from specscope.results.store import Store
from ui.chart_style import vega_spec
from ui.common import store

__all__ = [
    "version",
    "facets",
    "frame",
    "table",
    "speedup_rows",
    "built",
    "vega_lite",
    "fits",
    "unfitted",
    "calibrations",
    "digest",
]

T = TypeVar("T")
Filters = Mapping[str, Sequence] | None
_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}  # id of a shared frame -> (the frame, its digest)
_ROWS: dict[int, tuple[weakref.ref, dict]] = {}  # id of a shared frame -> (the frame, its rows' digests)


def version() -> str:
    """The store's content version now (reloading it if a results file changed)."""
    return store().refresh()


def _filters_key(filters: Filters) -> tuple:
    return tuple(sorted((column, tuple(values)) for column, values in (filters or {}).items()))


@st.cache_resource(max_entries=32, show_spinner=False)
def _facets(content: str, _store: Store) -> dict[str, list]:
    return _store.facets()


def facets() -> dict[str, list]:
    """Distinct values of each filter column, computed once per content version."""
    db = store()
    return _facets(db.refresh(), db)


@st.cache_resource(max_entries=256, show_spinner=False)
def _frame(name: str, content: str, filters: tuple, _query: Callable, _store: Store) -> pd.DataFrame:
    return _remember(_query(_store, {column: list(values) for column, values in filters}))


def frame(query: Callable[[Store, Filters], pd.DataFrame], filters: Filters = None) -> pd.DataFrame:
    """``query(store, filters)`` (e.g. ``explore.speedup_vs_k``) once per content version and filters."""
    db = store()
    return _frame(f"{query.__module__}.{query.__qualname__}", db.refresh(), _filters_key(filters), query, db)


def table(query: Callable[[Store], pd.DataFrame]) -> pd.DataFrame:
    """``query(store)`` (e.g. ``explore.bundled_sources``: no filters) once per content version."""
    db = store()
    return _frame(f"{query.__module__}.{query.__qualname__}", db.refresh(), (), lambda s, _: query(s), db)


@st.cache_resource(max_entries=8, show_spinner=False)
def _speedup_rows(content: str, _store: Store) -> pd.DataFrame:
    return _remember(explore.cells_with_points(_store))


def speedup_rows() -> pd.DataFrame:
    """Every row with its speedup and its point's figure (``explore.cells_with_points``), once per content
    version."""
    db = store()
    return _speedup_rows(db.refresh(), db)


def _cell(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return value.dtype.str.encode() + value.tobytes()
    return repr(value).encode()


def _frame_digest(frame: pd.DataFrame) -> str:
    known = _DIGESTS.get(id(frame))
    if known is not None and known[0]() is frame:
        return known[1]
    h = hashlib.blake2b(repr((list(frame.columns), len(frame))).encode(), digest_size=12)
    for name in frame.columns:
        values = frame[name].to_numpy()
        h.update(values.dtype.str.encode())
        if values.dtype == object:
            h.update(b"\x1f".join(_cell(v) for v in values))
        else:
            h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def _remember(frame: pd.DataFrame) -> pd.DataFrame:
    """Digest a shared (cached, never mutated) frame once; later digests of it are a lookup."""
    key = id(frame)
    _DIGESTS[key] = (weakref.ref(frame, lambda _: _DIGESTS.pop(key, None)), _frame_digest(frame))
    return frame


def _row_digests(frame: pd.DataFrame) -> dict[Any, bytes]:
    """Each row's digest by its index label: what a row subset's digest is made of."""
    known = _ROWS.get(id(frame))
    if known is not None and known[0]() is frame:
        return known[1]
    columns = [frame[name].to_numpy() for name in frame.columns]
    numbers = [np.ascontiguousarray(values) for values in columns if values.dtype != object]
    kinds = b"".join(values.dtype.str.encode() for values in numbers)  # so equal bytes of other types differ
    # each row's numbers as one run of bytes, taken in one pass per column rather than cell by cell
    block = (
        np.hstack([values.view(np.uint8).reshape(len(frame), -1) for values in numbers])
        if numbers and len(frame)
        else np.zeros((len(frame), 0), np.uint8)
    )
    cells = [[_cell(v) for v in values] for values in columns if values.dtype == object]
    rows = {
        label: hashlib.blake2b(
            b"\x1f".join([kinds + block[i].tobytes(), *(column[i] for column in cells)]), digest_size=12
        ).digest()
        for i, label in enumerate(frame.index)
    }
    key = id(frame)
    _ROWS[key] = (weakref.ref(frame, lambda _: _ROWS.pop(key, None)), rows)
    return rows


def labels_digest(whole: pd.DataFrame, labels: pd.Index) -> str:
    """The digest of ``whole.loc[labels]`` from ``whole``'s row digests, without taking those rows: equal rows
    digest alike whatever else ``whole`` holds, so a part a new run leaves alone keeps its cached work, and a large
    frame's many parts cost one pass over it. Where ``whole``'s labels repeat: the digest of the rows taken."""
    if not whole.index.is_unique:
        return digest(whole.loc[labels])
    by_label = _row_digests(whole)
    h = hashlib.blake2b(repr((list(whole.columns), len(labels))).encode(), digest_size=12)
    h.update(b"".join(by_label[label] for label in labels))
    return h.hexdigest()


def digest(*parts: Any) -> str:
    """A short digest of the content of frames (cells holding lists included) and plain values."""
    h = hashlib.blake2b(digest_size=12)
    for part in parts:
        h.update((_frame_digest(part) if isinstance(part, pd.DataFrame) else repr(part)).encode())
        h.update(b"\x1e")
    return h.hexdigest()


@st.cache_resource(max_entries=256, show_spinner=False)
def _built(name: str, key: str, _build: Callable[[], T]) -> T:
    result = _build()
    return _remember(result) if isinstance(result, pd.DataFrame) else result


def built(name: str, build: Callable[[], T], *inputs: Any) -> T:
    """``build()`` (a figure, a derived frame) once per (name, content of ``inputs``) for the
    whole server; ``inputs`` are the frames and options it is computed from."""
    return _built(name, digest(*inputs), build)


def vega_lite(name: str, build: Callable[[], Any], *inputs: Any) -> dict:
    """The Vega-Lite spec (``chart_style.vega_spec``) of the Altair chart ``build()`` draws, once per
    (name, content of ``inputs``) for the whole server: draw it with ``st.vega_lite_chart(spec=...)``."""
    return _built(f"{name}.vega-lite", digest(*inputs), lambda: vega_spec(build()))


@st.cache_resource(max_entries=512, show_spinner=False)
def _family_fit(key: str, train_smallest: int | None, _rows: Callable[[], pd.DataFrame]) -> fitting.FamilyFit | str:
    """The family's fit, or why it cannot be fitted: a refusal is kept too (a cache keeps no exception), so
    a new run does not ask the store's unfittable families again (33 of 43 on the bundled results)."""
    try:
        fit = fitting.fit_family(_rows(), train_smallest)
    except InputError as exc:
        return str(exc)
    _remember(fit.rows)  # figures drawn from this fit are keyed on its rows
    return fit


@st.cache_resource(max_entries=512, show_spinner=False)
def _setup_parts(key: str, _rows: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    return anatomy.table(_rows())


def _parts(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``anatomy.table(frame)``, the part of each run's setups (``anatomy.setups``) kept on a digest of
    their rows: a new run redoes its own setups only (and takes only their rows out of ``frame``)."""
    if not anatomy_cells.NEEDED <= set(frame.columns):
        return pd.DataFrame()
    parts = [
        _setup_parts(labels_digest(frame, labels), functools.partial(frame.loc.__getitem__, labels))
        for labels in anatomy.setups(frame)
    ]
    return pd.concat([p for p in parts if not p.empty] or [pd.DataFrame()], ignore_index=True)


@st.cache_resource(max_entries=512, show_spinner=False)
def _missing(key: str, _rows: Callable[[], pd.DataFrame]) -> str | None:
    return fitting.missing(_rows())


def unfitted(frame: pd.DataFrame) -> list[tuple[dict, str]]:
    """``fitting.unfitted(frame)`` once per content of ``frame`` (a rerun looks it up), each family's answer
    kept on a digest of its rows (a new run asks again only of the families it changed, and takes only their rows)."""
    return _built(
        "unfitted",
        digest(frame),
        lambda: [(keys, problem) for keys, at in _positions(frame) if (problem := _missing(*_family(frame, at)))],
    )


def _positions(frame: pd.DataFrame) -> list[tuple[dict, np.ndarray]]:
    """``fitting.family_positions(frame)`` once per content of ``frame``: the fits and the unfitted share it."""
    return _built("family_positions", digest(frame), lambda: fitting.family_positions(frame))


def calibrations(frame: pd.DataFrame) -> list[calibrate.Calibration]:
    """``calibrate.calibrations(frame)`` kept on a digest of the rows it reads (``calibrate.calibrated``): a new
    run of a real drafter leaves them as they are, so it does not calibrate again."""
    at = np.flatnonzero(calibrate.calibrated(frame).to_numpy(dtype=bool, na_value=False))
    return _built("calibrations", labels_digest(frame, frame.index[at]), lambda: calibrate.calibrations(frame.iloc[at]))


def _family(frame: pd.DataFrame, at: np.ndarray) -> tuple[str, Callable[[], pd.DataFrame]]:
    """The digest of the rows at positions ``at`` of a shared frame, and how to take them."""
    return labels_digest(frame, frame.index[at]), functools.partial(frame.iloc.__getitem__, at)


@st.cache_resource(max_entries=16, show_spinner=False)
def _fits(content: str, train_smallest: int | None, _store: Store) -> list[fitting.FamilyFit]:
    frame = _speedup_rows(content, _store)

    def fit(at: np.ndarray, train: int | None) -> fitting.FamilyFit:
        key, rows = _family(frame, at)
        found = _family_fit(key, train, rows)
        if isinstance(found, str):
            raise InputError(found)
        return found

    return fitting.fit_families(frame, train_smallest, fit=fit, parts=_parts(frame), positions=_positions(frame))


def fits(train_smallest: int | None) -> list[fitting.FamilyFit]:
    """One fit per family of ``speedup_rows()``; each family is fitted once per content of its
    own rows, so a new run refits only the family it belongs to."""
    db = store()
    return _fits(db.refresh(), train_smallest, db)
