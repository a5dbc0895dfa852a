"""What a sweep is: its spec (methods x K x concurrency on a preset or on known servers) and its cells."""

from __future__ import annotations

import hashlib
import json
import math
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specscope import launch, prompts
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.engine import k_schedule
from specscope.errors import ConfigError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.synthetic import Synthetic, synthetic_length_for

__all__ = [
    "STRUCTURED",
    "Cell",
    "SweepSpec",
    "parse_ints",
    "structured_default",
    "method_ks",
    "schedule_k",
    "requests_of",
    "servers_spec",
]

STRUCTURED = ("free", "constrained", "both")


@dataclass(frozen=True)
class Cell:
    """One (method, K, concurrency) point of a sweep; K=0 for the baseline. A schedule cell's
    server drafts K by batch size (``k_schedule``: its text, or ``auto``; K = its maximum)."""

    method: str
    k: int
    concurrency: int
    repeat: int | None = None  # None: the cell is measured once
    k_schedule: str | None = None
    constrained: bool = False  # each prompt sent with its response format
    vllm: str | None = None  # the vLLM its server runs on (a sweep over vLLMs); None: the preset's

    @property
    def group(self) -> tuple[str, int, str | None, str | None]:
        """The server this cell is measured on."""
        return (self.method, self.k, self.k_schedule, self.vllm)

    @property
    def cell_id(self) -> str:
        """The cell's name, e.g. ``ngram-k4-c1`` (``-r2`` for the second repeat, ``-constrained`` with the
        prompts' response formats; a schedule's cells name it, ``ngram-schedule-1-2k4_3-8k2-c1``, so a run can
        hold several)."""
        kind = f"schedule-{self.k_schedule.replace(':', 'k').replace(',', '_')}" if self.k_schedule else f"k{self.k}"
        base = (
            f"{self.method}-{kind}-c{self.concurrency}"
            + ("-constrained" if self.constrained else "")
            + (f"-vllm{_slug(self.vllm)}" if self.vllm else "")
        )
        return base if self.repeat is None else f"{base}-r{self.repeat}"


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep; equal specs on the same prompt file share a run id (and so resume)."""

    preset: str
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    concurrencies: tuple[int, ...]
    prompts: Path
    num_prompts: int | None = None
    output_len: int | None = DEFAULT_OUTPUT_LEN
    request_rate: float = math.inf
    temperature: float = 0.0
    warmups: int = 1
    restart_each_cell: bool = False
    source: str = "specscope"
    label: str | None = None
    hardware: str | None = None
    run_id: str | None = None
    repeats: int = 1
    baseline_alongside: bool = False
    servers: tuple[tuple[str, str, int], ...] = ()  # (name, method, K) of known servers to measure
    k_schedule: str | None = None  # a schedule measured beside the fixed K: its text, or "auto"
    synthetic_acceptance: float | None = None  # drafts accepted at rate alpha^i (a step-cost calibration)
    synthetic_length: tuple[tuple[int, float], ...] = ()  # (K, mean acceptance length); K 0: every K
    synthetic_rates: tuple[float, ...] = ()  # per-position rates (an AL(K) curve's) for every K
    per_concurrency: int | None = None  # a cell sends this many requests per slot (at least num_prompts)
    structured: str = "free"  # free | constrained | both: cells without and/or with the response formats
    vllm: tuple[str, ...] = ()  # the vLLMs to run the preset on, one after the other (versions or Python paths)

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ConfigError("Repeats must be a whole number of at least 1.")
        if self.structured not in STRUCTURED:
            raise ConfigError(f"Structured output must be one of {', '.join(STRUCTURED)}, not {self.structured!r:.40}.")
        if not self.methods and not self.servers:
            raise ConfigError("Give at least one method, e.g. none,ngram.")
        groups = [(method, k) for _, method, k in self.servers]
        if len(set(groups)) < len(groups):
            raise ConfigError("Two of the chosen servers run the same method and K; measure them in separate sweeps.")
        if not self.servers and (
            any(k < 1 for m, k in method_ks(self) if m != BASELINE_METHOD)
            or (not self.ks and any(":" not in m for m in set(self.methods) - {BASELINE_METHOD}))
        ):
            raise ConfigError("K values must be whole numbers of at least 1, e.g. 1,2,4.")
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise ConfigError("Concurrency values must be whole numbers of at least 1, e.g. 1,4,16.")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("The number of prompts per cell must be at least 1.")
        if self.per_concurrency is not None and self.per_concurrency < 1:
            raise ConfigError("The requests per concurrency slot must be at least 1.")
        if self.vllm and self.servers:
            raise ConfigError(
                "Running servers keep the vLLM they started on; name vLLM versions with a preset, "
                "not with running servers."
            )
        if self.output_len is not None and self.output_len < 1:
            raise ConfigError("The output length must be at least 1 token.")
        if self.k_schedule is not None:
            object.__setattr__(self, "k_schedule", _schedule_text(self, self.k_schedule))
        if self.synthetic_acceptance is not None and not 0.0 <= self.synthetic_acceptance <= 1.0:
            raise ConfigError("The synthetic acceptance rate must lie between 0 and 1, e.g. 0.8.")
        if (self.synthetic_acceptance is not None or self.synthetic_length) and self.servers:
            raise ConfigError(
                "Synthetic acceptance is set when a server starts; sweep it with a preset, not with running servers."
            )
        if sum(map(bool, (self.synthetic_acceptance is not None, self.synthetic_length, self.synthetic_rates))) > 1:
            raise ConfigError("Give one synthetic acceptance: a rate, a mean acceptance length, or a curve.")
        if self.synthetic_rates and self.servers:
            raise ConfigError(
                "Synthetic acceptance is set when a server starts; sweep it with a preset, not with running servers."
            )
        rates = self.synthetic_rates
        if any(not 0.0 <= r <= 1.0 for r in rates) or any(b > a for a, b in zip(rates, rates[1:])):
            raise ConfigError(
                "Synthetic per-position acceptance rates must lie in [0, 1] and never rise with the "
                "position (vLLM refuses others)."
            )
        for method, k in method_ks(self) if self.synthetic_length else ():
            length = synthetic_length_for(self.synthetic_length, k)
            if method != BASELINE_METHOD and length is not None and not 1.0 <= length <= k + 1:
                raise ConfigError(
                    f"A synthetic acceptance length at K={k} must lie between 1 and {k + 1} "
                    f"(K drafts plus the target's token), not {length:g}."
                )

    @property
    def synthetic(self) -> Synthetic:
        """How the sweep's speculative servers accept drafts."""
        return Synthetic(self.synthetic_acceptance, self.synthetic_length, self.synthetic_rates)

    def resolved_run_id(self, prompt_sha: str) -> str:
        """The given run id, else one derived from the spec and the prompt set's hash."""
        if self.run_id:
            return self.run_id
        key = {k: v for k, v in asdict(self).items() if k not in ("run_id", "label")}
        for name, default in (
            ("repeats", 1),
            ("baseline_alongside", False),
            ("servers", ()),
            ("k_schedule", None),
            ("synthetic_acceptance", None),
            ("synthetic_length", ()),
            ("per_concurrency", None),
            ("structured", "free"),
            ("vllm", ()),
            ("synthetic_rates", ()),
        ):
            if key[name] == default:
                del key[name]  # sweeps without them keep the run ids they always had
        # the host too: two machines running the same sweep into one shared store never share a run id
        key.update(prompts=prompt_sha, request_rate=str(self.request_rate), host=socket.gethostname())
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"sweep-{_slug(self.preset)}-{digest}"


def _schedule_text(spec: SweepSpec, given: str) -> str:
    """The spec's schedule (``given``) in canonical text (``auto`` stays); ConfigError when it cannot be swept."""
    if spec.servers:
        raise ConfigError("A K schedule starts its own server; sweep it with a preset, not with running servers.")
    if not set(spec.methods) - {BASELINE_METHOD}:
        raise ConfigError("A K schedule needs a speculative method, e.g. --methods none,ngram.")
    text = given.strip()
    return "auto" if text == "auto" else k_schedule.parse(text).text()


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:60]


def parse_ints(text: str) -> tuple[int, ...]:
    """K or concurrency values typed as ``1, 2,4`` -> (1, 2, 4); ConfigError on anything else."""
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ConfigError(f"{text!r} is not a comma-separated list of whole numbers, e.g. 1,2,4.") from None


def structured_default(prompt_set: prompts.PromptSet) -> str:
    """``both`` for a set whose prompts carry response formats, else ``free``."""
    return "both" if prompt_set.has_formats else "free"


def method_ks(spec: SweepSpec) -> list[tuple[str, int]]:
    """The (method, K) server groups of a preset sweep: every method at every K of ``ks``, except a
    method written with its own K values (``suffix:4``, ``ngram:2/4``); the baseline at K=0."""
    groups: list[tuple[str, int]] = []
    for entry in dict.fromkeys(spec.methods):
        method, own, text = entry.partition(":")
        try:
            ks = tuple(int(k) for k in text.split("/")) if own else spec.ks
        except ValueError:
            raise ConfigError(
                f"{entry!r}: write a method's own K values as method:K, e.g. suffix:4 or ngram:2/4."
            ) from None
        groups += [(method, 0)] if method == BASELINE_METHOD else [(method, k) for k in dict.fromkeys(ks)]
    return list(dict.fromkeys(groups))


def schedule_k(text: str) -> int:
    """A schedule server's K (0 for ``auto`` until it is advised)."""
    return 0 if text == "auto" else k_schedule.parse(text).server_k


def requests_of(spec: SweepSpec, concurrency: int) -> int | None:
    """How many requests a cell at ``concurrency`` sends: ``per_concurrency`` per slot (at least
    ``num_prompts``) when set, else ``num_prompts`` (None: every prompt of the set once)."""
    if spec.per_concurrency is None:
        return spec.num_prompts
    return max(spec.num_prompts or 0, spec.per_concurrency * concurrency)


def servers_spec(names: list[str] | tuple[str, ...], **fields: Any) -> SweepSpec:
    """A sweep over concurrency of known servers (by name), each measured at its own method and K."""
    if not names:
        raise ConfigError("Pick at least one server to measure.")
    chosen = tuple(
        (state.name, state.method or BASELINE_METHOD, state.k or 0) for state in (launch.find(name) for name in names)
    )
    fields.setdefault("label", ", ".join(names))
    return SweepSpec(
        preset=fields.pop("preset", "servers"), methods=tuple(m for _, m, _ in chosen), ks=(), servers=chosen, **fields
    )
