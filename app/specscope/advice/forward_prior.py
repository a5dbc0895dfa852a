"""A step-cost prior from ``vllm bench forward`` (vLLM 0.33.0 on): the forward passes of a speculative step over
a plain step's, at exact batch sizes, on dummy weights.

``vllm bench forward`` times one exact batch per case, captured as a CUDA graph: each request ``(query_len,
kv_len, num_draft_tokens)``, a decode (1 query token) or a verify of D drafts (1 + D query tokens), the target's
forward and, unless ``--exclude-drafter``, the configured drafter's proposal (mtp, eagle, eagle3, dspark or
dflash; all drafts taken as accepted). ``--output-json`` writes, per case, ``{"case", "requests", "median_us",
"ranks"}`` (vllm/benchmarks/forward/main.py:258-266, 288-290 in 0.33.0, the same in 0.34.0), each rank's
``timing_scope`` (``target_only`` or ``target_and_drafter``), ``drafter`` (``method``, ``num_draft_tokens``: the
drafter always drafts the server's K) and ``latency_us`` (capture.py:154-156, 242-254, 290-303; speculator.py:74-87).

It fits SpecScope's step anatomy (``specscope.analysis.anatomy``) in forward time, in plain steps at a batch size:

- plain: a decode case timed without the drafter (``--exclude-drafter``, or no ``--speculative-config``);
- verify: a verify case of K drafts timed without the drafter: the target over K + 1 tokens per request;
- step: a verify case of K drafts timed with a drafter of K drafts: verify plus the drafter's passes, so
  ``draft = step - verify`` where both were timed: what anatomy cannot measure for a head, which is never
  served alone.

``D(K, batch) = step / plain`` (a drafter passing no model, ngram or suffix: ``verify / plain``) is fitted per
batch size as ``d0 + d1 * K`` and interpolated over batch sizes like a calibration (``calibrate.Calibration``),
so ``calibrate``'s what-if and comparisons read it. It is a prior, not a measured step: vLLM leaves out target
sampling, rejection sampling and the CPU's part of a step (main.py:8-9), which a plain step pays too, so where
those weigh (small models, a loaded host) the D it gives reads lower than the D a run measures. A batch of B
requests stands for concurrency B (every request in the step); requests' contexts are the cases' KV lengths.

    prior = read([Path("forward.json"), Path("forward-k3.json")], {"model": "meta-llama/Llama-3.1-8B-Instruct",
                 "hardware": "1xH100-80GB"})
    prior.calibration().cost(3, 4)     # D at K=3, concurrency 4
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specscope import settings
from specscope.advice import calibrate
from specscope.engine.catalog import FORWARD_TIMED, MATCH_DRAFTERS, method_class
from specscope.errors import ConfigError, InputError

__all__ = ["ORIGIN", "ForwardPrior", "read", "save", "stored", "folder"]

ORIGIN = (
    "a prior from vllm bench forward: forward passes only, on exact batches (no sampling, rejection sampling "
    "or the CPU's part of a step)"
)
CONTEXT_APART = 0.10  # a step and its plain step whose mean contexts differ more than this are noted
CASE_KEYS = {"case", "requests", "median_us", "ranks"}
GIVEN = ("model", "hardware", "method", "draft_model", "vllm_version")


@dataclass(frozen=True)
class _Case:
    """One timed case that is a decode or verify step of equal requests."""

    scope: str  # target_only | target_and_drafter
    batch: int
    drafts: int  # D: draft tokens verified per request (0: a decode)
    context: float  # mean KV length of its requests
    median_us: float
    spread_pct: float | None
    drafter: str | None
    drafter_k: int | None


@dataclass(frozen=True)
class ForwardPrior:
    """A step-cost prior: its keys (model, draft_model, method, hardware, vllm_version, files), one cell per (batch,
    K) with ``plain_us``, ``verify_us``, ``step_us`` and, in plain steps, ``cost`` (D), ``verify`` and ``draft``,
    and the notes on what was left out and why."""

    keys: dict
    cells: pd.DataFrame
    notes: tuple[str, ...] = ()

    def calibration(self) -> calibrate.Calibration:
        """The prior as a Calibration (``calibrate.what_if``, ``compare``): tokens per step K + 1, every draft
        accepted as vllm bench forward times them."""
        cells = self.cells.dropna(subset=["cost"])
        table, curve = calibrate.fit_cells(cells)
        al = cells["k"] + 1.0
        out = cells[["concurrency", "k", "cost"]].assign(al=al, speedup=al / cells["cost"])
        keys = {k: self.keys.get(k) for k in (*calibrate.KEYS, "vllm_version")}
        return calibrate.Calibration(
            keys, out[["concurrency", "k", "al", "speedup", "cost"]], table, curve, origin=ORIGIN
        )


def _cases(name: str, data: bytes) -> list[dict]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{name} is not valid JSON ({exc}).") from exc
    if not isinstance(obj, list) or not obj or not all(isinstance(c, dict) and CASE_KEYS <= set(c) for c in obj):
        raise InputError(
            f"{name} is not `vllm bench forward --output-json` output (a list of cases, each with "
            "case, requests, median_us and ranks); run vllm bench forward with --output-json FILE."
        )
    return obj


def _case(name: str, raw: dict) -> _Case | str:
    """The case as a step, or why it is none."""
    label = f"{name}, case {raw['case']!r}"
    requests = raw["requests"]
    drafts = {int(r.get("num_draft_tokens", 0)) for r in requests}
    decode = all(
        r["kv_len"] > r["query_len"] == 1 + int(r.get("num_draft_tokens", 0)) and not r.get("chunked") for r in requests
    )
    if not requests or not decode or len(drafts) != 1:
        return f"{label}: not a decode or verify step of equal requests (a prefill, a chunk or a mixed batch)"
    rank = raw["ranks"][0] if raw["ranks"] else {}
    if rank.get("finite") is False:
        return f"{label}: its forward gave values that are not finite"
    drafter = rank.get("drafter") or {}
    spread = (rank.get("latency_us") or {}).get("sample_spread_pct")
    return _Case(
        scope=rank.get("timing_scope", "target_only"),
        batch=len(requests),
        drafts=drafts.pop(),
        context=float(np.mean([r["kv_len"] for r in requests])),
        median_us=float(raw["median_us"]),
        spread_pct=None if spread is None else float(spread),
        drafter=drafter.get("method"),
        drafter_k=drafter.get("num_draft_tokens"),
    )


def _method(cases: list[_Case], given: Mapping) -> str:
    timed = {c.drafter for c in cases if c.scope == "target_and_drafter" and c.drafter}
    if len(timed) > 1:
        raise InputError(
            f"The files time drafters of several methods ({', '.join(sorted(timed))}); import one "
            "method's files at a time."
        )
    stated, wanted = (timed.pop() if timed else None), given.get("method")
    if stated and wanted and stated != wanted:
        raise InputError(
            f"The files time the drafter of {stated}, but --method gives {wanted}; leave --method out "
            "(the files' method is used) or import that method's files."
        )
    method = stated or wanted
    if not method:
        raise InputError(
            "The cases time the target alone (--exclude-drafter) and do not say the method; give "
            "--method, e.g. ngram, whose drafter passes no model."
        )
    method_class(method)  # an unknown method is refused here
    if not stated and method not in MATCH_DRAFTERS:
        timed_too = (
            "vllm bench forward times no draft model's passes"
            if method not in FORWARD_TIMED
            else f"a step of {method} also runs its drafter: run vllm bench forward with its --speculative-config, "
            "without --exclude-drafter"
        )
        raise InputError(
            f"The cases time the target alone, which is a whole step only for a drafter that passes "
            f"no model (ngram, suffix); {timed_too}."
        )
    return method


def _mean(found: list[_Case]) -> _Case | None:
    """One case standing for several timings of the same shape (their mean)."""
    if not found:
        return None
    spreads = [c.spread_pct for c in found if c.spread_pct is not None]
    first = found[0]
    return _Case(
        first.scope,
        first.batch,
        first.drafts,
        float(np.mean([c.context for c in found])),
        float(np.mean([c.median_us for c in found])),
        max(spreads) if spreads else None,
        first.drafter,
        first.drafter_k,
    )


def _cell(
    batch: int, k: int, plain: _Case, verify: _Case | None, step: _Case | None, match: bool, notes: list[str]
) -> dict:
    """One (batch, K) in forward time and in plain steps; a drafter passing no model drafts in no forward pass, so
    its step is its verify."""
    whole = verify if match else step
    part = whole or verify or step
    assert part is not None  # a cell is made for a K that was timed
    apart = abs(part.context / plain.context - 1.0)
    if apart > CONTEXT_APART:
        notes.append(
            f"batch {batch}, K={k}: its mean context ({part.context:.0f} tokens) is {apart:.0%} from the "
            f"plain step's ({plain.context:.0f}); vllm bench forward --kv-len-jitter 0 keeps them equal"
        )
    if match:
        draft = 0.0
    else:
        draft = (step.median_us - verify.median_us) / plain.median_us if step and verify else np.nan
    spreads = [c.spread_pct for c in (plain, verify, step) if c is not None and c.spread_pct is not None]
    return {
        "concurrency": float(batch),
        "k": k,
        "context": round(part.context, 1),
        "plain_us": plain.median_us,
        "verify_us": verify.median_us if verify else None,
        "step_us": whole.median_us if whole else None,
        "cost": whole.median_us / plain.median_us if whole else np.nan,
        "verify": verify.median_us / plain.median_us if verify else np.nan,
        "draft": draft,
        "spread_pct": max(spreads) if spreads else None,
    }


def _cells(cases: list[_Case], method: str, notes: list[str]) -> pd.DataFrame:
    match = method in MATCH_DRAFTERS
    by_shape: dict[tuple, list[_Case]] = {}
    for case in cases:
        if case.scope == "target_and_drafter" and case.drafts == 0:
            notes.append(
                f"batch {case.batch}: a decode timed with its drafter is no plain step (time the plain "
                "step with --exclude-drafter); left out"
            )
            continue
        if case.scope == "target_and_drafter" and case.drafter_k != case.drafts:
            notes.append(
                f"batch {case.batch}, K={case.drafts}: the drafter drafted {case.drafter_k} tokens while "
                f"the target verified {case.drafts} (time a K step on a server of num_speculative_tokens "
                "K); left out"
            )
            continue
        by_shape.setdefault((case.scope, case.batch, case.drafts), []).append(case)
    rows = []
    for batch in sorted({b for _, b, _ in by_shape}):
        plain = _mean(by_shape.get(("target_only", batch, 0), []))
        ks = sorted({d for _, b, d in by_shape if b == batch and d > 0})
        if plain is None:
            if ks:
                notes.append(
                    f"batch {batch}: no plain decode timed without the drafter, so its steps have no "
                    "plain step to be divided by; left out"
                )
            continue
        for k in ks:
            rows.append(
                _cell(
                    batch,
                    k,
                    plain,
                    _mean(by_shape.get(("target_only", batch, k), [])),
                    _mean(by_shape.get(("target_and_drafter", batch, k), [])),
                    match,
                    notes,
                )
            )
    columns = [
        "concurrency",
        "k",
        "context",
        "plain_us",
        "verify_us",
        "step_us",
        "cost",
        "verify",
        "draft",
        "spread_pct",
    ]
    return pd.DataFrame(rows, columns=columns)


def read(paths: Sequence[Path], given: Mapping) -> ForwardPrior:
    """The step-cost prior of one method from ``vllm bench forward --output-json`` files; ``given`` names what the
    files do not say: ``model`` and ``hardware`` (needed), ``method`` (where no drafter was timed; else it must
    agree), ``draft_model``, ``vllm_version``. InputError in one sentence when they hold no step to price."""
    for field in ("model", "hardware"):
        if not str(given.get(field) or "").strip():
            raise InputError(f"vllm bench forward output does not name the {field}; give --{field}.")
    cases, notes = [], []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise InputError(f"{path} cannot be read ({exc.strerror}); check the path.") from exc
        for raw in _cases(Path(path).name, data):
            found = _case(Path(path).name, raw)
            (notes.append(found) if isinstance(found, str) else cases.append(found))
    method = _method(cases, given)
    cells = _cells(cases, method, notes)
    if cells["cost"].notna().sum() == 0:
        verify = "timed without it too" if method in MATCH_DRAFTERS else "timed with a drafter of K drafts"
        raise InputError(
            f"The cases price no {method} step: each needs a plain decode timed without the drafter "
            f"and, at the same batch size, a verify of K drafts {verify}."
        )
    keys: dict = {field: (str(given[field]).strip() if given.get(field) else None) for field in GIVEN}
    keys.update(method=method, host=None, files=[Path(p).name for p in paths])
    return ForwardPrior(keys, cells, tuple(notes))


def folder() -> Path:
    """Where imported priors are kept: ``$SPECSCOPE_HOME/step-priors``."""
    return settings.home() / "step-priors"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:120] or "prior"


def save(prior: ForwardPrior, name: str | None = None) -> Path:
    """Keep ``prior`` under ``folder()`` as ``NAME.json`` (default: its model, method and hardware); its path."""
    name = _slug(name or f"{prior.keys['model']}-{prior.keys['method']}-{prior.keys['hardware']}")
    path = folder() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = prior.cells.astype(object).where(prior.cells.notna(), None).to_dict("records")
    path.write_text(json.dumps({"keys": prior.keys, "cells": cells, "notes": list(prior.notes)}, indent=1))
    return path


def stored() -> list[ForwardPrior]:
    """The priors kept under ``folder()``, by name; ConfigError naming a file that is not one."""
    out = []
    for path in sorted(folder().glob("*.json")) if folder().is_dir() else []:
        try:
            raw = json.loads(path.read_text())
            cells = pd.DataFrame(raw["cells"]).astype({"cost": float, "verify": float, "draft": float})
            out.append(ForwardPrior(raw["keys"], cells, tuple(raw.get("notes", ()))))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{path} is not a step-cost prior SpecScope wrote ({exc}); delete it or import the "
                "vllm bench forward files again."
            ) from exc
    return out
