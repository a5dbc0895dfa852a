"""How many servers a sweep runs side by side: on a CPU, as many demo servers as memory holds; on a GPU, as
many as their weights and fixed KV cache fit on the card (or as many shares of ``gpu_memory_utilization``)."""

from __future__ import annotations

from specscope import procfs
from specscope.engine import roofline
from specscope.engine.presets import Preset

__all__ = ["CPU_SERVER_BYTES", "SERVER_OVERHEAD_BYTES", "starts_fitting", "server_bytes", "gpu_need", "cpu_room"]

CPU_SERVER_BYTES = 4 * 2**30  # what a CPU demo server holds at most (weights, KV cache, engine processes)
SERVER_OVERHEAD_BYTES = int(2.5 * 2**30)  # a GPU server beside its weights and KV cache: activations, graphs, context


def starts_fitting(preset: Preset, card_bytes: int | None = None) -> int:
    """How many servers of ``preset`` start at once on one GPU of ``card_bytes``. Where the preset fixes
    the KV cache (``kv_cache_memory_bytes``) and its models' shapes are known, as many of its largest
    server (weights, drafter, KV cache, ``SERVER_OVERHEAD_BYTES``) as fit in 95% of the card; else as many
    shares of ``gpu_memory_utilization`` as fit in 95% of it (1 at vLLM's default share, 0.9)."""
    need = server_bytes(preset)
    if need and card_bytes:
        return max(1, int(0.95 * card_bytes // need))
    share = float(preset.engine_args.get("gpu_memory_utilization", 0.9))
    return max(1, int(0.95 // share)) if share > 0 else 1


def server_bytes(preset: Preset) -> int | None:
    """GPU memory the preset's largest server holds, where its KV cache is fixed and its shapes known."""
    kv = preset.engine_args.get("kv_cache_memory_bytes")
    target = roofline.model_shape(preset.model, table={})
    if not kv or isinstance(target, str):
        return None
    drafts = [
        roofline.model_shape(str(m.params["model"]), table={})
        for m in preset.methods.values()
        if isinstance(m.params.get("model"), str)
    ]
    sizes = [d.weight_bytes for d in drafts if not isinstance(d, str)]
    if len(sizes) < len(drafts):  # a drafter of unknown shape
        return None
    return target.weight_bytes + max(sizes, default=0) + int(kv) + SERVER_OVERHEAD_BYTES


def gpu_need(preset: Preset, card_bytes: int | None) -> int | None:
    """The free GPU memory one of ``preset``'s servers needs to start: its weights, KV cache and overhead where
    known, else its share of the card (vLLM refuses a start with less free than ``gpu_memory_utilization``)."""
    share = float(preset.engine_args.get("gpu_memory_utilization", 0.9))
    return server_bytes(preset) or (int(share * card_bytes) if card_bytes else None)


def cpu_room() -> int:
    """How many CPU servers fit in the memory available now (at least 2: a baseline and one more)."""
    available = procfs.memory_available_bytes()
    return max(2, available // CPU_SERVER_BYTES) if available else 2
