"""A sweep stopped on request says so (how far it got, how to resume), not "done"."""

from __future__ import annotations

from helpers import local_http
from helpers.paths import CAPTURES, DATA
from specscope import sweep

PROMPTS = DATA / "prompts" / "open-chat.jsonl"


class _Answering:
    """Servers already up at ``url`` (a local server answering with captured vLLM bytes) for every cell."""

    def __init__(self, url: str):
        self.url = url

    def start(self, method: str, k: int) -> sweep.RunningServer:
        return sweep.RunningServer(url=self.url, model="smol")

    def stop(self, server: sweep.RunningServer) -> None:
        pass

    def death(self, server: sweep.RunningServer) -> str | None:
        return None

    def pids(self, server: sweep.RunningServer) -> list[int]:
        return []


def test_a_sweep_stopped_after_its_first_cell_reads_stopped_and_how_to_resume(specscope_home):
    events: list = []
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(2,),
        concurrencies=(1, 2),
        prompts=PROMPTS,
        num_prompts=2,
        warmups=0,
        output_len=16,
    )
    with local_http.serving(local_http.measurable_chat((CAPTURES / "ngram_chat.sse").read_bytes(), [])) as url:
        result = sweep.run_sweep(
            spec, _Answering(url), events.append, stop=lambda: any(e.stage == "cell_done" for e in events)
        )
    assert result.stopped and result.ran == ["none-k0-c1"]
    last = events[-1]
    assert last.stage == "sweep_done"
    assert last.message.startswith("stopped after 1 of 4 cells (1 ran, 0 failed) in ")
    assert last.message.endswith("; start the same sweep again to resume")
    assert "done" not in last.message

    with local_http.serving(local_http.measurable_chat((CAPTURES / "ngram_chat.sse").read_bytes(), [])) as url:
        events.clear()
        resumed = sweep.run_sweep(spec, _Answering(url), events.append)
    assert not resumed.stopped and resumed.skipped == ["none-k0-c1"] and len(resumed.ran) == 3
    assert events[-1].message.startswith("3 ran, 0 failed, 1 reused from an earlier run; done in ")
