"""Shared results in S3-compatible storage: ``SPECSCOPE_STORE=s3://bucket/prefix``.

A finished run (its results and per-request Parquet files, always written locally first) is
uploaded whole as ``<prefix>/results/<run_id>.parquet`` and ``<prefix>/requests/<run_id>.parquet``:
an S3 object appears only when its upload completes, so a reader never sees half a run. An upload
that fails leaves the run in the outbox (``<home>/outbox/<run_id>``); the next publish or sync
uploads it. Readers mirror the bucket's objects into ``<home>/shared/<bucket>/<prefix>/`` (runs are
immutable, so an object is downloaded once, again only when its size or time changes) and the
store reads that mirror with the local files; the bucket is listed at most every ``SYNC_S``
seconds. A bucket that cannot be reached leaves the mirror as it was and ``problem()`` says why.

Endpoint, keys and region come from the usual AWS variables: ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``); keys are never taken from a URL, so none reaches a page, a log or a
result. Reads go through pyarrow's S3 filesystem: DuckDB's httpfs extension
cannot be installed from this machine's package registries, and a local mirror of immutable
objects gives DuckDB the same column and row-group pruning as local files.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from specscope import files, settings
from specscope.errors import ConfigError, StoreError

__all__ = ["Location", "location", "publish", "flush_outbox", "sync", "mirror_dirs", "problem", "status"]

KINDS = ("results", "requests")
SYNC_S = 3.0
RETRY_S = 30.0
_lock = threading.Lock()
_last_sync: dict[str, float] = {}
_problem: dict[str, str | None] = {}


@dataclass(frozen=True)
class Location:
    """A bucket and a key prefix."""

    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    def key(self, kind: str, name: str = "") -> str:
        """The object path (bucket/prefix/kind/name) pyarrow's S3 filesystem takes."""
        return "/".join(p for p in (self.bucket, self.prefix, kind, name) if p)

    def __str__(self) -> str:
        return f"s3://{self.key('')}"


def location() -> Location | None:
    """The shared store named by ``SPECSCOPE_STORE``, or None when results stay on this machine."""
    text = os.environ.get("SPECSCOPE_STORE", "").strip()
    if not text:
        return None
    for name, value in (("SPECSCOPE_STORE", text), ("AWS_ENDPOINT_URL", _endpoint() or "")):
        if "@" in urlparse(value).netloc or urlparse(value).query:  # never echoed: it may hold keys
            raise ConfigError(
                f"{name} carries credentials or a query, which pages and logs would show; "
                "write it without them and put the keys in AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY."
            )
    parsed = urlparse(text)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ConfigError(f"SPECSCOPE_STORE={text!r} is not an S3 location; write it as s3://bucket/prefix.")
    return Location(parsed.netloc, parsed.path.strip("/"))


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def _local_dirs() -> dict[str, Path]:
    return {"results": settings.results_dir(), "requests": settings.requests_dir()}


def _filesystem():
    from pyarrow import fs

    endpoint = _endpoint()
    options = {
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "connect_timeout": 3,
        "request_timeout": 20,
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=2),
    }
    if endpoint:
        parsed = urlparse(endpoint)
        options.update(endpoint_override=parsed.netloc or parsed.path, scheme=parsed.scheme or "https")
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        options.update(
            access_key=os.environ["AWS_ACCESS_KEY_ID"], secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        )
    return fs.S3FileSystem(**options)


def _explain(exc: OSError, where: Location) -> StoreError:
    """One sentence for an S3 failure, by the AWS error it carries."""
    text = str(exc)
    endpoint = _endpoint() or "AWS S3"
    if "NO_SUCH_BUCKET" in text:
        sentence = f"The bucket {where.bucket!r} does not exist at {endpoint}; create it or correct SPECSCOPE_STORE."
    elif any(
        code in text
        for code in (
            "SIGNATURE_DOES_NOT_MATCH",
            "INVALID_ACCESS_KEY_ID",
            "ACCESS_DENIED",
            "Access Denied",
            "InvalidAccessKeyId",
        )
    ):
        sentence = f"{endpoint} refused the credentials for {where}; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
    elif "NETWORK_CONNECTION" in text or "curlCode" in text:
        sentence = f"Nothing answers at {endpoint} for {where}; check AWS_ENDPOINT_URL and the network."
    else:
        sentence = f"The shared store {where} failed ({text.splitlines()[0][:200]}); try again later."
    return StoreError(sentence)


def _check_bucket(s3, where: Location) -> None:
    from pyarrow import fs

    try:
        info = s3.get_file_info(where.bucket)
    except OSError as exc:
        raise _explain(exc, where) from exc
    if info.type == fs.FileType.NotFound:
        raise _explain(OSError("NO_SUCH_BUCKET"), where)


def _key(where: Location) -> str:
    return f"{settings.home()}|{where}"  # one sync clock and problem per home and store


def _outbox() -> Path:
    return settings.home() / "outbox"


def _waiting() -> list[Path]:
    """The outbox's markers of runs waiting to upload."""
    box = _outbox()
    return sorted(p for p in box.iterdir() if not p.name.startswith(".")) if box.is_dir() else []


def _upload(s3, where: Location, run_id: str) -> None:
    local = _local_dirs()
    for kind in KINDS:
        path = local[kind] / f"{run_id}.parquet"
        if path.exists():
            try:
                with s3.open_output_stream(where.key(kind, path.name)) as out:
                    out.write(path.read_bytes())
            except OSError as exc:
                raise _explain(exc, where) from exc


def publish(run_id: str) -> str | None:
    """Upload run ``run_id`` (and any run waiting in the outbox); None when done or when there is no
    shared store, else the sentence saying why the upload waits (the run stays on this machine)."""
    where = location()
    if where is None:
        return None
    box = _outbox()
    box.mkdir(parents=True, exist_ok=True)
    files.write_atomic(box / run_id, run_id)
    return flush_outbox()


def flush_outbox() -> str | None:
    """Upload every run in the outbox; None when all went up, else why they wait."""
    where = location()
    waiting = _waiting()
    if where is None or not waiting:
        return None
    try:
        s3 = _filesystem()
        _check_bucket(s3, where)
        for marker in waiting:
            _upload(s3, where, marker.name)
            marker.unlink(missing_ok=True)
    except StoreError as exc:
        return f"{exc} {len(_waiting())} run(s) stay on this machine and upload when the store is back."
    return None


def _mirror_root(where: Location) -> Path:
    return settings.home() / "shared" / where.bucket / (where.prefix or "_")


def mirror_dirs() -> dict[str, Path]:
    """The local mirror of the shared store's folders (empty when there is no shared store)."""
    where = location()
    if where is None:
        return {}
    root = _mirror_root(where)
    return {kind: root / kind for kind in KINDS}


def sync(force: bool = False) -> None:
    """Bring the local mirror up to date with the bucket (at most every SYNC_S seconds)."""
    where = location()
    if where is None:
        return
    name = _key(where)
    with _lock:
        if not force and time.monotonic() - _last_sync.get(name, -SYNC_S) < SYNC_S:
            return
        _last_sync[name] = time.monotonic()
        try:
            _mirror(where)
            _problem[name] = flush_outbox()
        except StoreError as exc:
            _problem[name] = f"{exc} Showing the results already on this machine."
            _last_sync[name] += RETRY_S - SYNC_S  # an unreachable store is tried again less often


def _mirror(where: Location) -> None:
    from pyarrow import fs

    s3 = _filesystem()
    own = _local_dirs()
    for kind, folder in mirror_dirs().items():
        try:
            listed = s3.get_file_info(fs.FileSelector(where.key(kind), allow_not_found=True))
        except OSError as exc:
            raise _explain(exc, where) from exc
        if not listed:
            _check_bucket(s3, where)  # an empty listing may be a missing bucket
        wanted = {}
        for info in listed:
            name = info.base_name
            if info.type == fs.FileType.File and name.endswith(".parquet") and not (own[kind] / name).exists():
                wanted[name] = info  # this machine's own runs are read from their local files
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.parquet"):
            if stale.name not in wanted:
                stale.unlink(missing_ok=True)
        for name, info in wanted.items():
            target = folder / name
            stamp = f"{info.size}-{info.mtime_ns}"
            tag = folder / f".{name}.tag"
            if target.exists() and tag.exists() and tag.read_text() == stamp:
                continue
            try:
                with s3.open_input_stream(info.path) as source:
                    data = source.read()
            except OSError as exc:
                raise _explain(exc, where) from exc
            files.write_atomic(target, data)
            files.write_atomic(tag, stamp)


def problem() -> str | None:
    """Why the shared store could not be read or written on the last try, or None."""
    where = location()
    return None if where is None else _problem.get(_key(where))


def status() -> dict:
    """Where the shared store is, what this machine mirrors of it, and what waits to upload."""
    where = location()
    if where is None:
        return {"store": None}
    sync(force=True)
    return {
        "store": str(where),
        "endpoint": _endpoint() or "AWS S3",
        "mirrored_runs": len(list(mirror_dirs()["results"].glob("*.parquet"))),
        "outbox": [p.name for p in _waiting()],
        "problem": problem(),
    }
