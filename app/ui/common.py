"""Shared Streamlit pieces: the cached store, error display, download buttons, and fragments."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specscope import settings
from specscope.errors import SpecScopeError
from specscope.results import shared
from specscope.results.store import Store

__all__ = ["store", "shared_store_note", "show_error", "or_stop", "figure_download", "slug", "fragment", "plain"]


@st.cache_resource
def _store(home: str, bundled: str, shared_store: str) -> Store:
    return Store()


def store() -> Store:
    """One DuckDB-backed store per SpecScope home and shared store; it reloads when result files
    (or the shared store's objects) change."""
    return _store(str(settings.home()), str(settings.bundled_data_dir()), str(or_stop(shared.location)))


def shared_store_note() -> None:
    """Where shared results come from, and why they could not be read or written if so."""
    where = shared.location()
    if where is not None:
        st.caption(f"Results shared with the team in {where} are shown with this machine's.")
        if problem := shared.problem():
            st.warning(problem, icon="⚠️")


def show_error(exc: SpecScopeError) -> None:
    """The error's one sentence, as an error box."""
    st.error(str(exc), icon="⚠️")


def or_stop(call, *args, **kwargs):
    """``call(*args, **kwargs)``; on a SpecScopeError, show its sentence and stop the page there."""
    try:
        return call(*args, **kwargs)
    except SpecScopeError as exc:
        show_error(exc)
        st.stop()


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "figure"


def plain(text) -> str:
    """``text`` (from result files or a link's query) shown literally in Streamlit markdown: no link,
    emphasis, code or HTML."""
    return re.sub(r"([\\`*_{}\[\]()!|<>~$:#])", r"\\\1", str(text))


def figure_download(fig, name: str, key: str) -> None:
    """A button that downloads ``fig`` (plotly or Altair) as a standalone interactive HTML file, built
    on click; either loads its renderer from a CDN."""
    html = (
        (lambda: fig.to_html(include_plotlyjs="cdn", full_html=True)) if hasattr(fig, "to_plotly_json") else fig.to_html
    )
    st.download_button(
        "Download figure (HTML)", html, file_name=f"{slug(name)}.html", mime="text/html", key=key, on_click="ignore"
    )


def fragment(func: Callable) -> Callable:
    """``func`` as an ``st.fragment``: a widget inside it (a tab, an expander, a choice) reruns only
    ``func``, not the page. A page run bare (``ui.warm``, no browser) runs ``func`` in place, so
    warming still fills the caches it uses; ``st.fragment`` would skip it there."""
    fragmented = st.fragment(func)

    @functools.wraps(func)
    def run(*args, **kwargs):
        return (fragmented if get_script_run_ctx(suppress_warning=True) else func)(*args, **kwargs)

    return run
