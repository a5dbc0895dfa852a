"""How to load one server: the load generator's settings, named for ``vllm bench serve``'s flags."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from specscope.client import probe
from specscope.errors import ConfigError

__all__ = ["LoadSpec", "DEFAULT_OUTPUT_LEN"]

DEFAULT_OUTPUT_LEN = 128


@dataclass(frozen=True)
class LoadSpec:
    """How to load one server (``vllm bench serve`` flags in brackets)."""

    base_url: str  # [--base-url]
    model: str | None = None  # [--model] served name; None = the server's first model
    num_prompts: int | None = None  # [--num-prompts] None = every prompt of the set once
    max_concurrency: int = 1  # [--max-concurrency]
    request_rate: float = math.inf  # [--request-rate]
    burstiness: float = 1.0  # [--burstiness]
    output_len: int | None = DEFAULT_OUTPUT_LEN  # [--custom-output-len]; None = each prompt's output_tokens
    temperature: float = 0.0  # [--temperature]
    ignore_eos: bool = True  # [--ignore-eos]
    endpoint: Literal["chat", "completions"] = "chat"
    warmups: int = 0  # [--num-warmups] sent before the counters are read
    seed: int = 0  # [--seed]
    timeout_s: float = 1800.0
    structured: bool = False  # send each prompt's response format (a constrained cell)

    def __post_init__(self):
        if self.max_concurrency < 1:
            raise ConfigError("Concurrency must be at least 1.")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("The number of prompts must be at least 1.")
        if self.output_len is not None and self.output_len < 1:
            raise ConfigError("The output length must be at least 1 token.")
        if not self.request_rate > 0:
            raise ConfigError("The request rate must be positive (inf sends all requests at once).")
        if self.endpoint not in ("chat", "completions"):
            raise ConfigError("The endpoint must be 'chat' or 'completions'.")

    @property
    def root(self) -> str:
        """The server's base URL without a trailing ``/v1``."""
        return probe.base_url(self.base_url)
