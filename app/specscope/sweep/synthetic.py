"""Drafts accepted synthetically (vLLM's synthetic rejection sampler): how a sweep's speculative servers
accept drafts (``Synthetic``), and the speculative_config keys that set it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specscope.engine.provenance import SYNTHETIC
from specscope.errors import ConfigError

__all__ = ["SYNTHETIC", "Synthetic", "synthetic_length_for", "parse_lengths", "synthetic_config"]


@dataclass(frozen=True)
class Synthetic:
    """How a speculative server accepts drafts: by its target (nothing set), or synthetically (vLLM's
    synthetic rejection sampler) at ``alpha``^i, at a mean acceptance length per K (``lengths``: (K, AL),
    K 0 for every K), or at per-position ``rates`` (an AL(K) curve's, ``priors.Curve.rates``: a server at any
    K takes the first K of them, so a K schedule's smaller K accept at the curve's AL too)."""

    alpha: float | None = None
    lengths: tuple[tuple[int, float], ...] = ()
    rates: tuple[float, ...] = ()

    def __bool__(self) -> bool:
        return self.alpha is not None or bool(self.lengths) or bool(self.rates)

    def keys(self, k: int) -> dict[str, Any] | None:
        """The speculative_config keys of a server drafting up to K; None where the target accepts drafts
        (and for the baseline)."""
        length = synthetic_length_for(self.lengths, k)
        if not k or not (self.alpha is not None or length is not None or self.rates):
            return None
        if self.alpha is not None:
            return synthetic_config(self.alpha, k)
        if self.rates:
            return {
                "rejection_sample_method": SYNTHETIC,
                "synthetic_acceptance_rates": [round(r, 6) for r in (list(self.rates) + [0.0] * k)[:k]],
            }
        return {"rejection_sample_method": SYNTHETIC, "synthetic_acceptance_length": length}


def synthetic_length_for(lengths: tuple[tuple[int, float], ...], k: int) -> float | None:
    """The mean acceptance length set for K (an entry for K, else the one for every K, K 0); None: none set."""
    by_k = dict(lengths)
    return by_k.get(k, by_k.get(0))


def parse_lengths(text: str) -> tuple[tuple[int, float], ...]:
    """``2.8`` (every K) or ``4=2.9,6=3.4`` (per K) -> ((K, length), ...); ConfigError on anything else."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, _, length = part.rpartition("=")
        try:
            pairs.append((int(k) if k else 0, float(length)))
        except ValueError:
            raise ConfigError(
                f"Cannot read the synthetic acceptance length '{part}'; give a mean length such "
                "as 2.8, or one per K such as 4=2.9,6=3.4."
            ) from None
    return tuple(pairs)


def synthetic_config(alpha: float, k: int) -> dict[str, Any]:
    """speculative_config keys that accept draft position i with probability alpha^i (vLLM's
    synthetic rejection sampler): a step's cost measured apart from the drafter's quality."""
    return {
        "rejection_sample_method": SYNTHETIC,
        "synthetic_acceptance_rates": [round(alpha**i, 6) for i in range(1, k + 1)],
    }
