"""What one cell measured: each request's outcome and timings, and the cell's, with the rows it writes.

Per request (``RequestResult``): TTFT (first content chunk), ITL (gaps between chunks), TPOT
((E2EL - TTFT) / (tokens - 1)), E2EL (last content chunk), the longest ITL (a stall) and, for a constrained
request, whether its answer follows its format (``valid``). Per cell (``CellResult``): throughput = output
tokens of successful requests / wall time of the run, the SD counters' ``/metrics`` delta, and what the
hygiene checks need (``specscope.results.hygiene``): the prefix-cache hit rate during the measurement and
the share of requests that started in synchronized waves.

    row = cell.row()   # what it measured, as result columns (the sweep adds model, method, K, ...)
    rows = cell.request_rows(cell_id="ngram-k4-c4", method="ngram", k=4)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from specscope import formats
from specscope.client import metrics
from specscope.client.load_spec import LoadSpec
from specscope.schema import ResultRow, latency_columns

__all__ = ["RequestResult", "CellResult"]

_WAVE_GAP_S = 0.005


@dataclass
class RequestResult:
    """One request's outcome and timings (seconds, as vLLM's RequestFuncOutput)."""

    prompt_id: str
    category: str | None = None
    success: bool = False
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    start_time: float = 0.0
    text: str = ""
    spec_decode: dict | None = None
    finish_reason: str | None = None
    response_format: formats.ResponseFormat | None = None  # the format it was sent with, if any

    @property
    def invalid_reason(self) -> str | None:
        """Why the answer breaks its format, one sentence (a failed request has no answer); None when
        valid or free."""
        if self.response_format is None:
            return None
        if not self.success:
            return "No answer: the request failed."
        problem = self.response_format.check(self.text, self.finish_reason)
        return f"The answer {problem}." if problem else None

    @property
    def valid(self) -> bool | None:
        """Whether the answer follows its format; None for a request sent without one."""
        return None if self.response_format is None else self.invalid_reason is None

    @property
    def max_itl_ms(self) -> float | None:
        """The longest gap between two streamed chunks (a stall), ms."""
        return max(self.itl) * 1000 if self.itl else None

    @property
    def text_sha256(self) -> str:
        """Hash of the generated text (what a lossless check compares)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first (None with one token or less)."""
        if self.output_tokens <= 1:
            return None
        return (self.latency - self.ttft) / (self.output_tokens - 1)


def _stats(values_s: list[float]) -> dict[str, float | None]:
    if not values_s:
        return {"mean": None, "median": None, "p99": None}
    array = np.asarray(values_s) * 1000.0
    return {"mean": float(array.mean()), "median": float(np.median(array)), "p99": float(np.percentile(array, 99))}


@dataclass
class CellResult:
    """The requests of one cell, the run's wall time and the /metrics delta."""

    spec: LoadSpec
    requests: list[RequestResult]
    duration_s: float
    spec_delta: metrics.SpecDecodeDelta | None
    server_alive: bool = True
    prefix_cache_hit_rate: float | None = None

    @property
    def wave_share(self) -> float | None:
        """Share of requests that started within 5 ms of another (lockstep waves); None for one stream."""
        if self.spec.max_concurrency < 2 or len(self.requests) < 2:
            return None
        starts = sorted(r.start_time for r in self.requests)
        together = sum(
            1
            for i, t in enumerate(starts)
            if (i > 0 and t - starts[i - 1] < _WAVE_GAP_S) or (i + 1 < len(starts) and starts[i + 1] - t < _WAVE_GAP_S)
        )
        return together / len(starts)

    @property
    def ok(self) -> list[RequestResult]:
        """The requests that succeeded."""
        return [r for r in self.requests if r.success]

    @property
    def status(self) -> tuple[str, str | None]:
        """("ok", None) or ("failed", reason)."""
        failed = [r for r in self.requests if not r.success]
        if not self.server_alive:
            reason = failed[0].error if failed else "the server stopped answering"
            return "failed", f"The server stopped answering during the run ({reason})."
        if not self.ok:
            return "failed", f"Every request failed; first error: {failed[0].error}" if failed else "No requests ran."
        return "ok", None

    @property
    def valid_share(self) -> float | None:
        """Share of the constrained requests whose answer follows its format (failed ones count as
        not valid); None when the cell sent no format."""
        checked = [r.valid for r in self.requests if r.valid is not None]
        return sum(checked) / len(checked) if checked else None

    def row(self) -> ResultRow:
        """What this cell measured, as columns of its result row; the sweep adds what was measured (model,
        method, K, ...: ``sweep.measure.labels``)."""
        ok = self.ok
        total_output = sum(r.output_tokens for r in ok)
        status, error = self.status
        series = {
            "ttft": [r.ttft for r in ok],
            "tpot": [r.tpot for r in ok if r.tpot is not None],
            "itl": [gap for r in ok for gap in r.itl],
            "e2el": [r.latency for r in ok],
        }
        latency = {metric: _stats(values) for metric, values in series.items()}
        row: ResultRow = {
            "num_prompts": len(self.requests),
            "temperature": self.spec.temperature,
            "output_len": self.spec.output_len,
            "concurrency": self.spec.max_concurrency,
            "request_rate": self.spec.request_rate,
            "duration_s": self.duration_s,
            "completed": len(ok),
            "failed": len(self.requests) - len(ok),
            "total_input_tokens": sum(r.prompt_tokens for r in ok),
            "total_output_tokens": total_output,
            "request_throughput": len(ok) / self.duration_s if self.duration_s else None,
            "output_throughput": total_output / self.duration_s if self.duration_s else None,
            "status": status,
            "error": error,
            "warmups": self.spec.warmups,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "wave_share": self.wave_share,
            "response_format": formats.kinds_label(r.response_format for r in self.requests),
            "valid_share": self.valid_share,
            "max_itl_ms": max((r.max_itl_ms for r in ok if r.max_itl_ms is not None), default=None),
            **latency_columns(lambda stat, metric: latency[metric][stat]),
        }
        if self.spec_delta is not None:
            row.update(self.spec_delta.as_row())
        return row

    def request_rows(self, *, cell_id: str, method: str, k: int) -> list[dict]:
        """Per-request rows (REQUEST_SCHEMA) with per-request SD figures when the server gave them."""
        rows = []
        for r in self.requests:
            sd = r.spec_decode or {}
            tpot = r.tpot
            rows.append(
                {
                    "cell_id": cell_id,
                    "prompt_id": r.prompt_id,
                    "category": r.category,
                    "method": method,
                    "k": k,
                    "concurrency": self.spec.max_concurrency,
                    "success": r.success,
                    "error": r.error or None,
                    "prompt_tokens": r.prompt_tokens,
                    "output_tokens": r.output_tokens,
                    "ttft_ms": r.ttft * 1000 if r.success else None,
                    "tpot_ms": tpot * 1000 if r.success and tpot is not None else None,
                    "mean_itl_ms": float(np.mean(r.itl)) * 1000 if r.itl else None,
                    "e2el_ms": r.latency * 1000 if r.success else None,
                    "num_drafts": sd.get("num_spec_steps"),
                    "draft_tokens": sd.get("num_draft_tokens"),
                    "accepted_tokens": sd.get("num_accepted_draft_tokens"),
                    "acceptance_rate": sd.get("draft_acceptance_rate"),
                    "acceptance_length": sd.get("mean_acceptance_length"),
                    "spec_decode_format": sd.get("format"),
                    "response_format": r.response_format.kind if r.response_format else formats.FREE,
                    "valid": r.valid,
                    "invalid_reason": r.invalid_reason,
                    "max_itl_ms": r.max_itl_ms,
                    "per_step_accepted": sd.get("per_step_accepted"),
                    "per_step_drafted": sd.get("per_step_drafted"),
                }
            )
        return rows
