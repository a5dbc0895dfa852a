"""data/SCHEMA.md documents every column of RESULT_SCHEMA and REQUEST_SCHEMA, and nothing else."""

from __future__ import annotations

import re

import pytest

from helpers.paths import DATA
from specscope.schema import REQUEST_SCHEMA, RESULT_SCHEMA

SCHEMA_MD = DATA / "SCHEMA.md"


def _documented(section_title: str) -> list[str]:
    """Column names in the first cell of each table row under the heading containing the title."""
    text = SCHEMA_MD.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)
    matches = [s for s in sections if s.splitlines()[0].find(section_title) >= 0]
    assert len(matches) == 1, f"SCHEMA.md needs one section titled with {section_title}"
    return re.findall(r"^\| `([a-z0-9_]+)` \|", matches[0], flags=re.M)


@pytest.mark.parametrize("title, schema", [("RESULT_SCHEMA", RESULT_SCHEMA), ("REQUEST_SCHEMA", REQUEST_SCHEMA)])
def test_every_column_is_documented_once(title, schema):
    documented = _documented(title)
    missing = [name for name in schema.names if name not in documented]
    assert not missing, f"data/SCHEMA.md lacks {title} column(s): {', '.join(missing)}"
    extra = [name for name in documented if name not in schema.names]
    assert not extra, f"data/SCHEMA.md documents column(s) not in {title}: {', '.join(extra)}"
    assert len(documented) == len(set(documented))


def test_documented_types_match_the_schema():
    names = {"string": "string", "int32": "int32", "int64": "int64", "double": "float64", "bool": "bool"}
    text = SCHEMA_MD.read_text(encoding="utf-8")
    for schema in (RESULT_SCHEMA, REQUEST_SCHEMA):
        for field in schema:
            rows = re.findall(rf"^\| `{field.name}` \| ([^|]+) \|", text, flags=re.M)
            expected = names.get(str(field.type))
            if expected is None:
                continue  # timestamp and list types are described in words
            assert all(r.strip().startswith(expected) for r in rows), (field.name, rows)
