"""This session's role, its sign-in in the sidebar, and the terminal's note of how to share.

When the dashboard listens beyond this machine (``SPECSCOPE_SHARE=1``, or ``server.address`` not a
loopback address, unset included), a session is a viewer until it gives the operator token: once,
as ``?token=...`` in the address (taken out of the address at once), or in the sidebar's field.
The session keeps a digest of the token, never the token, and checks it against the token file on
every run, so ``specscope token --rotate`` turns every operator session back into a viewer.

So that a reload or another tab of the same browser stays an operator, the browser then claims an
operator pass (``access.issue_pass``: signed with the token, not the token) as an HttpOnly,
SameSite=Strict cookie from ``/specscope/operator-pass``, under a one-time nonce the page fetches;
every session reads it from ``st.context.cookies``. Rotating the token invalidates every pass;
leaving operator mode revokes the browser's pass and clears its cookie (``/specscope/operator-leave``). A
dashboard reached only from this machine makes every session an operator.

Importing this module tells the library (``access.install``) who acts in a script thread, so
``require`` refuses a viewer's start, stop, attach, sweep or import whatever the page draws.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from urllib.parse import urlsplit

import streamlit as st
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from streamlit.runtime.scriptrunner import get_script_run_ctx

from specscope import access
from specscope.errors import ConfigError
from ui import state

__all__ = ["shared", "actor", "is_operator", "sign_in", "announce", "routes", "PASS_PATH", "LEAVE_PATH"]

TOKEN_FIELD = "access_token_field"
PASS_PATH = "/specscope/operator-pass"
LEAVE_PATH = "/specscope/operator-leave"
PASS_MAX_AGE_S = 30 * 24 * 3600  # a browser's pass outlives its restarts; rotation or leaving ends it


def shared() -> bool:
    """Whether other machines may reach this dashboard (so operating needs the token)."""
    if os.environ.get("SPECSCOPE_SHARE") == "1":
        return True
    address = st.get_option("server.address")
    return not address or not access.is_loopback(address)


def actor() -> access.Actor:
    """Who this session is; outside a session (a bare run) a viewer when shared."""
    ctx = get_script_run_ctx(suppress_warning=True)
    session = ctx.session_id[:8] if ctx is not None else "none"
    if not shared():
        return access.Actor(f"dashboard session {session} (local)", operator=True)
    proven = st.session_state.get(state.ACCESS_PROVEN) if ctx is not None else None
    if (isinstance(proven, str) and hmac.compare_digest(proven, access.digest(access.token()))) or _browser_pass():
        where = st.context.ip_address
        return access.Actor(f"operator session {session}" + (f" from {where}" if where else ""), operator=True)
    return access.Actor(f"viewer session {session}", operator=False)


def _browser_pass() -> bool:
    """Whether this session's browser sent a valid operator pass (one it did not give back here)."""
    cookie = st.context.cookies.get(access.PASS_COOKIE)
    return isinstance(cookie, str) and cookie != st.session_state.get(state.ACCESS_LEFT) and access.pass_valid(cookie)


def is_operator() -> bool:
    """Whether this session may start, stop, attach, sweep and import (what the pages draw for it)."""
    return actor().operator


def _resolve() -> access.Actor | None:
    return actor() if get_script_run_ctx(suppress_warning=True) is not None else None


access.install(_resolve)


def _prove(candidate: str | None) -> None:
    if access.matches(candidate):
        st.session_state[state.ACCESS_PROVEN] = access.digest(access.token())
        st.session_state.pop(state.ACCESS_REFUSED, None)
        browser_pass = access.issue_pass()  # the browser claims it, so its reloads and tabs stay operators
        st.session_state[state.ACCESS_PASS] = browser_pass
        st.session_state[state.ACCESS_POST] = (PASS_PATH, access.offer(browser_pass))
        st.session_state.pop(state.ACCESS_LEFT, None)
    else:
        st.session_state[state.ACCESS_REFUSED] = True


def _prove_field() -> None:
    """The sign-in form's callback: check what was typed, then empty the field."""
    _prove(st.session_state.get(TOKEN_FIELD))
    st.session_state[TOKEN_FIELD] = ""


def _leave() -> None:
    """Back to viewer: this session, its browser's pass (revoked here, its cookie cleared by the page)."""
    st.session_state.pop(state.ACCESS_PROVEN, None)
    cookie = st.context.cookies.get(access.PASS_COOKIE)
    for value in (cookie, st.session_state.pop(state.ACCESS_PASS, None)):
        access.revoke(value)
    st.session_state[state.ACCESS_LEFT] = cookie or ""
    st.session_state[state.ACCESS_POST] = (LEAVE_PATH, "")


def _post(path: str, body: str = "") -> None:
    """A same-origin POST from the page (its response sets or clears the pass cookie)."""
    st.html(
        f"<script>fetch({json.dumps(path)}, {{method: 'POST', credentials: 'same-origin', "
        f"body: {json.dumps(body)}}});</script>",
        unsafe_allow_javascript=True,
    )


def sign_in() -> None:
    """Take a ``?token=`` from the address, and draw the sidebar's role and sign-in (when shared)."""
    if not shared():
        return
    if "token" in st.query_params:
        _prove(st.query_params.get("token"))
        del st.query_params["token"]
    with st.sidebar:
        if posting := st.session_state.pop(state.ACCESS_POST, None):
            _post(*posting)  # the browser claims its pass, or clears it, once
        if is_operator():
            st.caption("**Operator**: you can start, stop and attach servers, run sweeps and import results.")
            st.button("Leave operator mode", key="access_leave", on_click=_leave)
            return
        st.caption(
            "**Viewer**: you see the Explorer, the Theory, recordings and the servers' state. "
            "Operators (with the token printed where the dashboard was started) start and stop "
            "servers, run sweeps and import."
        )
        with st.form("access_sign_in", border=False):
            st.text_input("Operator token", type="password", key=TOKEN_FIELD, autocomplete="off")
            st.form_submit_button("Become operator", on_click=_prove_field)
        if st.session_state.get(state.ACCESS_REFUSED):
            st.error("That is not the operator token; ask whoever started the dashboard for it.", icon="⚠️")


def announce(port: int | None = None) -> None:
    """Print, in the terminal that started the dashboard, the address to hand out and the operator's
    (with the token), Jupyter-style; never through a logger."""
    if not shared():
        return
    port = port or st.get_option("server.port")
    address = st.get_option("server.address")
    try:
        base = access.public_url(port, address)
    except ConfigError as exc:
        print(f"\n  {exc} Using this machine's address instead.", file=sys.stderr, flush=True)
        base = access.public_url(port, address, setting="")
    print(
        f"\n  SpecScope is shared: hand out {base} (viewers: Explorer, Theory, recordings, servers' state).\n"
        f"  Operators open {base}/?token={access.token()}\n"
        f"  The token is kept in {access.token_path()} (owner-only); `specscope token --rotate` replaces it.\n",
        file=sys.stderr,
        flush=True,
    )


def _same_origin(request: Request) -> bool:
    """A request sent by a page of this dashboard (browsers send Origin on every POST)."""
    origin = request.headers.get("origin")
    return origin is not None and urlsplit(origin).netloc == request.headers.get("host")


async def _claim_pass(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    value = access.claim((await request.body()).decode(errors="replace"))
    if value is None:
        return Response(status_code=404)
    response = Response(status_code=204)
    response.set_cookie(access.PASS_COOKIE, value, max_age=PASS_MAX_AGE_S, path="/", httponly=True, samesite="strict")
    return response


async def _clear_pass(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    access.revoke(request.cookies.get(access.PASS_COOKIE))
    response = Response(status_code=204)
    response.delete_cookie(access.PASS_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def routes() -> list[Route]:
    """The dashboard's routes that hand a browser its operator pass and take it back."""
    return [Route(PASS_PATH, _claim_pass, methods=["POST"]), Route(LEAVE_PATH, _clear_pass, methods=["POST"])]
