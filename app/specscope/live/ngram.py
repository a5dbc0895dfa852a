"""An exact rebuild of vLLM's ngram proposer, to recover every step's draft from token ids.

vLLM (``vllm/v1/spec_decode/ngram_proposer.py``) drafts from the context = prompt + output so
far: it finds the LONGEST suffix of the context, n in [prompt_lookup_min, prompt_lookup_max],
that occurred earlier, takes its EARLIEST occurrence, and proposes the next
min(K, max_model_len - len(context), tokens available) tokens after it; a longest match
shorter than the minimum proposes nothing. vLLM finds this with KMP over the reversed
context. :class:`NgramProposer` gets the same answer from an index of the earliest start of
every n-gram, kept up to date as tokens arrive, so each step costs O(max - min) instead of
O(len(context)). ``tests/unit/live/test_ngram.py`` checks it against vLLM's own function.

Because ngram drafts are one-hot, a rejected draft token is never re-sampled as the
correction, so at any temperature the accepted count of a step is the longest common prefix
of the draft and the tokens that followed. :func:`rebuild_steps` replays a whole output this
way and so names the rejected tokens themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specscope.engine.catalog import LIVE_REBUILT
from specscope.errors import ConfigError

__all__ = ["NgramConfig", "NgramProposer", "NgramStep", "NgramReplay", "rebuild_steps"]

_DEFAULT_LOOKUP = 5  # vLLM's value when neither prompt_lookup_min nor _max is set


@dataclass(frozen=True)
class NgramConfig:
    """The ngram settings of a server, normalised the way vLLM's SpeculativeConfig does."""

    k: int
    prompt_lookup_min: int
    prompt_lookup_max: int
    max_model_len: int = 2**31 - 1

    @classmethod
    def from_speculative_config(cls, config: dict[str, Any], max_model_len: int | None = None) -> NgramConfig:
        """Build from a ``--speculative-config`` dict (method ngram)."""
        if config.get("method") not in LIVE_REBUILT:
            wanted = " or ".join(repr(kind) for kind in LIVE_REBUILT)
            raise ConfigError(f"The ngram rebuild needs method {wanted}, not {config.get('method')!r}.")
        k = config.get("num_speculative_tokens")
        if not isinstance(k, int) or k < 1:
            raise ConfigError("The ngram speculative config needs num_speculative_tokens >= 1.")
        given_low, given_high = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
        # one given bound stands for both; neither: the default for both
        low = given_low if given_low is not None else given_high if given_high is not None else _DEFAULT_LOOKUP
        high = given_high if given_high is not None else low
        if low < 1 or low > high:
            raise ConfigError(f"prompt_lookup_min={low} must be >= 1 and <= prompt_lookup_max={high}.")
        return cls(k=k, prompt_lookup_min=low, prompt_lookup_max=high, max_model_len=max_model_len or 2**31 - 1)


class NgramProposer:
    """vLLM's ngram proposal for a growing context; ``extend`` then ``propose``."""

    def __init__(self, config: NgramConfig, context: Sequence[int] = ()):
        self.config = config
        self._tokens: list[int] = []
        self._earliest: dict[tuple[int, ...], int] = {}
        self.extend(context)

    def __len__(self) -> int:
        return len(self._tokens)

    def extend(self, token_ids: Sequence[int]) -> None:
        """Append tokens, indexing every n-gram (n in [min, max]) that now ends in them."""
        tokens, earliest = self._tokens, self._earliest
        low, high = self.config.prompt_lookup_min, self.config.prompt_lookup_max
        for token in token_ids:
            tokens.append(int(token))
            end = len(tokens)
            for n in range(low, min(high, end) + 1):
                earliest.setdefault(tuple(tokens[end - n : end]), end - n)

    def propose(self, k: int | None = None) -> list[int]:
        """The draft vLLM proposes for the current context (possibly empty)."""
        cfg = self.config
        tokens = self._tokens
        total = len(tokens)
        k = cfg.k if k is None else k
        k = min(k, cfg.max_model_len - total)
        if total < cfg.prompt_lookup_min or k <= 0:
            return []
        for n in range(min(cfg.prompt_lookup_max, total - 1), cfg.prompt_lookup_min - 1, -1):
            start = self._earliest.get(tuple(tokens[total - n :]))
            if start is not None and start < total - n:
                begin = start + n
                return tokens[begin : begin + min(k, total - begin)]
        return []


@dataclass(frozen=True)
class NgramStep:
    """One engine step as the rebuild sees it.

    ``start`` indexes the output; the step emitted ``output[start:start + emitted]``.
    ``truncated`` marks a last step cut short by max_tokens or a stop, where the server
    may have accepted more drafts than the tokens it sent.
    """

    start: int
    emitted: int
    draft: tuple[int, ...]
    accepted: int
    truncated: bool = False

    @property
    def rejected(self) -> tuple[int, ...]:
        """The drafted tokens the target did not accept."""
        return self.draft[self.accepted :]


class NgramReplay:
    """Replays a stream step by step as output tokens arrive (chunks always end on a step)."""

    def __init__(self, config: NgramConfig, prompt_ids: Sequence[int]):
        self._proposer = NgramProposer(config, prompt_ids)
        self._output: list[int] = []
        self.steps: list[NgramStep] = []

    def feed(self, token_ids: Sequence[int]) -> list[NgramStep]:
        """Add output tokens; return the steps they complete."""
        output = self._output
        output.extend(int(t) for t in token_ids)
        new: list[NgramStep] = []
        last = self.steps[-1] if self.steps else None
        position = last.start + last.emitted if last else 0
        total = len(output)
        if last is None and total:
            new.append(NgramStep(start=0, emitted=1, draft=(), accepted=0))
            self._proposer.extend(output[:1])
            position = 1
        while position < total:
            draft = self._proposer.propose()
            accepted = 0
            while (
                accepted < len(draft) and position + accepted < total and draft[accepted] == output[position + accepted]
            ):
                accepted += 1
            emitted = min(accepted + 1, total - position)
            new.append(
                NgramStep(
                    start=position,
                    emitted=emitted,
                    draft=tuple(draft),
                    accepted=accepted,
                    truncated=emitted == accepted,
                )
            )
            self._proposer.extend(output[position : position + emitted])
            position += emitted
        self.steps.extend(new)
        return new


def rebuild_steps(prompt_ids: Sequence[int], output_ids: Sequence[int], config: NgramConfig) -> list[NgramStep]:
    """Split a whole output into the engine steps vLLM's ngram proposer produced.

    The first step is the prefill (one token, no draft). Each later step drafts from the
    context so far, accepts the longest common prefix of draft and output, and adds the
    target's own token.
    """
    return NgramReplay(config, prompt_ids).feed(output_ids)
