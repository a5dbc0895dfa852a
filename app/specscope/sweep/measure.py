"""Measuring one cell on its server: the load, the CPU-sharing check, and the row's labels (what
was measured, on what, with which vLLM and torch). A constrained cell sends only the prompts that
carry a response format (``cell_prompts``), as many times each as a free cell sends each prompt
(``cell_requests``), so its row, its baseline and its per-prompt figures hold those prompts only."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from specscope import formats, procfs, prompts
from specscope.client import compilelog
from specscope.client.cell_result import CellResult
from specscope.client.load import ServerInfo, run_load, run_sync, server_info
from specscope.client.load_spec import LoadSpec
from specscope.client.progress import Progress, ProgressEvent
from specscope.engine import provenance, vllms
from specscope.errors import SpecScopeError
from specscope.schema import ResultRow
from specscope.sweep import lock
from specscope.sweep.server import Launcher, RunningServer
from specscope.sweep.spec import Cell, SweepSpec, requests_of

__all__ = ["labels", "failed_row", "run_cell", "cell_prompts", "cell_requests"]


def cell_prompts(prompt_set: prompts.PromptSet, cell: Cell) -> prompts.PromptSet:
    """The prompts a cell sends: a constrained cell only those that carry a response format."""
    return prompt_set.with_formats() if cell.constrained else prompt_set


def cell_requests(spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell) -> int | None:
    """How many requests a cell sends (``requests_of``); a constrained cell of a set where only some prompts
    carry a format sends that share of them (each of its prompts as often as a free cell sends each prompt),
    unless ``per_concurrency`` asks for full batches."""
    count = requests_of(spec, cell.concurrency)
    sent = len(cell_prompts(prompt_set, cell))
    if count is None or spec.per_concurrency is not None or sent == len(prompt_set):
        return count
    return max(1, math.ceil(count * sent / len(prompt_set)))


def labels(
    spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell, server: RunningServer, info: ServerInfo | None
) -> ResultRow:
    """What a cell's row says about what was measured: the run, model, method, K, hardware, vLLM, torch."""
    return {
        "run_id": None,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "source": spec.source,
        "label": spec.label or f"{spec.preset} on {prompt_set.name}",
        "model": server.model or (info.model if info else None),
        "draft_model": server.draft_model,
        "method": cell.method,
        "k": cell.k,
        "k_schedule": cell.k_schedule,
        "repeat": cell.repeat,
        "method_params": server.method_params,
        "tp": server.tp,
        "hardware": spec.hardware or server.hardware or server.placed or provenance.hardware_label(),
        "vllm_version": (info.vllm_version if info else None) or server.vllm_version or _installed_version(),
        "torch_version": None if server.hardware else server.torch_version or provenance.torch_version(),
        "weights": server.weights,
        "acceptance": provenance.acceptance_kind(
            cell.method, provenance.is_synthetic(server.method_params) or (spec.synthetic.keys(cell.k) is not None)
        ),
        "dataset": prompt_set.name,
        "response_format": formats.kinds_label(p.response_format for p in prompt_set.prompts if cell.constrained),
    }


def _installed_version() -> str | None:
    installed = vllms.installed_vllm()
    return installed[1] if installed else None


def failed_row(
    spec: SweepSpec,
    prompt_set: prompts.PromptSet,
    cell: Cell,
    server: RunningServer | None,
    info: ServerInfo | None,
    reason: str,
) -> ResultRow:
    """The row of a cell that could not be measured, with the reason."""
    return {
        **labels(spec, prompt_set, cell, server or RunningServer(url=""), info),
        "concurrency": cell.concurrency,
        "output_len": spec.output_len,
        "temperature": spec.temperature,
        "request_rate": spec.request_rate,
        "num_prompts": cell_requests(spec, prompt_set, cell) or len(cell_prompts(prompt_set, cell)),
        "status": "failed",
        "error": reason,
    }


def run_cell(
    spec: SweepSpec,
    prompt_set: prompts.PromptSet,
    cell: Cell,
    server: RunningServer,
    launcher: Launcher,
    emit: Progress,
    done: int,
    total: int,
    prior_requests: int,
) -> tuple[ResultRow, list[dict[str, Any]], dict[str, str]]:
    """Measure one cell on its server: its row, its request rows and each prompt's output hash."""
    info = None
    try:
        info = server_info(server.url)
        load = LoadSpec(
            base_url=server.url,
            model=info.model,
            num_prompts=cell_requests(spec, prompt_set, cell),
            max_concurrency=cell.concurrency,
            request_rate=spec.request_rate,
            output_len=spec.output_len,
            temperature=spec.temperature,
            warmups=spec.warmups,
            structured=cell.constrained,
        )
        emit(ProgressEvent("cell_start", cell.cell_id, done, total))
        marks: list[int | None] = []  # where the server's log stood when the measured requests began
        load_run = run_load(
            load,
            cell_prompts(prompt_set, cell),
            emit,
            cell=cell.cell_id,
            cells_done=done,
            cells_total=total,
            measuring=lambda: marks.append(compilelog.offset(server.log_path)),
        )
        with lock.measuring():  # the dashboard here computes nothing for new results meanwhile
            outcome, foreign = run_sync(_with_foreign_cpu(load_run, server, launcher))
        compiles = compilelog.since(server.log_path, marks[0] if marks else None)
    except SpecScopeError as exc:
        death = launcher.death(server)
        row = failed_row(spec, prompt_set, cell, server, info, f"{exc} {death or ''}".strip())
        return row, [], {}
    row = {
        **outcome.row(),
        **labels(spec, prompt_set, cell, server, info),
        "max_num_seqs": server.max_num_seqs,
        "prior_requests": prior_requests,
        "foreign_cpu": foreign,
        "compiles": None if compiles is None else len(compiles),
    }
    if row["status"] != "ok":
        death = launcher.death(server)
        row["error"] = f"{row['error']} {death}" if death else row["error"]
    outputs = {r.prompt_id: r.text_sha256 for r in outcome.ok}
    return row, outcome.request_rows(cell_id=cell.cell_id, method=cell.method, k=cell.k), outputs


async def _with_foreign_cpu(
    load_run: Coroutine[Any, Any, CellResult], server: RunningServer, launcher: Launcher
) -> tuple[CellResult, float | None]:
    """The cell's load, and the share of its server's cores other work used meanwhile (``procfs.foreign_cpu``;
    None for a server bound to no cores in particular). Its own work is the server's processes and the load
    generator's threads: this one, which runs the load's event loop, and that loop's helper threads. Everything
    else is other work, this process's other threads included (the dashboard's pages, when it runs the sweep)."""
    helpers = f"specscope-load-{threading.get_native_id()}"
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix=helpers))

    def sample() -> procfs.CpuSample | None:
        threads = [
            threading.get_native_id(),
            *(t.native_id for t in threading.enumerate() if t.name.startswith(helpers) and t.native_id is not None),
        ]
        return procfs.sample_cpu(launcher.pids(server), server.cores, threads) if server.cores else None

    before = sample()
    outcome = await load_run
    return outcome, procfs.foreign_cpu(before, sample())
