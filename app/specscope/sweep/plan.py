"""How a sweep's cells are planned: round by round, every server's cells, and a spec resolved once
(its prompt set loaded and hashed, its run id and cells) into the ``SweepPlan`` handed down."""

from __future__ import annotations

from dataclasses import dataclass

from specscope import prompts
from specscope.errors import ConfigError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.spec import Cell, SweepSpec, method_ks, requests_of, schedule_k

__all__ = ["SweepPlan", "resolve", "as_plan", "plan_cells", "typical_chars", "describe"]


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
        raise ConfigError(
            f"No prompt of {prompt_set.name} carries a response_format, so nothing can be "
            "constrained; add formats to the set or run it free."
        )
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
            cells += [
                Cell(method, k, c, r, constrained=f, vllm=v)
                for method, k in groups
                for c in concurrencies
                for f in kinds
            ]
            # after the fixed K, so `auto` can be advised from them
            cells += [
                Cell(m, schedule_k(spec.k_schedule or ""), c, r, spec.k_schedule, constrained=f, vllm=v)
                for m in scheduled
                for c in concurrencies
                for f in kinds
            ]
    return cells


def typical_chars(prompt_set: prompts.PromptSet) -> int:
    """The median prompt length of a set in characters: the prompt shape a warm-up sends."""
    lengths = sorted(len(p.text) for p in prompt_set.prompts) or [0]
    return lengths[len(lengths) // 2]


def _listed(values: list[str]) -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} and {values[-1]}"


def _servers(cells: tuple[Cell, ...]) -> str:
    """``none; ngram K=2, 4; ngram schedule 1-2:4,3-8:1``: each method's servers, in plan order."""
    per_method: dict[tuple[str, bool], list[str]] = {}
    for method, k, k_schedule, vllm in dict.fromkeys(cell.group for cell in cells):
        which = "" if method == BASELINE_METHOD and not k_schedule else k_schedule or str(k)
        which += f" on vLLM {vllm}" if vllm else ""
        per_method.setdefault((method, bool(k_schedule)), []).append(which)
    return "; ".join(
        f"{method}" + ("" if not any(ks) else f" schedule {', '.join(ks)}" if scheduled else f" K={', '.join(ks)}")
        for (method, scheduled), ks in per_method.items()
    )


def describe(plan: SweepPlan, finished: int = 0) -> str:
    """What starting ``plan`` runs, in words: cells, servers, concurrency, repeats, requests and output tokens, the
    prompt set; ``finished`` of its cells finished in an earlier start are not measured again."""
    spec, cells = plan.spec, plan.cells
    groups = len({cell.group for cell in cells})
    requests = {requests_of(spec, cell.concurrency) for cell in cells}
    each = (
        f"{requests.pop()} requests a cell"
        if len(requests) == 1 and None not in requests
        else "each prompt once a cell"
        if requests == {None}
        else f"{spec.per_concurrency} requests a cell per concurrency slot"
    )
    repeats = f", each cell {spec.repeats} times (in rounds)" if spec.repeats > 1 else ""
    repeats += {
        "free": "",
        "constrained": ", constrained to the prompts' response formats",
        "both": ", free and constrained to the prompts' response formats",
    }[spec.structured]
    text = (
        f"{len(cells)} cell{'s' if len(cells) != 1 else ''} on {groups} server{'s' if groups != 1 else ''} "
        f"({_servers(cells)}) at concurrency {_listed([str(c) for c in dict.fromkeys(spec.concurrencies)])}"
        f"{repeats}: {each}, {spec.output_len or 'as many as the server gives'} output tokens each, on "
        f"{plan.prompt_set.name} ({len(plan.prompt_set)} prompts)."
    )
    if finished:
        text += f" {finished} of the cells finished in an earlier start of this sweep and are saved; the rest run."
    return text
