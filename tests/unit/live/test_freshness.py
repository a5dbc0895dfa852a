"""Fresh prompts on Live: a server process's identity from /metrics, the answers it produced, variants, badges."""

from __future__ import annotations

from helpers.paths import CAPTURES
from specscope.client import metrics
from specscope.launch import registry
from specscope.live import freshness
from specscope.live.freshness import AnswerLog, Freshness


def snapshot(name: str) -> metrics.MetricsSnapshot:
    return metrics.parse((CAPTURES / name).read_text())


def test_a_server_is_its_url_and_start_time_so_a_restart_starts_a_clean_log(specscope_home):
    before, after = snapshot("metrics_prefix_hit_before.txt"), snapshot("metrics_prefix_hit_after.txt")
    assert before.started_at == after.started_at and 1.79e9 < before.started_at < 1.8e9
    key = freshness.server_key("http://127.0.0.1:8001/", before)
    assert key.startswith("http://127.0.0.1:8001@1795316258")
    assert freshness.server_key("http://127.0.0.1:8001", None) == "http://127.0.0.1:8001"
    log = AnswerLog()
    assert log.answers(key) == []
    log.add(key, [1, 2, 3])
    assert log.answers(key) == [[1, 2, 3]]
    assert log.answers("http://127.0.0.1:8001@1795399999") == []  # restarted: nothing cached
    assert registry.read_states() == []  # the log is no server state file


def test_a_variant_changes_the_first_tokens():
    prompt = "Rewrite this function."
    first = freshness.variant(prompt)
    assert first == "(variant 1) Rewrite this function." and freshness.variant(first) == "(variant 2) " + prompt
    assert freshness.base_prompt(freshness.variant(first)) == prompt


def test_answer_overlap_counts_runs_an_earlier_answer_holds():
    earlier = [list(range(100, 140))]
    assert freshness.answer_overlap(list(range(100, 140)), earlier) == 1.0  # the same answer
    assert freshness.answer_overlap(list(range(0, 40)), earlier) == 0.0  # a new one
    half = list(range(100, 120)) + list(range(0, 20))  # half of it repeats
    assert freshness.answer_overlap(half, earlier) == 0.5
    scattered = [100, 0, 101, 1, 102, 2, 103, 3, 104, 4]  # shared tokens, no runs
    assert freshness.answer_overlap(scattered, earlier) == 0.0
    assert freshness.answer_overlap([100, 101, 102], earlier) == 1.0  # shorter than a run: whole
    assert freshness.answer_overlap([], earlier) is None


def test_badges_follow_what_the_server_reused():
    assert Freshness(prefix_hit_rate=0.1).badge is None
    cold = Freshness(prefix_hit_rate=0.0)
    assert cold.badge is None and "0% of its prompt tokens" in cold.explanation  # no badge without hits
    prefix = Freshness(prefix_hit_rate=0.9)
    assert prefix.badge == "prefix cache hit" and "90%" in prefix.explanation
    suffix = Freshness(drafts_from_answers=True, answer_overlap=0.97, prefix_hit_rate=0.0)
    assert suffix.badge == "repeated answer: cached drafts" and "restart" in suffix.explanation
    assert "97% of this answer" in suffix.explanation
    assert Freshness(drafts_from_answers=True, answer_overlap=0.2).badge is None
    assert Freshness(drafts_from_answers=False, answer_overlap=1.0).badge is None  # only suffix drafts from answers
    rate = metrics.prefix_cache_hit_rate(
        snapshot("metrics_prefix_hit_before.txt"), snapshot("metrics_prefix_hit_after.txt")
    )
    assert Freshness(prefix_hit_rate=rate).repeated == (rate > 0.5)
    assert freshness.drafts_from_answers("speculative", {"method": "suffix"})
    assert not freshness.drafts_from_answers("ngram", None)
    old = {"seen_before": True, "prefix_hit_rate": 0.2, "drafts_from_answers": False}  # an older recording
    assert Freshness.from_dict(old) == Freshness(prefix_hit_rate=0.2)
