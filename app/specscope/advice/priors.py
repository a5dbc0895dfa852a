"""Acceptance length against K, AL(K), as named curves: published priors, or a run's measured acceptance.

A step that drafts K tokens emits AL(K) tokens on average, and AL saturates with K: each position is
accepted less often than the one before. Where a family's own rows do not say how acceptance falls past
the K they measured (or say nothing, as a shape with dummy weights cannot), a curve stands in for it:

- a published curve the user picks by name (``PRIORS``: each cites where its figures come from);
- the per-position rates measured on the user's own run elsewhere (``from_rates``): real acceptance
  measured on a CPU, with the step cost measured on the GPU.

A curve's per-position rates (``Curve.rates``) are what vLLM's synthetic sampler takes
(``synthetic_acceptance_rates``: entry i is P(the first i+1 drafts accepted) = AL(i+1) - AL(i)), so a
what-if sweep accepts drafts at the curve's AL at every K, a K schedule's smaller K included. Published
tables carry measurement noise (an AL that falls from one K to the next); the rates are made
non-increasing and within [0, 1] by pooling adjacent violators, which keeps their sum where it can.

    curve = named("eagle3-kimi-k2.5")
    curve.at(3), curve.rates(4)   # 2.88, [0.83, 0.6, 0.45, 0.36]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specscope.errors import ConfigError

__all__ = ["Curve", "PRIORS", "named", "from_rates", "monotone_rates"]

_INFERENCEX = (
    "InferenceX golden acceptance lengths (SemiAnalysisAI/InferenceX, golden_al_distribution/, commit "
    "843c625, Apache-2.0): SPEED-Bench coding, top_p 0.95, 4096-token outputs, on B300 with vLLM"
)
_RUIZ = (
    "Ruiz (2026), 'Up to 3.55x Faster: Contributing Speculative Decoding with Draft Models to vLLM V1' "
    "(tomasruizt/vllm-scripts results/full-bench-data.parquet, commit d94d714): InstructCoder, "
    "temperature 0, H100, median AL over concurrencies 1-256"
)
_SPECDECODE = (
    "SpecDecode-Bench (Liu et al., arXiv 2601.11580; SpecDecode-Bench/simulator data/llama3.1-8B, commit "
    "2fdccbd): per-request oracle accepted lengths of Llama-3.1-8B-Instruct on H100, replayed as "
    "steps of at most K+1 tokens (tokens per step over every step)"
)


def monotone_rates(increments: Sequence[float]) -> list[float]:
    """Per-position rates from AL increments: clipped to [0, 1] and made non-increasing by pooling
    adjacent violators (a decreasing isotonic fit)."""
    blocks: list[list[float]] = []  # [sum, count]
    for value in (min(1.0, max(0.0, float(v))) for v in increments):
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-1][0] / blocks[-1][1] > blocks[-2][0] / blocks[-2][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return [round(total / count, 6) for total, count in blocks for _ in range(int(count))]


@dataclass(frozen=True)
class Curve:
    """AL at K = 1..len(al) (``al[0]`` is AL(1)), its name and where it comes from. Past its last K it
    stays at its last AL (saturated): say so where that matters."""

    name: str
    source: str
    al: tuple[float, ...]

    def __post_init__(self):
        if not self.al or any(value < 1.0 for value in self.al):
            raise ConfigError(f"The acceptance curve {self.name} needs an acceptance length of at least 1 per K.")

    @property
    def k_max(self) -> int:
        """The largest K the curve states."""
        return len(self.al)

    def rates(self, k: int) -> list[float]:
        """Per-position unconditional acceptance rates for positions 1..K (non-increasing, in [0, 1]);
        zeros past the curve's last K."""
        increments = [b - a for a, b in zip((1.0, *self.al), self.al)]
        rates = monotone_rates(increments)
        return (rates + [0.0] * k)[:k]

    def at(self, k: int) -> float:
        """AL at K (1 at K=0) from the monotone rates."""
        return 1.0 + sum(self.rates(k))


def from_rates(name: str, source: str, rates: Sequence[float]) -> Curve:
    """A curve from measured per-position rates (a run's ``per_position_acceptance``)."""
    if not rates:
        raise ConfigError(f"{name} carries no per-position acceptance to make a curve of.")
    al, total = [], 1.0
    for rate in monotone_rates(rates):
        total += rate
        al.append(round(total, 6))
    return Curve(name, source, tuple(al))


# name: (source, AL at K = 1, 2, ...). Figures transcribed from the sources, two decimals as published
# (SpecDecode-Bench's three, computed from its traces by tests/bench/priors.py).
_TABLE: dict[str, tuple[str, tuple[float, ...]]] = {
    "eagle3-kimi-k2.5": (
        _INFERENCEX + ", kimi-k2.5-nvfp4 EAGLE-3, thinking on",
        (1.83, 2.43, 2.88, 3.24, 3.46, 3.62, 3.71, 3.77),
    ),
    "eagle3-kimi-k2.5-no-thinking": (
        _INFERENCEX + ", kimi-k2.5-nvfp4 EAGLE-3, thinking off",
        (1.80, 2.33, 2.75, 3.06, 3.25, 3.43, 3.46, 3.51),
    ),
    "eagle3-minimax-m3": (
        _INFERENCEX + ", minimax-m3 EAGLE-3, thinking on",
        (1.78, 2.38, 2.83, 3.11, 3.35, 3.45, 3.53, 3.74),
    ),
    "eagle3-minimax-m3-gqa": (
        _INFERENCEX + ", minimax-m3 EAGLE-3 (GQA head), thinking on",
        (1.79, 2.39, 2.78, 3.02, 3.21, 3.30, 3.52, 3.51),
    ),
    "mtp-deepseek-v4": (
        _INFERENCEX + ", deepseek-v4-pro MTP, thinking on",
        (1.79, 2.27, 2.49, 2.54, 2.55, 2.55, 2.54, 2.58),
    ),
    "mtp-glm-5.2": (_INFERENCEX + ", glm-5.2-fp8 MTP, thinking on", (1.84, 2.50, 2.99, 3.33, 3.61, 3.78, 3.91, 4.06)),
    "mtp-qwen3.5": (
        _INFERENCEX + ", qwen3.5-397b-a17b-nvfp4 MTP, thinking on",
        (1.93, 2.73, 3.39, 3.97, 4.41, 4.80, 5.04, 5.21),
    ),
    "dspark-kimi-k3": (_INFERENCEX + ", kimi-k3 DSpark, thinking on", (1.84, 2.45, 2.87, 3.22, 3.44, 3.54, 3.78, 3.88)),
    "dspark-deepseek-v4": (
        _INFERENCEX + ", deepseek-v4-pro-0813 DSpark, thinking on",
        (1.84, 2.51, 3.01, 3.36, 3.61, 3.77, 3.73, 3.47),
    ),
    "draft-qwen3-1.7b-for-32b": (_RUIZ + ", Qwen3-32B with a Qwen3-1.7B draft", (1.72, 2.23, 2.58, 2.85, 3.04, 3.15)),
    "draft-qwen3-4b-for-32b": (_RUIZ + ", Qwen3-32B with a Qwen3-4B draft", (1.77, 2.34, 2.81, 3.13, 3.39, 3.61)),
    "eagle3-qwen3-32b": (
        _RUIZ + ", Qwen3-32B with RedHatAI's EAGLE-3 speculator",
        (1.64, 2.00, 2.17, 2.26, 2.30, 2.32),
    ),
    "eagle-llama3.1-8b-instructcoder": (
        _SPECDECODE + ", EAGLE, InstructCoder",
        (1.668, 2.06, 2.292, 2.446, 2.546, 2.618, 2.672, 2.705),
    ),
    "eagle-llama3.1-8b-sharegpt": (
        _SPECDECODE + ", EAGLE, ShareGPT",
        (1.633, 1.958, 2.129, 2.237, 2.31, 2.357, 2.387, 2.411),
    ),
    "eagle-llama3.1-8b-gsm8k": (
        _SPECDECODE + ", EAGLE, GSM8K",
        (1.694, 2.126, 2.392, 2.557, 2.663, 2.73, 2.769, 2.783),
    ),
    "eagle-llama3.1-8b-cnn": (
        _SPECDECODE + ", EAGLE, CNN/DailyMail",
        (1.674, 2.085, 2.324, 2.484, 2.583, 2.649, 2.703, 2.73),
    ),
    "ngram-llama3.1-8b-instructcoder": (
        _SPECDECODE + ", n-gram, InstructCoder",
        (1.509, 1.823, 2.028, 2.188, 2.289, 2.37, 2.447, 2.499),
    ),
}

PRIORS: dict[str, Curve] = {name: Curve(name, source, al) for name, (source, al) in _TABLE.items()}


def named(name: str) -> Curve:
    """The published curve called ``name``; ConfigError listing the names otherwise."""
    try:
        return PRIORS[name]
    except KeyError:
        raise ConfigError(f"No acceptance curve is called {name!r}; pick one of: {', '.join(PRIORS)}.") from None
