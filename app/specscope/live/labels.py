"""A labelled stream: its tokens, the engine steps they came in, and where the labels came from (``Provenance``);
the kinds a token can be: an ``accepted`` draft, a step's ``bonus`` or ``correction``, or a plain ``target``
token. Pure values: ``steps`` makes them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ACCEPTED", "BONUS", "CORRECTION", "TARGET", "Token", "Step", "Provenance"]

ACCEPTED, BONUS, CORRECTION, TARGET = "accepted", "bonus", "correction", "target"


@dataclass(frozen=True)
class Token:
    """One output token with its text, step and provenance kind."""

    id: int
    text: str
    logprob: float | None
    step: int
    kind: str
    arrival_s: float


@dataclass(frozen=True)
class Step:
    """One engine step: ``output[start:start + size]``.

    ``drafted`` is None when unknown (chunk estimate). ``rejected_ids`` holds the rejected
    draft tokens when the ngram rebuild knows them. ``truncated``: the output ended inside
    the step (max_tokens or a stop), so it has no target token.
    """

    index: int
    start: int
    size: int
    drafted: int | None
    accepted: int
    arrival_s: float
    rejected_ids: tuple[int, ...] = ()
    truncated: bool = False

    @property
    def rejected(self) -> int | None:
        """How many drafted tokens the target rejected (None when unknown)."""
        return None if self.drafted is None else self.drafted - self.accepted


@dataclass
class Provenance:
    """Steps and per-token labels of one stream, with where the labels came from."""

    steps: list[Step]
    tokens: list[Token]
    source: str
    estimated: bool
    notes: list[str] = field(default_factory=list)
    server_accepted: list[int] | None = None
    server_drafted: list[int] | None = None
    ambiguous: int = 0  # places where a step that drafted nothing could go more than one way
