"""The speculative-decoding methods SpecScope knows, one pydantic model each, registered under its ``kind``.

Every method is registered under its ``kind`` (the vLLM ``method`` name, or ``none`` for the baseline). Its
fields are exactly the ``speculative_config`` keys it accepts, so unknown keys are refused; ``k`` stands for
``num_speculative_tokens`` and is range-checked per method. Class attributes say what the method needs (a
draft model, a trained head, a package, a GPU: ``needs_on`` and ``package_on`` for one vLLM version) and which
vLLM versions accept it (from ``specscope.engine.version_facts``). ``specscope.engine.catalog`` builds and
checks a speculative_config from them.

This is the one door for a method: every trait another module acts on is a class attribute here (``speculates``,
``drafts_by``, ``drafts_from_answers``, ``one_token_per_pass``, ``forward_timed``, ``verify_probe``,
``rebuilt_live``), and the tuples below (``MATCH_DRAFTERS``, ``ANSWER_DRAFTERS``, ...) are read from them; no
other module names a method to decide what to do with it (``tests/unit/engine/test_method_registry.py`` fails when one
does, or when a registered method is not wired).

    Ngram(k=4, prompt_lookup_max=4).speculative_config()
    -> {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specscope.engine.version_facts import NATIVE_SUFFIX, method_fact, version_tuple
from specscope.schema import BASELINE_METHOD

__all__ = [
    "MethodSpec",
    "METHODS",
    "MATCH_DRAFTERS",
    "HEADS",
    "MODEL_DRAFTERS",
    "ANSWER_DRAFTERS",
    "ONE_TOKEN_DRAFTERS",
    "FORWARD_TIMED",
    "PROBES",
    "LIVE_REBUILT",
]


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
    needs_before: ClassVar[str | None] = None  # the first vLLM that no longer needs ``needs`` nor ``package``
    model_required: ClassVar[bool] = False
    # how it drafts: "match" (no model pass; drafts where the context matches), "model" (a draft model that can be
    # served alone) or "head" (a head on the target's hidden states, never served alone)
    drafts_by: ClassVar[str | None] = None
    speculates: ClassVar[bool] = True  # False for the baseline: no --speculative-config, nothing drafted
    drafts_from_answers: ClassVar[bool] = False  # drafts from answers its server produced before (a cache)
    # drafts one token per model pass: vLLM's V2 runner before 0.32.0 sizes its CUDA graphs wrongly under a K
    # schedule (vLLM issue #48494; engine.k_schedule.runner_env)
    one_token_per_pass: ClassVar[bool] = False
    forward_timed: ClassVar[bool] = False  # vllm bench forward times its drafter (forward/speculator.py:16-21)
    verify_probe: ClassVar[bool] = False  # near-free drafter: its step is the verify cost (analysis.anatomy)
    rebuilt_live: ClassVar[bool] = False  # Live rebuilds its drafts exactly from the token ids (live.ngram)

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

    @classmethod
    def _outgrown(cls, vllm_version: str | None) -> bool:
        return bool(
            vllm_version and cls.needs_before and version_tuple(vllm_version) >= version_tuple(cls.needs_before)
        )

    @classmethod
    def needs_on(cls, vllm_version: str | None) -> str:
        """What the method needs on vLLM ``vllm_version`` (None: on the oldest that SpecScope read)."""
        return "" if cls._outgrown(vllm_version) else cls.needs

    @classmethod
    def package_on(cls, vllm_version: str | None) -> str | None:
        """The import name the method needs beside vLLM ``vllm_version`` (None: nothing)."""
        return None if cls._outgrown(vllm_version) else cls.package

    @property
    def num_speculative_tokens(self) -> int | None:
        """K as the server gets it: the given K, else the method's default."""
        return self.default_k if self.k is None else self.k

    def speculative_config(self) -> dict:
        """The ``--speculative-config`` dict (empty for the baseline)."""
        if not self.speculates:
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
    kind = BASELINE_METHOD
    speculates = False
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
        keys = [
            k for k in ("fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k") if getattr(self, k) is not None
        ]
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
                raise ValueError(
                    "synthetic_acceptance_rates / synthetic_acceptance_length are only valid "
                    "with rejection_sample_method 'synthetic'"
                )
            return self
        if (rates is None) == (length is None):
            raise ValueError(
                "rejection_sample_method 'synthetic' needs exactly one of "
                "synthetic_acceptance_rates or synthetic_acceptance_length"
            )
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
    draft_decode_context_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    disable_padded_drafter_batch: bool | None = None
    draft_sample_method: Literal["greedy", "probabilistic"] | None = None

    @model_validator(mode="after")
    def _check_model(self) -> _DraftModelFields:
        if self.model_required and not self.model:
            raise ValueError(f"method '{self.kind}' needs {self.needs}; set its 'model'")
        return self


class _ParallelDrafting(_DraftModelFields):
    """Draft-model and EAGLE methods: a drafter trained for it proposes all K tokens in one pass (until 0.34.0)."""

    parallel_drafting: bool | None = None


class _TargetHead(_DraftModelFields):
    """Heads on the target's hidden states that share its lm_head (EAGLE, EAGLE-3, MTP)."""

    draft_lm_head_quantization: Literal["fp8", "nvfp4"] | None = None
    disable_lookahead_block_hashes: bool | None = None


@_register
class Ngram(_Speculative):
    kind = "ngram"
    drafts_by = "match"
    verify_probe = True
    rebuilt_live = True
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
    rebuilt_live = False  # Live's rebuild was read against vLLM's ngram proposer only
    since = method_fact("ngram_gpu", "since")


@_register
class Suffix(_Speculative):
    kind = "suffix"
    drafts_by = "match"
    drafts_from_answers = True
    summary = "Suffix decoding: a suffix tree over the prompt and past outputs proposes a token tree."
    needs = "the arctic-inference package"
    package = "arctic_inference"
    needs_before = NATIVE_SUFFIX  # 0.34.0 drafts it on the GPU itself
    default_k = 24
    k_range = (1, 64)
    suffix_decoding_max_tree_depth: int | None = Field(default=None, ge=1)
    suffix_decoding_max_cached_requests: int | None = Field(default=None, ge=0)
    suffix_decoding_max_spec_factor: float | None = Field(default=None, gt=0)
    suffix_decoding_min_token_prob: float | None = Field(default=None, ge=0, le=1)
    suffix_decoding_corpus_tokens: int | None = Field(default=None, ge=0, lt=1 << 31)


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
class Eagle(_ParallelDrafting, _TargetHead):
    kind = "eagle"
    drafts_by = "head"
    one_token_per_pass = True
    forward_timed = True
    summary = "EAGLE: a one-layer head on the target's hidden states drafts the tokens."
    needs = "a trained EAGLE head for the target"
    model_required = True


@_register
class Eagle3(Eagle):
    kind = "eagle3"
    summary = "EAGLE-3: the head reads low, middle and high target layers."
    needs = "a trained EAGLE-3 head for the target"


@_register
class Mtp(_TargetHead):
    kind = "mtp"
    drafts_by = "head"
    one_token_per_pass = True
    forward_timed = True
    summary = "Multi-token prediction layers shipped with the target (DeepSeek, Qwen3-Next, GLM, ...)."
    needs = "a target with MTP weights"
    default_k = 1
    k_range = (1, 8)


@_register
class DFlash(_DraftModelFields):
    kind = "dflash"
    drafts_by = "head"
    forward_timed = True
    summary = "DFlash: a block-diffusion drafter proposes a block of tokens in parallel."
    needs = "a trained DFlash drafter for the target"
    default_k = 8
    model_required = True
    since = method_fact("dflash", "since")
    xpress_topc: int | None = Field(default=None, ge=0)


@_register
class DSpark(_DraftModelFields):
    kind = "dspark"
    drafts_by = "head"
    forward_timed = True
    summary = (
        "DSpark: a DFlash-style parallel drafter plus a light sequential head; drafts a block and "
        "sends the confident prefix to the target."
    )
    needs = "a trained DSpark drafter for the target"
    default_k = None  # unset: vLLM uses the drafter's block size
    k_optional = True
    model_required = True
    since = method_fact("dspark", "since")
    dspark_draft_topk: int | None = Field(default=None, ge=1)
    enable_adaptive_verification: bool | None = None


@_register
class Medusa(_DraftModelFields):
    kind = "medusa"
    summary = "Medusa: extra decoding heads on the target each guess one future position."
    needs = "trained Medusa heads for the target"
    removed_in = method_fact("medusa", "removed_in")
    model_required = True


@_register
class MlpSpeculator(_DraftModelFields):
    kind = "mlp_speculator"
    summary = "MLP speculator: small MLP stages conditioned on the target's hidden state."
    needs = "a trained MLP speculator for the target"
    removed_in = method_fact("mlp_speculator", "removed_in")
    model_required = True


def _drafting(*ways: str) -> tuple[str, ...]:
    return tuple(kind for kind, cls in METHODS.items() if cls.drafts_by in ways)


def _with(trait: str) -> tuple[str, ...]:
    return tuple(kind for kind, cls in METHODS.items() if getattr(cls, trait))


MATCH_DRAFTERS = _drafting("match")  # no model pass: drafts only where the context matches
HEADS = _drafting("head")  # drafters that cannot be served alone
MODEL_DRAFTERS = _drafting("model", "head")  # a drafting model whose sampling draft_sample_method sets
ANSWER_DRAFTERS = _with("drafts_from_answers")  # a rerun on the same server reads its cache (suffix)
ONE_TOKEN_DRAFTERS = _with("one_token_per_pass")
FORWARD_TIMED = _with("forward_timed")
PROBES = _with("verify_probe")  # registry order: the first is the default probe
LIVE_REBUILT = _with("rebuilt_live")
