"""The test server room records a wait for it, and the slowest-tests summary adds the waits up per stream."""

from __future__ import annotations

import fcntl
import threading

from helpers import server_room, slowest


def test_a_wait_for_the_room_is_recorded_and_summed_per_stream(tmp_path, monkeypatch):
    lock = tmp_path / "servers.lock"
    monkeypatch.setenv("SPECSCOPE_TEST_LOCK", str(lock))
    monkeypatch.setenv("SPECSCOPE_TEST_STREAM", "vllm")
    with open(lock, "a") as other:  # another stream holding the room alone
        fcntl.flock(other, fcntl.LOCK_EX)
        threading.Timer(1.2, fcntl.flock, (other, fcntl.LOCK_UN)).start()
        server_room.enter(True, "tests/integration/test_anatomy.py::t")
        server_room.leave(True)
    [line] = (tmp_path / "servers.lock.waits").read_text().splitlines()
    stream, seconds, who = line.split("\t")
    assert stream == "vllm" and float(seconds) >= 1.0 and who.endswith("test_anatomy.py::t")
    server_room.enter(False, "quick")  # nobody holds it: no wait is written
    server_room.leave(False)
    assert len((tmp_path / "servers.lock.waits").read_text().splitlines()) == 1
    assert slowest.waits(tmp_path / "servers.lock.waits").startswith(
        f"waited for the server room: vllm {float(seconds):.0f} s (1 wait, longest"
    )
    assert slowest.waits(tmp_path / "none") == "waited for the server room: never a second or more"
