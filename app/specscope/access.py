"""Who may change things: operators and viewers, and the token that makes a dashboard session an operator.

    token()                          # made once in the SpecScope home, readable by its owner only
    matches(candidate)               # constant-time comparison with the stored token
    rotate()                         # a new token; sessions that proved the old one are viewers again
    require("start a server")        # the acting Actor, or NotAllowed when a viewer acts
    with acting_as(actor): ...       # this thread acts as ``actor`` (a sweep's thread, as its starter)
    value = issue_pass()             # what a browser keeps to stay an operator (never the token)
    pass_valid(value)                # signed with today's token and not given back

The functions that start, stop or attach servers, run sweeps, import results or store prompt sets
call ``require`` first, so a page cannot skip the check. Who acts: the ``acting_as`` actor of this
thread, else what the dashboard's ``install``-ed resolver says of its session, else the local user
(the CLI, tests, a background thread), who is an operator. The token is never logged; only a
digest of it is kept beside a session.

An operator pass is what a browser keeps (an HttpOnly cookie) so its reloads and other tabs stay
operators: a random marker and its HMAC under the token, so it holds nothing that reveals the token,
and a rotated token makes every pass invalid. ``revoke`` gives one back (leaving operator mode). A pass
reaches the browser through a one-time nonce (``offer`` then ``claim``), never through an address.
"""

from __future__ import annotations

import contextvars
import getpass
import hashlib
import hmac
import logging
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from specscope import settings
from specscope.errors import ConfigError, NotAllowed

__all__ = [
    "Actor",
    "TOKEN_FILE",
    "token_path",
    "token",
    "rotate",
    "matches",
    "digest",
    "install",
    "current",
    "require",
    "acting_as",
    "local_user",
    "lan_address",
    "PUBLIC_URL_ENV",
    "public_url",
    "PASS_COOKIE",
    "issue_pass",
    "pass_valid",
    "revoke",
    "offer",
    "claim",
    "is_loopback",
    "is_this_machine",
]

TOKEN_FILE = "operator-token"
PUBLIC_URL_ENV = "SPECSCOPE_PUBLIC_URL"  # the address to hand out, where this machine cannot tell it
_log = logging.getLogger(__name__)
_acting: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("specscope_actor", default=None)
_resolver: Callable[[], Actor | None] | None = None
PASS_COOKIE = "specscope_operator"
OFFER_S = 120.0  # how long an offered pass waits for its browser to claim it
_passes_lock = threading.Lock()
_revoked: set[str] = set()  # markers of passes given back (this process)
_offers: dict[str, tuple[str, float]] = {}  # nonce -> (pass, monotonic deadline)


@dataclass(frozen=True)
class Actor:
    """Someone acting on SpecScope: ``who`` is what the audit trail records."""

    who: str
    operator: bool


def local_user() -> Actor:
    """The user running this process (the CLI, a test): an operator."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = str(os.getuid())
    return Actor(f"CLI user {name}", operator=True)


def token_path() -> Path:
    """The operator token's file in the SpecScope home."""
    return settings.home() / TOKEN_FILE


def _write_new(path: Path, *, replace: bool) -> str:
    """A new token in ``path``, whole or not at all; without ``replace``, a token another process
    wrote meanwhile wins (two dashboards starting at once print the same one)."""
    value = secrets.token_urlsafe(32)
    part = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, value.encode())
    finally:
        os.close(fd)
    if replace:
        os.replace(part, path)
        return value
    try:
        os.link(part, path)  # fails when the file exists
    except FileExistsError:
        value = path.read_text().strip()
    finally:
        part.unlink()
    return value


def token() -> str:
    """The operator token, made on first use. A token file others could read is replaced by a new
    one: what it held may have been seen."""
    path = token_path()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return _write_new(path, replace=False)
    if mode & (stat.S_IRWXG | stat.S_IRWXO) or path.stat().st_uid != os.getuid():
        _log.warning("%s could be read by other users; SpecScope replaced the token in it.", path)
        return _write_new(path, replace=True)
    value = path.read_text().strip()
    return value or _write_new(path, replace=True)


def rotate() -> str:
    """Replace the token; dashboard sessions that proved the old one become viewers."""
    return _write_new(token_path(), replace=True)


def digest(value: str) -> str:
    """What a session keeps of the token it proved (never the token itself)."""
    return hashlib.sha256(value.encode()).hexdigest()


def matches(candidate: str | None) -> bool:
    """Whether ``candidate`` is the operator token, compared in constant time."""
    if not candidate:
        return False
    return hmac.compare_digest(candidate.strip().encode(), token().encode())


def install(resolver: Callable[[], Actor | None] | None) -> None:
    """The dashboard's way to say who acts in the calling thread (None: not one of its sessions)."""
    global _resolver
    _resolver = resolver


def current() -> Actor:
    """Who acts in the calling thread."""
    acting = _acting.get()
    if acting is not None:
        return acting
    resolved = _resolver() if _resolver is not None else None
    return resolved if resolved is not None else local_user()


def require(action: str) -> Actor:
    """The acting operator; NotAllowed, naming ``action``, when a viewer acts."""
    actor = current()
    if not actor.operator:
        raise NotAllowed(
            f"Viewers cannot {action}; open the dashboard with the operator token "
            "(the sidebar's 'Operator token', or ?token=... in the address) to do it."
        )
    return actor


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """For the block, in this thread, ``actor`` acts."""
    reset = _acting.set(actor)
    try:
        yield actor
    finally:
        _acting.reset(reset)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine's loopback interface only: localhost, ::1 or 127.x.y.z."""
    return bool(host) and (host in ("localhost", "::1") or str(host).startswith("127."))


def is_this_machine(host: str | None) -> bool:
    """Whether a URL's ``host`` reaches this machine: a loopback name, or 0.0.0.0 (every interface)."""
    return is_loopback(host) or host == "0.0.0.0"


def lan_address() -> str:
    """This machine's address on its network (the one a colleague's browser reaches), else its name.
    A UDP socket's connect sends nothing: it only picks the route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.254.254.254", 1))
            address = sock.getsockname()[0]
        except OSError:
            return socket.gethostname()
    return socket.gethostname() if is_loopback(address) else address


def public_url(port: int, bound: str | None = None, setting: str | None = None) -> str:
    """The address viewers should open: ``setting`` (default ``$SPECSCOPE_PUBLIC_URL``) where set (a container
    cannot see the host and port its dashboard is published on), else this machine's network address (or the
    one the dashboard is bound to) with ``port``. ConfigError, naming the variable, for a value that is not an
    http(s) address."""
    given = (os.environ.get(PUBLIC_URL_ENV, "") if setting is None else setting).strip()
    if not given:
        host = lan_address() if not bound or bound in ("0.0.0.0", "::") else bound
        return f"http://{host}:{port}"
    parts = urlsplit(given)
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(
            f"{PUBLIC_URL_ENV}={given!r} is not an address viewers can open; give one such as "
            f"http://demo-host:8501 (scheme, host, optional port and path)."
        )
    return given.rstrip("/")


def _sign(marker: str) -> str:
    return hmac.new(token().encode(), f"operator-pass:{marker}".encode(), hashlib.sha256).hexdigest()


def issue_pass() -> str:
    """A new operator pass: ``marker.signature``, the signature an HMAC of the marker under the token."""
    marker = secrets.token_urlsafe(16)
    return f"{marker}.{_sign(marker)}"


def pass_valid(value: str | None) -> bool:
    """Whether ``value`` is a pass signed with the current token and not revoked."""
    if not isinstance(value, str):
        return False
    marker, _, signature = value.partition(".")
    if not marker or not signature:
        return False
    with _passes_lock:
        if marker in _revoked:
            return False
    return hmac.compare_digest(signature.encode(), _sign(marker).encode())


def revoke(value: str | None) -> None:
    """Give a pass back: it no longer makes anyone an operator, even if a browser still sends it."""
    marker = value.partition(".")[0] if isinstance(value, str) else ""
    if marker:
        with _passes_lock:
            _revoked.add(marker)


def offer(value: str) -> str:
    """A one-time nonce under which the browser may ``claim`` the pass ``value`` for ``OFFER_S`` seconds."""
    nonce = secrets.token_urlsafe(24)
    now = time.monotonic()
    with _passes_lock:
        for old in [n for n, (_, deadline) in _offers.items() if deadline < now]:
            del _offers[old]
        _offers[nonce] = (value, now + OFFER_S)
    return nonce


def claim(nonce: str | None) -> str | None:
    """The pass offered under ``nonce`` (once), None when unknown, claimed or expired."""
    with _passes_lock:
        value, deadline = _offers.pop(nonce or "", (None, 0.0))
    return value if value is not None and deadline >= time.monotonic() else None
