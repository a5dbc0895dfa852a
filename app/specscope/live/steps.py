"""Chunks -> engine steps -> the provenance of every token (``labels``). Pure: no I/O.

An engine step drafts some tokens, accepts a prefix of them and adds one token of the
target's own: a *bonus* when every draft was accepted, a *correction* otherwise; a step
that drafted nothing (the prefill, or ngram finding no match) emits a plain *target* token.

Where the labels come from, best first (``Provenance.source``; ``baseline`` for a server
without speculative decoding, where every token is the target's):

- ``server``: the per-request SD metrics of the final usage chunk (``per_step_accepted``,
  ``per_step_drafted``). Steps that drafted nothing are absent from those arrays, so they
  are placed on the chunk boundaries (a chunk always holds whole steps); with ngram the
  rebuild places them exactly and must agree with the server step for step.
- ``ngram``: the exact rebuild of vLLM's ngram proposer (``ngram.py``), which also names
  the rejected tokens. It is the live label for ngram while the stream runs.
- ``chunks``: one chunk = one step, accepted = chunk size - 1. Flagged ``estimated``: the
  API server merges steps into one chunk under load.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from specscope.client.stream import Chunk
from specscope.live.alignment import align_server_steps
from specscope.live.labels import ACCEPTED, BONUS, CORRECTION, TARGET, Provenance, Step, Token
from specscope.live.ngram import NgramConfig, NgramReplay, NgramStep

__all__ = ["StepTracker", "label_steps"]


def _kinds(step: Step) -> list[str]:
    if step.truncated:
        return [ACCEPTED] * step.size
    if not step.drafted:
        return [TARGET] * step.size if step.drafted == 0 else [ACCEPTED] * (step.size - 1) + [TARGET]
    tail = BONUS if step.accepted == step.drafted else CORRECTION
    return [ACCEPTED] * step.accepted + [tail]


def _with_server_count(step: Step, accepted: int) -> Step:
    """A last step cut short: the server accepted more drafts than it could send."""
    extra = accepted - step.accepted
    return Step(
        index=step.index,
        start=step.start,
        size=step.size,
        drafted=step.drafted,
        accepted=accepted,
        arrival_s=step.arrival_s,
        rejected_ids=step.rejected_ids[extra:],
        truncated=True,
    )


class StepTracker:
    """Feed chunks as they arrive; ask for the provenance at any time.

    ``ngram`` (the server's ngram settings) turns on the exact rebuild; the prompt token
    ids come from the first chunk (``return_token_ids``). ``speculative=False`` marks a
    baseline server: every token is the target's own, one per step.
    """

    def __init__(self, ngram: NgramConfig | None = None, speculative: bool = True, hint: str | None = None):
        self.ngram = ngram
        self.speculative = speculative
        self.hint = hint  # how the server's labels could be exact (``PaneSpec.exact_labels_hint``)
        self.ids: list[int] = []
        self.texts: list[str] = []
        self.logprobs: list[float | None] = []
        self.arrivals: list[float] = []
        self.chunk_of: list[int] = []
        self.chunks = 0
        self.prompt_ids: tuple[int, ...] | None = None
        self.spec_decoding: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self._replay: NgramReplay | None = None
        self._replay_broken = False

    def add(self, chunk: Chunk) -> None:
        """Take one more chunk of the stream."""
        if chunk.prompt_token_ids is not None and self.prompt_ids is None:
            self.prompt_ids = chunk.prompt_token_ids
            if self.ngram is not None:
                self._replay = NgramReplay(self.ngram, self.prompt_ids)
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.spec_decoding is not None:
            self.spec_decoding = chunk.spec_decoding
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        if not chunk.token_ids:
            return
        size = len(chunk.token_ids)
        self.ids.extend(chunk.token_ids)
        self.texts.extend(chunk.texts or ("",) * size)
        self.logprobs.extend(chunk.logprobs or (None,) * size)
        self.arrivals.extend([chunk.arrival_s] * size)
        self.chunk_of.extend([self.chunks] * size)
        self.chunks += 1
        if self._replay is not None and not self._replay_broken:
            new = self._replay.feed(chunk.token_ids)
            # a chunk holds whole steps: a rebuilt step crossing its end means wrong settings
            if new and new[-1].start + new[-1].emitted != len(self.ids):
                self._replay_broken = True

    def provenance(self) -> Provenance:
        """The steps and labelled tokens of the chunks added so far."""
        notes: list[str] = []
        ambiguous = 0
        if not self.speculative:
            steps = [
                Step(index=i, start=i, size=1, drafted=0, accepted=0, arrival_s=self.arrivals[i])
                for i in range(len(self.ids))
            ]
            return Provenance(steps=steps, tokens=self._tokens(steps), source="baseline", estimated=False)
        rebuilt = self._rebuilt_steps(notes)
        server = self.spec_decoding or {}
        server_accepted = server.get("per_step_accepted")
        server_drafted = server.get("per_step_drafted")
        if server.get("num_spec_steps") == 0:  # the server leaves out arrays that would be empty
            server_accepted, server_drafted = [], []
        if server_accepted is not None and server_drafted is not None:
            steps, source, ambiguous = self._from_server(server_accepted, server_drafted, rebuilt, notes)
            estimated = source == "chunks" or ambiguous > 0
        elif rebuilt is not None:
            steps, source, estimated = rebuilt, "ngram", False
            if self.spec_decoding is None and self.usage is not None:
                notes.append("The server sent no per-request SD metrics; labels come from the ngram rebuild.")
        else:
            steps, source, estimated = self._from_chunks(), "chunks", True
            if self.usage is not None:
                notes.append(
                    "Labels are estimated from chunk sizes. "
                    + (self.hint or ("A vLLM that reports per-request counts gives exact ones."))
                )
        return Provenance(
            steps=steps,
            tokens=self._tokens(steps),
            source=source,
            estimated=estimated,
            notes=notes,
            server_accepted=server_accepted,
            server_drafted=server_drafted,
            ambiguous=ambiguous,
        )

    def _rebuilt_steps(self, notes: list[str]) -> list[Step] | None:
        if self._replay is None:
            return None
        if self._replay_broken:
            notes.append(
                "The ngram rebuild disagrees with the chunk boundaries: the server's ngram "
                "settings differ from the ones given."
            )
            return None
        return [self._step(i, s) for i, s in enumerate(self._replay.steps)]

    def _step(self, index: int, rebuilt: NgramStep) -> Step:
        return Step(
            index=index,
            start=rebuilt.start,
            size=rebuilt.emitted,
            drafted=len(rebuilt.draft),
            accepted=rebuilt.accepted,
            arrival_s=self.arrivals[rebuilt.start],
            rejected_ids=rebuilt.rejected,
            truncated=rebuilt.truncated,
        )

    def _from_chunks(self) -> list[Step]:
        steps: list[Step] = []
        start = 0
        while start < len(self.ids):
            end = start
            while end < len(self.ids) and self.chunk_of[end] == self.chunk_of[start]:
                end += 1
            steps.append(
                Step(
                    index=len(steps),
                    start=start,
                    size=end - start,
                    drafted=None,
                    accepted=end - start - 1,
                    arrival_s=self.arrivals[start],
                )
            )
            start = end
        return steps

    def _from_server(
        self, accepted: list[int], drafted: list[int], rebuilt: list[Step] | None, notes: list[str]
    ) -> tuple[list[Step], str, int]:
        """Steps from the server's counts, their source, and how many placements were ambiguous."""
        if rebuilt is not None:
            spec = [s for s in rebuilt if s.drafted]
            same = (
                len(spec) == len(accepted)
                and all(s.drafted == d for s, d in zip(spec, drafted))
                and all(s.accepted == a or (s.truncated and s.accepted <= a) for s, a in zip(spec, accepted))
            )
            if same:
                if spec and spec[-1].truncated:
                    rebuilt = rebuilt[:-1] + [_with_server_count(rebuilt[-1], accepted[-1])]
                return rebuilt, "server", 0
            notes.append("The ngram rebuild disagrees with the server's per-step counts; showing the server's.")
        if not self.ids:
            return [], "server", 0
        placed, ambiguous = align_server_steps(self.chunk_of, accepted)
        if ambiguous < 0:
            notes.append("The server's per-step counts do not fit the chunks received; labels are estimated.")
            return self._from_chunks(), "chunks", 0
        steps = [Step(index=0, start=0, size=1, drafted=0, accepted=0, arrival_s=self.arrivals[0])]
        for start, size, j in placed:
            if j < 0:
                steps.append(
                    Step(index=len(steps), start=start, size=1, drafted=0, accepted=0, arrival_s=self.arrivals[start])
                )
            else:
                steps.append(
                    Step(
                        index=len(steps),
                        start=start,
                        size=size,
                        drafted=drafted[j],
                        accepted=accepted[j],
                        arrival_s=self.arrivals[start],
                        truncated=size <= accepted[j],
                    )
                )
        if ambiguous:
            what = "1 step that drafted nothing" if ambiguous == 1 else f"{ambiguous} steps that drafted nothing"
            notes.append(f"{what} could sit in more than one place; the placement is estimated.")
        return steps, "server", ambiguous

    def _tokens(self, steps: list[Step]) -> list[Token]:
        tokens: list[Token] = []
        for step in steps:
            for offset, kind in enumerate(_kinds(step)):
                i = step.start + offset
                tokens.append(
                    Token(
                        id=self.ids[i],
                        text=self.texts[i],
                        logprob=self.logprobs[i],
                        step=step.index,
                        kind=kind,
                        arrival_s=self.arrivals[i],
                    )
                )
        return tokens


def label_steps(chunks: Iterable[Chunk], ngram: NgramConfig | None = None, speculative: bool = True) -> Provenance:
    """The provenance of a finished (or partial) stream."""
    tracker = StepTracker(ngram, speculative)
    for chunk in chunks:
        tracker.add(chunk)
    return tracker.provenance()
