"""Fresh prompts on Live: a server process's identity from /metrics, the prompts it saw, variants, badges."""

from __future__ import annotations

from pathlib import Path

from specscope import freshness, metrics
from specscope.freshness import Freshness, PromptLog
from specscope.launch import registry

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def snapshot(name: str) -> metrics.MetricsSnapshot:
    return metrics.parse((CAPTURES / name).read_text())


def test_a_server_is_its_url_and_start_time_so_a_restart_starts_a_clean_log(specscope_home):
    before, after = snapshot("metrics_prefix_hit_before.txt"), snapshot("metrics_prefix_hit_after.txt")
    assert before.started_at == after.started_at and 1.79e9 < before.started_at < 1.8e9
    key = freshness.server_key("http://127.0.0.1:8001/", before)
    assert key.startswith("http://127.0.0.1:8001@1795316258")
    assert freshness.server_key("http://127.0.0.1:8001", None) == "http://127.0.0.1:8001"
    log = PromptLog()
    assert not log.seen(key, "Rewrite this function.")
    log.add(key, "Rewrite this function.")
    assert log.seen(key, "Rewrite this function.") and not log.seen(key, "Another prompt.")
    assert not log.seen("http://127.0.0.1:8001@1795399999", "Rewrite this function.")  # restarted
    assert registry.read_states() == []  # the log is no server state file


def test_a_variant_is_new_to_the_prefix_cache_but_not_to_suffix_decoding(specscope_home):
    prompt = "Rewrite this function."
    first = freshness.variant(prompt)
    assert first == "(variant 1) Rewrite this function." and freshness.variant(first) == "(variant 2) " + prompt
    assert freshness.base_prompt(freshness.variant(first)) == prompt
    log = PromptLog()
    log.add("s", prompt)
    assert not log.seen("s", first)                              # its first tokens are new
    assert log.seen("s", first, drafts_from_answers=True)        # its answer is the cached one


def test_badges_say_which_cache_flatters_the_pane():
    assert Freshness(seen_before=False, prefix_hit_rate=0.1).badge is None
    prefix = Freshness(seen_before=False, prefix_hit_rate=0.9)
    assert prefix.badge == "repeated prompt: prefix cache" and "90%" in prefix.explanation
    suffix = Freshness(seen_before=True, drafts_from_answers=True)
    assert suffix.badge == "repeated prompt: cached drafts" and "restart" in suffix.explanation
    rate = metrics.prefix_cache_hit_rate(snapshot("metrics_prefix_hit_before.txt"),
                                         snapshot("metrics_prefix_hit_after.txt"))
    assert Freshness(seen_before=False, prefix_hit_rate=rate).repeated == (rate > 0.5)
    assert freshness.drafts_from_answers("speculative", {"method": "suffix"})
    assert not freshness.drafts_from_answers("ngram", None)
