"""How a sweep's cells are planned: round by round, every server's cells, and a spec resolved once
(its prompt set loaded and hashed, its run id and cells) into the ``SweepPlan`` handed down."""

from __future__ import annotations

from dataclasses import dataclass

from specscope.client import prompts
from specscope.errors import ConfigError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.spec import Cell, SweepSpec, method_ks, schedule_k

__all__ = ["SweepPlan", "resolve", "as_plan", "plan_cells", "typical_chars"]


@dataclass(frozen=True)
class SweepPlan:
    """A spec resolved once: its prompt set (loaded and hashed), run id and cells in run order."""

    spec: SweepSpec
    prompt_set: prompts.PromptSet
    run_id: str
    cells: tuple[Cell, ...]


def resolve(spec: SweepSpec, prompt_set: prompts.PromptSet | None = None) -> SweepPlan:
    """The plan of ``spec`` (its prompt set loaded unless given); ConfigError when a constrained sweep's
    set carries no response format."""
    prompt_set = prompt_set if prompt_set is not None else prompts.load(spec.prompts)
    if spec.structured != "free" and not prompt_set.has_formats:
        raise ConfigError(f"No prompt of {prompt_set.name} carries a response_format, so nothing can be "
                          "constrained; add formats to the set or run it free.")
    return SweepPlan(spec, prompt_set, spec.resolved_run_id(prompt_set.sha256), tuple(plan_cells(spec)))


def as_plan(spec: SweepSpec | SweepPlan) -> SweepPlan:
    """A plan as it is, a spec resolved."""
    return spec if isinstance(spec, SweepPlan) else resolve(spec)


def plan_cells(spec: SweepSpec) -> list[Cell]:
    """Cells in run order, round by round: per repeat, every server's cells (the baseline at K=0,
    then each method per K, concurrency innermost), a K schedule's cells last."""
    repeats: list[int | None] = list(range(1, spec.repeats + 1)) if spec.repeats > 1 else [None]
    concurrencies = tuple(dict.fromkeys(spec.concurrencies))
    groups = [(method, k) for _, method, k in spec.servers] if spec.servers else method_ks(spec)
    scheduled = list(dict.fromkeys(m for m, _ in groups if m != BASELINE_METHOD)) if spec.k_schedule else []
    kinds = {"free": (False,), "constrained": (True,), "both": (False, True)}[spec.structured]
    cells: list[Cell] = []
    for r in repeats:
        for v in spec.vllm or (None,):  # one vLLM's servers after the other's, round by round
            cells += [Cell(method, k, c, r, constrained=f, vllm=v)
                      for method, k in groups for c in concurrencies for f in kinds]
            # after the fixed K, so `auto` can be advised from them
            cells += [Cell(m, schedule_k(spec.k_schedule or ""), c, r, spec.k_schedule, constrained=f, vllm=v)
                      for m in scheduled for c in concurrencies for f in kinds]
    return cells


def typical_chars(prompt_set: prompts.PromptSet) -> int:
    """The median prompt length of a set in characters: the prompt shape a warm-up sends."""
    lengths = sorted(len(p.text) for p in prompt_set.prompts) or [0]
    return lengths[len(lengths) // 2]
