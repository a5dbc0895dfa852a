"""Vega-Lite charts as Streamlit sent them, for AppTests: each chart's spec with its datasets
decoded from Arrow, found by title, and the rows each kind of mark draws."""

from __future__ import annotations

import json

import pyarrow as pa


def charts(at) -> list[dict]:
    """Every Vega-Lite chart on the page: its spec, ``datasets`` holding each dataset's rows."""
    out = []
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        spec["datasets"] = {
            d.name: pa.ipc.open_stream(d.data.data).read_all().to_pylist() for d in element.proto.datasets
        }
        out.append(spec)
    return out


def titled(at, title: str) -> dict:
    for spec in charts(at):
        text = spec.get("title", "")
        if (text.get("text") if isinstance(text, dict) else text) == title:
            return spec
    raise AssertionError(f"no chart titled {title!r}")


def rows(spec: dict, mark: str, y: str | None = None) -> list[dict]:
    """The rows drawn by the layers of ``mark`` type (plotting field ``y``, if given)."""
    found = []
    for layer in spec["layer"]:
        kind = layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        if kind == mark and (y is None or layer["encoding"].get("y", {}).get("field") == y):
            found += spec["datasets"][layer["data"]["name"]]
    return found


# In the browser: per Vega-Lite chart, its title and the fields of every mark of one kind
# ('point', 'errorbar'), read from the SVG's aria labels ("field: value; field: value").
MARKS_JS = """kind => Array.from(document.querySelectorAll("[data-testid='stVegaLiteChart'] svg")).map(svg => {
    const title = svg.querySelector("[aria-roledescription='title']");
    return {title: title ? title.getAttribute('aria-label').replace(/^Title text '(.*)'$/, '$1') : '',
            marks: Array.from(svg.querySelectorAll(`[aria-roledescription='${kind}']`)).map(el =>
                Object.fromEntries((el.getAttribute('aria-label') || '').split('; ').map(part => {
                    const at = part.indexOf(': ');
                    return [part.slice(0, at), part.slice(at + 2)]; })))};
})"""
