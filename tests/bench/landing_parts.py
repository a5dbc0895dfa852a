"""What each kind of element costs a new viewer's landing, over the floor page of tests/bench/dashboard.py.

Each part is the floor page (a title and one small Vega-Lite chart) plus that part alone, served by
its own Streamlit server; every round opens each page once in a fresh browser context, in turn, so
the machine's load falls alike on all of them. Per part: the median landing (until idle with its
charts drawn) beside the floor's, and the median main-thread task time of the page's renderer
(Chromium's TaskDuration: what the page itself cost the browser, less noisy than the wall clock).
The Explorer's speedup-vs-K charts are the bundled results' (the landing's one, and two abreast as a
viewer who adds a setup sees them), built as the page builds them. A part that costs a few percent
alone is what a landing within 1.3x of the floor spends.

    .venv/bin/python tests/bench/landing_parts.py [--rounds 8] [PART ...]

Last line: landing_parts <part>=<wall ratio>/<+task ms> for each part.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
from playwright.async_api import async_playwright

import dashboard  # noqa: E402 - tests/bench/dashboard.py: the floor page, the servers, idle
from helpers.paths import APP

TEXT = "Speedup = output throughput with speculative decoding / without, same model, dataset and concurrency."
K_CHARTS = f"""
import sys
sys.path.insert(0, {str(APP)!r})
from specscope import explore
from ui import cache, k_charts
from ui.chart_style import vega_spec
vs_k = cache.frame(explore.speedup_vs_k, None)
specs = cache.built("bench_specs", lambda: [vega_spec(chart) for _, chart in
                    k_charts.speedup_vs_k(vs_k, explore.default_setups(vs_k, 2))], vs_k)
"""
PARTS = {
    "floor": "",
    "4 metric tiles": "cols = st.columns(4)\n"
    + "\n".join(f"cols[{i}].metric('Result rows', 1234, help='rows')" for i in range(4)),
    "1 markdown headline": f"st.markdown('**1,234** result rows · best speedup **2.318×** [2.2, 2.4] · {TEXT}')",
    "10 captions": "\n".join(f"st.caption('{TEXT} {i}')" for i in range(10)),
    "10 closed expanders": "\n".join(
        f"st.expander('Each setup, its verdict and config {i}', key='e{i}', on_change='rerun')" for i in range(10)
    ),
    "8 tabs": "st.tabs(['Speedup vs K'] + [f'Figure {i}' for i in range(7)], key='tabs', on_change='rerun')",
    "3 download buttons": "\n".join(
        f"st.download_button('Download {i}', b'x', 'x.csv', key='d{i}', on_click='ignore')" for i in range(3)
    ),
    "sidebar nav of 5 pages": "def _page():\n    pass\nst.navigation([st.Page(_page, title=f'Page {i}', "
    "icon=':material/insights:', url_path=f'p{i}') for i in range(5)]).run()",
    "1 speedup-vs-K chart": K_CHARTS + "st.vega_lite_chart(spec=specs[0], width='stretch', key='k0')",
    "2 speedup-vs-K charts": K_CHARTS + "cols = st.columns(2)\nfor i, spec in enumerate(specs):\n"
    "    cols[i].vega_lite_chart(spec=spec, width='stretch', key=f'k{i}')",
}


async def land(browser, url: str) -> tuple[float, float]:
    """Seconds until a fresh viewer sees ``url`` idle with its charts, and its renderer's task seconds."""
    context = await browser.new_context(viewport={"width": 1600, "height": 1000})
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    await cdp.send("Performance.enable")
    try:
        t0 = time.perf_counter()
        await page.goto(url, timeout=dashboard.TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function(
            dashboard.IDLE_JS, arg=["Explorer", True], timeout=dashboard.TIMEOUT_MS, polling=20
        )
        wall = time.perf_counter() - t0
        metrics = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
        return wall, metrics["TaskDuration"]
    finally:
        await context.close()


async def main(rounds: int, parts: list[str]) -> None:
    parts = ["floor", *(p for p in parts if p != "floor")]
    servers: dict[str, dashboard.Server] = {}
    with tempfile.TemporaryDirectory(prefix="specscope-bench-") as tmp:
        try:
            for n, part in enumerate(parts):
                home = Path(tmp) / str(n)
                home.mkdir()
                (home / "page.py").write_text(dashboard.FLOOR_PAGES["vega-lite"] + PARTS[part] + "\n")
                servers[part] = dashboard.Server(home, script=home / "page.py")
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=dashboard.CHROMIUM, args=dashboard.CHROMIUM_ARGS)
                for server in servers.values():  # each script runs once before it is timed
                    await land(browser, server.url)
                times: dict[str, list[tuple[float, float]]] = {part: [] for part in parts}
                for _ in range(rounds):
                    for part, server in servers.items():
                        times[part].append(await land(browser, server.url))
                await browser.close()
        finally:
            for server in servers.values():
                server.stop()
    wall = {part: statistics.median(t for t, _ in values) for part, values in times.items()}
    task = {part: statistics.median(t for _, t in values) for part, values in times.items()}
    for part in parts:
        print(
            f"{part:24s} landing {wall[part]:.3f} s ({wall[part] / wall['floor']:.3f}x the floor), "
            f"renderer tasks {task[part] * 1000:.0f} ms ({(task[part] - task['floor']) * 1000:+.0f} ms)"
        )
    print(
        "landing_parts "
        + " ".join(
            f"{part.replace(' ', '_')}={wall[part] / wall['floor']:.3f}/{(task[part] - task['floor']) * 1000:+.0f}ms"
            for part in parts[1:]
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "parts", nargs="*", metavar="PART", help=f"parts to measure (all by default): {', '.join(PARTS)}"
    )
    args = parser.parse_args()
    if unknown := [part for part in args.parts if part not in PARTS]:
        parser.error(f"no part named {', '.join(unknown)}; the parts: {', '.join(PARTS)}")
    asyncio.run(main(args.rounds, args.parts or list(PARTS)))
