"""One family's deploy answer as it is kept and read: the K at each concurrency, the schedule's ranges, the fixed
K, and what they say in sentences and as JSON (``deploy.answer`` computes it); ``beats``: why one K beats another
over the concurrencies, in words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specscope import ties
from specscope.advice.k_choice import Choice, pooled_tie
from specscope.analysis import verdict
from specscope.engine.k_schedule import KSchedule

__all__ = ["Range", "Answer", "beats"]


@dataclass(frozen=True)
class Range:
    """Batch sizes ``start``..``end`` draft ``k``; ``source``: how that K was found, in words."""

    start: int
    end: int
    k: int
    source: str

    def text(self) -> str:
        """``1-4`` or ``8``."""
        return f"{self.start}-{self.end}" if self.end != self.start else str(self.start)


@dataclass(frozen=True)
class Answer:
    """One family's answer: the K at each concurrency, the schedule those make, the fixed K, which to
    deploy and why, and the speculative_config."""

    keys: dict
    choices: tuple[Choice, ...]  # at each concurrency asked for
    k_schedule: KSchedule  # the choice at every batch size 1..max_batch
    ranges: tuple[Range, ...]  # the schedule's ranges with where each K comes from
    fixed_k: int  # the best single K over the concurrencies (0: none pays)
    fixed: tuple[float, ...]  # its figure at each concurrency (measured where it was)
    use_schedule: bool
    why: str  # schedule or fixed K, in a sentence
    config: dict | None  # the speculative_config to deploy; None: run without speculation
    margin: float  # the fit's error: what "beyond noise" means for predictions
    acceptance: str  # where AL(K) comes from
    drafting_zero: str  # what a K=0 range was taken to cost
    note: str  # what the schedule rests on past the measured concurrencies
    measured_schedule: verdict.Verdict | None = None
    left_out: str = ""  # higher figures a distorting check kept out, and why

    @property
    def method(self) -> str:
        """The family's method."""
        return str(self.keys.get("method"))

    @property
    def extrapolated(self) -> bool:
        """Whether some batch size's K lies outside the measured concurrencies."""
        return any("extrapolated" in r.source for r in self.ranges)

    @property
    def deploy(self) -> str:
        """``K=2``, ``schedule 1-4:5,5-256:3`` or ``no speculation``."""
        if self.use_schedule:
            return f"schedule {self.k_schedule.text()}"
        return f"K={self.fixed_k}" if self.fixed_k else "no speculation"

    def at(self, concurrency: float) -> Choice | None:
        """The choice at one of the answer's concurrencies."""
        return next((c for c in self.choices if c.concurrency == concurrency), None)

    def sentence(self) -> str:
        """The answer in one or two sentences, with the deployed configuration's figure at each concurrency
        and where it comes from; "Deploy" only where it beats the baseline beyond noise (``ties``)."""
        figures = "; ".join(
            f"{c.concurrency:g}: {_figure(c, None if self.use_schedule else self.fixed_k)}" for c in self.choices
        )
        name = f"the K schedule {self.k_schedule.text()}" if self.use_schedule else f"K = {self.fixed_k}"
        faster = self.against_baseline()[ties.FASTER]
        head = (
            "Do not deploy speculative decoding here"
            if not self.config
            else f"Deploy {self.method} with {name}"
            if self.gain == "everywhere"
            else f"Deploy {self.method} with {name} for loads like concurrency {_concs(faster)}, where it beats the "
            "baseline beyond noise"
            if self.gain == "somewhere"
            else f"Nothing measured shows a gain from {self.method} with {name}"
            if self.gain == "nowhere"
            else f"Single runs suggest {self.method} with {name}, but no interval tells it from the baseline: "
            "measure it with repeats before deploying it"
        )
        return f"{head} (by concurrency, {figures}).{self._against_baseline()} {self.why}{self.left_out}"

    def against_baseline(self) -> dict[str, list[Choice]]:
        """The concurrencies where the deployed configuration was measured, by how its figure reads against the
        baseline under the one rule (``ties.outcome``): FASTER, SLOWER, TIE and NO_INTERVAL."""
        found: dict[str, list[Choice]] = {ties.FASTER: [], ties.SLOWER: [], ties.TIE: [], ties.NO_INTERVAL: []}
        for c in self.choices:
            m = c.measured_by.get(self.k_at(c.concurrency))
            if m is not None and self.config:
                found[m.against_baseline()].append(c)
        return found

    @property
    def gain(self) -> str:
        """``everywhere``: the deployed configuration beats the baseline beyond noise at every concurrency it was
        measured at; ``somewhere``; ``nowhere`` (ties or loses wherever measured); ``unmeasured`` (no figure with
        an interval: single runs, or predicted only)."""
        found = self.against_baseline()
        measured = sum(len(v) for k, v in found.items() if k != ties.NO_INTERVAL)
        if not measured:
            return "unmeasured"
        return "everywhere" if len(found[ties.FASTER]) == measured else "somewhere" if found[ties.FASTER] else "nowhere"

    def _against_baseline(self) -> str:
        """`` K = 4 ties the baseline within noise at concurrency 1, 4 (about 6 repeats would tell) ...``:
        where the deployed configuration does not beat the baseline beyond noise ('' where it does everywhere)."""
        found = self.against_baseline()
        name = f"The schedule {self.k_schedule.text()}" if self.use_schedule else f"K = {self.fixed_k}"
        said = []
        if found[ties.TIE]:
            tell = ties.telling(
                [m.repeats_to_tell() for c in found[ties.TIE] if (m := c.measured_by.get(self.k_at(c.concurrency)))]
            )
            said.append(
                f"ties the baseline within noise at concurrency {_concs(found[ties.TIE])}"
                + (f" ({tell})" if tell else "")
            )
        if found[ties.SLOWER]:
            said.append(f"is slower than the baseline beyond noise at concurrency {_concs(found[ties.SLOWER])}")
        if found[ties.NO_INTERVAL]:
            said.append(f"was measured once at concurrency {_concs(found[ties.NO_INTERVAL])} (no interval)")
        return f" {name} {'; it '.join(said)}." if said else ""

    def k_at(self, concurrency: float) -> int:
        """The K the deployed configuration drafts at a concurrency (as its batch size); 0: none."""
        return self.k_schedule.k_at(max(1, int(concurrency))) if self.use_schedule else self.fixed_k

    def deployed(self, choice: Choice) -> dict:
        """The deployed K's figure at one of the answer's concurrencies: ``k``, ``speedup``, ``speedup_lo``,
        ``speedup_hi`` (the interval where that K was measured there), ``source`` (measured, predicted,
        extrapolated, or no speculation) and ``why`` in a sentence."""
        k = self.k_at(choice.concurrency)
        measured = choice.measured_by.get(k)
        source = (
            "measured"
            if measured
            else "no speculation"
            if not k
            else "predicted"
            if choice.source == "measured"
            else choice.source
        )
        return {
            "k": k,
            "source": source,
            "speedup": measured.speedup if measured else choice.by_k.get(k, 1.0) if k else 1.0,
            "speedup_lo": measured.lo if measured else None,
            "speedup_hi": measured.hi if measured else None,
            "why": f"this concurrency {alone}" if (alone := self.alone(choice.concurrency)) else choice.sentence(),
        }

    def here(self, concurrency: float) -> str | None:
        """At one of the answer's concurrencies where the deployed fixed K is not the K that concurrency alone
        would pick: what the deployed K reads there, then that pick and why the fixed K stands (None where
        they agree, or the answer is a schedule: the concurrency's own answer then says it all)."""
        alone = self.alone(concurrency)
        choice = self.at(concurrency)
        if alone is None or choice is None:
            return None
        return f"deploy K = {self.fixed_k} here too ({_figure(choice, self.fixed_k)}). This concurrency {alone}"

    def alone(self, concurrency: float) -> str | None:
        """``alone would pick K = 2 (...), ...``: the K one concurrency alone would pick where the deployed fixed
        K differs, and why the fixed K stands over all of them (None where they agree)."""
        choice = self.at(concurrency)
        if choice is None or self.use_schedule or not self.fixed_k or choice.k == self.fixed_k:
            return None
        pick = f"K = {choice.k} ({_figure_value(choice, choice.k)})" if choice.k else "no speculation"
        if choice.faster(choice.k, self.fixed_k, self.margin):
            return f"alone would pick {pick}: {self.why}"
        return f"alone would pick {pick}, tied with K = {self.fixed_k} within noise; {self._over_all(choice.k)}."

    def _over_all(self, k: int) -> str:
        """Why the fixed K stands against ``k``, a K tied with it at some concurrency, over all of them."""
        why = None
        if k and all(self.fixed_k in c.measured_by and k in c.measured_by for c in self.choices):
            why = beats(self.choices, self.fixed_k, k, self.margin)
        return why or "one K for every load is the simpler server"

    def schedule_sentence(self) -> str:
        """What the K-by-batch-size view deploys, in a sentence: the schedule, or the fixed K beside the
        schedule the choices would make, or no speculation."""
        text, last = self.k_schedule.text(), self.ranges[-1].end if self.ranges else 1
        if self.use_schedule:
            return f"Deploy the K schedule {text} (batch sizes 1-{last})."
        if self.fixed_k:
            return (
                f"Deploy the fixed K = {self.fixed_k} at every batch size: the best K does not move with load "
                f"beyond noise. Following each batch size's own best K would read {text} (the ranges "
                "below), a schedule not worth a server of its own."
            )
        return "Speculation pays at no batch size: run the server without it."

    def as_dict(self) -> dict:
        """The answer as JSON-ready values (``specscope advise --json``)."""
        return {
            "family": self.keys,
            "deploy": self.deploy,
            "speculative_config": self.config,
            "sentence": self.sentence(),
            "why": self.why,
            "fixed_k": self.fixed_k,
            "gain": self.gain,
            "schedule": self.k_schedule.text(),
            "use_schedule": self.use_schedule,
            "concurrencies": [
                {
                    "concurrency": c.concurrency,
                    "k": c.k,
                    "source": c.source,
                    "speedup": round(c.speedup, 4),
                    "predicted": round(c.predicted, 4),
                    "measured": None if c.measured is None else round(c.measured.speedup, 4),
                    "measured_lo": None if c.measured is None else c.measured.lo,
                    "measured_hi": None if c.measured is None else c.measured.hi,
                    "fastest_measured_k": c.fastest,
                    "tied_ks": list(c.tied),
                    "fixed_k_speedup": round(f, 4),
                    "why": c.sentence(),
                }
                for c, f in zip(self.choices, self.fixed)
            ],
            "ranges": [{"batch sizes": r.text(), "K": r.k, "source": r.source} for r in self.ranges],
            "margin": round(self.margin, 4),
            "acceptance": self.acceptance,
            "drafting_zero": self.drafting_zero,
            "extrapolated": self.extrapolated,
            "note": self.note,
            "measured_schedule": None if self.measured_schedule is None else self.measured_schedule.sentence(),
            "left_out": self.left_out.strip(),
        }


def _concs(choices: Sequence[Choice]) -> str:
    """``1, 4``: the concurrencies of ``choices``."""
    return ", ".join(f"{c.concurrency:g}" for c in choices)


def _figure(choice: Choice, k: int | None = None) -> str:
    """K's figure at the choice's concurrency (the choice's own K when ``k`` is None), e.g. ``K=4 1.587×
    [1.175, 2.016] measured``."""
    k = choice.k if k is None else k
    return f"K={k} {_figure_value(choice, k)}" if k else "no speculation"


def _figure_value(choice: Choice, k: int) -> str:
    """``_figure`` without the K: ``1.587× [1.175, 2.016] measured`` or ``1.210× predicted``."""
    measured = choice.measured_by.get(k)
    if measured is not None:
        return measured.text() + " measured"
    return f"{choice.by_k.get(k, choice.predicted):.3f}× " + (
        "predicted" if choice.source == "measured" else choice.source
    )


def beats(choices: Sequence[Choice], a: int, b: int, margin: float) -> str | None:
    """Why K=``a`` beats K=``b`` over the concurrencies (both measured at each of them), in words; None where
    they tie by the one rule pooled over the concurrencies (``k_choice.pooled_tie``, so a gain at every load adds
    up). Single runs have no interval: their points are compared, and the words say so."""
    mine, theirs = [c.measured_by[a] for c in choices], [c.measured_by[b] for c in choices]
    pooled = pooled_tie(mine, theirs)
    if pooled is False:
        means = [sum(m.speedup for m in ms) / len(ms) for ms in (mine, theirs)]
        if means[0] > means[1]:
            return (
                f"over the measured concurrencies together K = {a} is faster beyond noise ({means[0]:.3f}× "
                f"against {means[1]:.3f}× on average, their intervals pooled)"
            )
        return None
    if pooled is None:  # single runs: nothing to pool, the points as measured (said, never called beyond noise)
        means = [sum(m.speedup for m in ms) / len(ms) for ms in (mine, theirs)]
        if means[0] > means[1]:
            return (
                f"K = {a} measured more on average ({means[0]:.3f}× against {means[1]:.3f}×; single runs, "
                "so points compared, no interval)"
            )
    return None
