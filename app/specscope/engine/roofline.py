"""Rooflines: the fastest a decode step can be on given hardware, and so the most tokens per second.

A decode step reads every weight once and the KV cache of every running sequence, and does two
FLOPs per weight for every token it processes. Its time is at least the larger of

    memory  = (weight bytes + concurrency x context x KV bytes per token) / bandwidth
    compute = concurrency x (K + 1) x 2 x parameters / peak bf16 FLOP/s

(K = 0 without speculation). Each sequence gains at most K + 1 tokens a step, so

    throughput <= concurrency x (K + 1) / step        TPOT >= step / (K + 1)

Llama-3.1-8B in bf16 is 16.06 GB: on an H100 SXM (3.35 TB/s) a step takes at least 4.79 ms, at most
209 tok/s at batch 1. Weight GEMMs turn compute-bound near concurrency x (K + 1) = peak / bandwidth
(989 TFLOP/s / 3.35 TB/s = 295 tokens on an H100). Attention FLOPs, activations and kernel launches
are left out: each would only lower the ceiling, so it stays an upper bound. Several GPUs
(``2xH200``) count their bandwidth and FLOPs together (perfect tensor parallelism).

The ceiling counts every weight, as the public arithmetic does; a step reads only the rows of an
untied input-embedding table that its tokens need, so ``strict_tokens_per_s`` leaves that table out:
it is what no measurement can pass, and what hygiene flags against (``above``).

Hardware comes from ``HARDWARE`` (each row cites its datasheet); a label names its variant or
is taken as the fastest of its family and memory (``1xH100-80GB``: SXM), so the ceiling stays an upper
bound. Models come from ``shapes.SHAPES``, a prepared model's ``config.json``, or the user's table.
``$SPECSCOPE_HOME/limits.toml`` adds or overrides either::

    [hardware."cpu-2core"]
    bandwidth_gb_s = 20.0          # bf16_tflops left out: the memory bound alone
    source = "STREAM triad on this machine"
    [models."my-org/My-8B"]
    config = "/models/my-8b/config.json"

Where the model's shape, the hardware, the concurrency or (speculative) K is unknown, there is no
ceiling, and ``why`` says which.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from specscope import settings
from specscope.engine import shapes
from specscope.errors import ConfigError
from specscope.schema import BASELINE_METHOD

__all__ = [
    "Hardware",
    "HARDWARE",
    "ModelShape",
    "Ceiling",
    "Limit",
    "shape_from_config",
    "model_shape",
    "hardware_of",
    "ceiling",
    "limit_of",
    "with_ceilings",
    "above",
    "CEILING_COLUMNS",
    "user_table",
]

_SOURCE = {  # public datasheets
    "H100": "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet: SXM, PCIe, NVL)",
    "H200": "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet)",
    "A100": "https://www.nvidia.com/en-us/data-center/a100/ (A100 datasheet)",
    "L40S": "https://www.nvidia.com/en-us/data-center/l40s/ (L40S datasheet)",
    "B200": "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: per GPU)",
    "MI300X": "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
    "Xeon": "https://www.intel.com/content/www/us/en/products/sku/231746/ (8 channels DDR5-4800)",
    "EPYC": "https://www.amd.com/en/products/processors/server/epyc/4th-generation-9004-and-8004-series/"
    "amd-epyc-9654.html (12 channels DDR5-4800)",
}


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or CPU socket): memory bandwidth, dense bf16 peak (None: not published)."""

    name: str
    bandwidth_gb_s: float
    bf16_tflops: float | None
    source: str


HARDWARE: dict[str, Hardware] = {
    h.name: h
    for h in (
        Hardware("H100 SXM", 3350, 989, _SOURCE["H100"]),
        Hardware("H100 PCIe", 2000, 756, _SOURCE["H100"]),
        Hardware("H100 NVL", 3900, 835, _SOURCE["H100"]),
        Hardware("H200", 4800, 989, _SOURCE["H200"]),
        Hardware("A100 80GB", 2039, 312, _SOURCE["A100"]),
        Hardware("A100 40GB", 1555, 312, _SOURCE["A100"]),
        Hardware("L40S", 864, 362, _SOURCE["L40S"]),
        Hardware("B200", 8000, 2250, _SOURCE["B200"]),
        Hardware("MI300X", 5300, 1307, _SOURCE["MI300X"]),
        Hardware("Xeon Platinum 8480+", 307.2, None, _SOURCE["Xeon"]),
        Hardware("EPYC 9654", 460.8, None, _SOURCE["EPYC"]),
    )
}

# A label's name (after ``<count>x``, spaces and case ignored) -> the table row; an unnamed variant is
# the fastest of its family and memory, so the ceiling stays an upper bound.
_LABELS: tuple[tuple[str, str, str], ...] = (
    (r"H100.*PCIE", "H100 PCIe", ""),
    (r"H100.*NVL", "H100 NVL", ""),
    (r"H100.*SXM", "H100 SXM", ""),
    (r"H100-?80GB", "H100 SXM", "an 80 GB H100 taken as the SXM (the fastest 80 GB H100)"),
    (r"H100", "H100 NVL", "an H100 of unstated variant taken as the NVL (the fastest H100)"),
    (r"H200", "H200", ""),
    (r"A100.*40GB", "A100 40GB", ""),
    (r"A100", "A100 80GB", "an A100 of unstated memory taken as the 80 GB (the faster)"),
    (r"L40S", "L40S", ""),
    (r"B200", "B200", ""),
    (r"MI300X", "MI300X", ""),
    (r"(XEON)?(PLATINUM)?8480", "Xeon Platinum 8480+", ""),
    (r"(EPYC)?9654", "EPYC 9654", ""),
)
_DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "float8": 1,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "int8": 1,
}
_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


@dataclass(frozen=True)
class ModelShape:
    """What a decode step reads and computes per token, from a model's config."""

    name: str
    params: int  # every weight
    embedding_params: int  # of an untied input-embedding table (read row by row); 0 when tied
    dtype_bytes: int
    kv_bytes_per_token: int

    @property
    def weight_bytes(self) -> int:
        """Bytes of every weight."""
        return self.params * self.dtype_bytes


def shape_from_config(config: Mapping, name: str = "") -> ModelShape:
    """A dense decoder's shape from its Hugging Face ``config.json`` (gated MLP, as Llama, Qwen, Mistral).
    ConfigError for a mixture of experts or a config missing a size."""
    if any(config.get(key) for key in _MOE_KEYS):
        raise ConfigError(
            f"{name or 'The model'} is a mixture of experts: its roofline needs the active "
            "experts per token, which SpecScope does not model."
        )
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        heads, inter, vocab = (
            int(config["num_attention_heads"]),
            int(config["intermediate_size"]),
            int(config["vocab_size"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{name or 'The model'}'s config lacks {exc}: no roofline without its sizes.") from exc
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)  # q, o; k, v
    if config.get("attention_bias"):
        attention += head_dim * (heads + 2 * kv_heads)
    per_layer = attention + 3 * hidden * inter + 2 * hidden  # gate, up, down; two norms
    tied = bool(config.get("tie_word_embeddings", False))
    embedding = vocab * hidden
    params = layers * per_layer + hidden + embedding * (1 if tied else 2)
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16").removeprefix("torch.")
    size = _DTYPE_BYTES.get(dtype.lower())
    if size is None:
        raise ConfigError(
            f"{name or 'The model'}'s dtype {dtype!r} is not one SpecScope sizes ({', '.join(_DTYPE_BYTES)})."
        )
    return ModelShape(name, params, 0 if tied else embedding, size, 2 * layers * kv_heads * head_dim * size)


def user_table(path: Path | None = None) -> dict:
    """``$SPECSCOPE_HOME/limits.toml`` as a dict (empty when there is none); ConfigError names a bad one."""
    path = path or settings.home() / "limits.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix or remove it.") from exc


def _key(name: str) -> str:
    """'meta-llama/Llama-3.1-8B-Instruct', 'shape-Llama-3.1-8B', 'local:x' -> a lookup key."""
    last = str(name).split("/")[-1].split(":")[-1]
    return re.sub(r"-instruct$", "", last.lower().removeprefix(shapes.PREFIX))


_SAME_SHAPE = {"llama-3.1-70b": "llama-3.3-70b", "meta-llama-3.1-8b": "llama-3.1-8b"}


@lru_cache(maxsize=64)
def _config_file(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read the model config {path}: {exc}.") from exc


def model_shape(name: str | None, table: Mapping | None = None) -> ModelShape | str:
    """The shape of model ``name``, or a sentence saying why it is unknown."""
    if not name or (isinstance(name, float) and math.isnan(name)):
        return "model not stated"
    table = user_table() if table is None else table
    own = (table.get("models") or {}).get(name)
    if own:
        return _shape_or_why(_config_file(str(Path(own["config"]).expanduser())), name)
    key = _SAME_SHAPE.get(_key(name), _key(name))
    known = {_key(shape): config for shape, config in shapes.SHAPES.items()}
    if key in known:
        return _shape_or_why(known[key], name)
    local = settings.models_dir() / str(name).split(":")[-1] / "config.json"
    if local.is_file():
        return _shape_or_why(_config_file(str(local)), name)
    return f"no config known for {name} (add it to $SPECSCOPE_HOME/limits.toml)"


def _shape_or_why(config: Mapping, name: str) -> ModelShape | str:
    try:
        return shape_from_config(config, name)
    except ConfigError as exc:
        return str(exc)


def hardware_of(label: str | None, table: Mapping | None = None) -> tuple[int, Hardware, str] | str:
    """(count, hardware, note) of a label such as ``2xH200`` or ``1xH100-80GB``, or why it is unknown."""
    if not label or not isinstance(label, str):
        return "hardware not stated"
    table = user_table() if table is None else table
    own = table.get("hardware") or {}
    match = re.match(r"^(\d+)\s*x\s*(.+)$", label.strip(), re.I)
    count, name = (int(match.group(1)), match.group(2)) if match else (1, label.strip())
    for given in (label, name):
        if given in own:
            row = own[given]
            found = Hardware(
                given, float(row["bandwidth_gb_s"]), row.get("bf16_tflops"), row.get("source", "limits.toml")
            )
            return count if given == name else 1, found, ""
    plain = re.sub(r"[\s_]", "", name.upper()).removeprefix("NVIDIA")
    for pattern, row, note in _LABELS:
        if re.match(pattern, plain):
            return count, HARDWARE[row], note
    return f"no bandwidth known for {label} (add it to $SPECSCOPE_HOME/limits.toml)"


@dataclass(frozen=True)
class Ceiling:
    """The fastest a cell can run: its step, throughput and TPOT, and which resource binds."""

    step_ms: float
    tokens_per_s: float
    tpot_ms: float
    bound: str  # memory | compute
    strict_tokens_per_s: float  # without the untied input-embedding table: what nothing can pass


def ceiling(
    shape: ModelShape, hardware: Hardware, count: int = 1, concurrency: int = 1, k: int = 0, context: float = 0.0
) -> Ceiling:
    """The ceiling of ``concurrency`` sequences of ``context`` tokens each, verifying K drafts a step."""
    tokens = concurrency * (k + 1)
    bandwidth = hardware.bandwidth_gb_s * 1e9 * count
    flops = (hardware.bf16_tflops or math.inf) * 1e12 * count
    kv = concurrency * context * shape.kv_bytes_per_token

    def step_s(params: int) -> tuple[float, str]:
        memory, compute = (params * shape.dtype_bytes + kv) / bandwidth, tokens * 2 * params / flops
        return max(memory, compute), "compute" if compute > memory else "memory"

    step, bound = step_s(shape.params)
    strict, _ = step_s(shape.params - shape.embedding_params)
    return Ceiling(step * 1e3, tokens / step, step * 1e3 / (k + 1), bound, tokens / strict)


@dataclass(frozen=True)
class Limit:
    """A cell's ceiling with what it assumed, or ``why`` there is none."""

    ceiling: Ceiling | None
    why: str = ""  # no ceiling: the reason; with one: the assumptions worth saying (a variant taken)


def _context(row: Mapping) -> float:
    """Mean tokens in context over the decode: the mean prompt plus half the output (0 if unknown)."""
    prompt = _number(row.get("total_input_tokens")) / max(_number(row.get("completed")), 1)
    output = _number(row.get("output_len")) or (
        _number(row.get("total_output_tokens")) / max(_number(row.get("completed")), 1)
    )
    return prompt + output / 2


def _number(value) -> float:
    return 0.0 if value is None or pd.isna(value) else float(value)


def limit_of(row: Mapping, table: Mapping | None = None) -> Limit:
    """The ceiling of a result row (model, hardware, concurrency, method, K, prompt and output sizes)."""
    table = user_table() if table is None else table
    shape, hardware = model_shape(row.get("model"), table), hardware_of(row.get("hardware"), table)
    speculative = row.get("method") not in (None, BASELINE_METHOD)
    if isinstance(shape, str):
        return Limit(None, shape)
    if isinstance(hardware, str):
        return Limit(None, hardware)
    concurrency, k = row.get("concurrency"), row.get("k")
    if concurrency is None or pd.isna(concurrency):
        return Limit(None, "concurrency not stated")
    if not speculative:
        k = 0
    elif k is None or pd.isna(k):
        return Limit(None, "K not stated")
    count, device, note = hardware
    found = ceiling(shape, device, count, int(concurrency), int(k), _context(row))
    return Limit(found, note)


CEILING_COLUMNS = (
    "ceiling_tok_s",
    "ceiling_strict_tok_s",
    "ceiling_tpot_ms",
    "ceiling_bound",
    "ceiling_share",
    "ceiling_note",
    "k_ceiling",
)


def with_ceilings(frame: pd.DataFrame, table: Mapping | None = None) -> pd.DataFrame:
    """``frame`` (result rows) with each row's ceiling: ``ceiling_tok_s``, ``ceiling_tpot_ms``, ``ceiling_bound``,
    ``ceiling_share`` (measured throughput / ceiling), ``ceiling_note`` (why none, or what was assumed) and
    ``k_ceiling`` (K + 1: no speedup or acceptance length can pass it; null for the baseline)."""
    table = user_table() if table is None else table
    limits = [limit_of(row, table) for row in frame.to_dict("records")]
    found = [lim.ceiling for lim in limits]
    out = frame.assign(
        ceiling_tok_s=[c.tokens_per_s if c else None for c in found],
        ceiling_strict_tok_s=[c.strict_tokens_per_s if c else None for c in found],
        ceiling_tpot_ms=[c.tpot_ms if c else None for c in found],
        ceiling_bound=[c.bound if c else None for c in found],
        ceiling_note=[lim.why for lim in limits],
    )
    out["ceiling_tok_s"] = out["ceiling_tok_s"].astype(float)
    out["ceiling_share"] = out["output_throughput"].astype(float) / out["ceiling_tok_s"]
    k = out["k"].astype(float) if "k" in out else pd.Series(math.nan, index=out.index)
    out["k_ceiling"] = (k + 1).where(out["method"] != BASELINE_METHOD)
    return out


def above(row: Mapping, table: Mapping | None = None) -> list[str]:
    """What of a result row passes its ceiling, one phrase each: throughput above the strict roofline,
    mean TPOT below its floor, acceptance length above K + 1. Empty when nothing does or nothing is known."""
    out = []
    k, al = row.get("k"), row.get("acceptance_length")
    if row.get("method") not in (None, BASELINE_METHOD) and _number(k) and _number(al) > _number(k) + 1 + 1e-9:
        out.append(f"acceptance length {_number(al):.2f} > K+1 = {int(_number(k)) + 1}")
    found = limit_of(row, table).ceiling
    if found is None:
        return out
    throughput, tpot = _number(row.get("output_throughput")), _number(row.get("mean_tpot_ms"))
    if throughput > found.strict_tokens_per_s:
        out.append(f"{throughput:.0f} tok/s > roofline {found.tokens_per_s:.0f} tok/s")
    if tpot and tpot < found.tpot_ms * found.tokens_per_s / found.strict_tokens_per_s:
        out.append(f"mean TPOT {tpot:.2f} ms < floor {found.tpot_ms:.2f} ms")
    return out
