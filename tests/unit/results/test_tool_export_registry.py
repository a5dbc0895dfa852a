"""Every registered tool importer is wired everywhere it must be: a capture of the real tool that a test
feeds it and that format detection gives to it, the CLI's help and options, the Explorer's uploader,
form and labels. Adding an importer is its module (``IMPORTER``) and its test; this test names what is
missing when one is registered but not wired."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from helpers.paths import CAPTURES, TESTS
from specscope.cli import build_parser
from specscope.errors import InputError
from specscope.results import identity, importers, tool_exports
from specscope.results.tool_exports.importer import Importer
from ui import import_form


def _import_command():
    parser = build_parser()
    [subparsers] = [a for a in parser._actions if a.choices and "import" in a.choices]
    [help_text] = [a.help for a in subparsers._choices_actions if a.dest == "import"]
    return subparsers.choices["import"], help_text


def _captures(entry: Importer) -> list[Path]:
    """The files of the tool's captures (``tests/captures/<source>_*``, a file or a folder)."""
    found = []
    for path in sorted(CAPTURES.glob(f"{entry.source}_*")):
        found += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return found


def _capture_problems(entry: Importer) -> list[str]:
    files = _captures(entry)
    if not files:
        return [
            f"has no capture: save what the real tool wrote as tests/captures/{entry.source}_<version>_... "
            "(tests/captures/TOOLS.md says how)"
        ]
    problems = [
        f"does not take its capture {p.relative_to(TESTS)}: format detection gives it to "
        f"{importers.upload_tool(p.name, p.read_bytes())!r} (check its formats and the others' tests)"
        for p in files
        if p.suffix.lower() in entry.formats and importers.upload_tool(p.name, p.read_bytes()) != entry.source
    ]
    fed = [
        t
        for t in TESTS.rglob("test_*.py")
        if t.name != Path(__file__).name and f"{entry.source}_" in t.read_text(encoding="utf-8")
    ]
    if not fed:
        problems.append(
            f"has no test that feeds it its capture: add a test under tests/unit that reads "
            f"tests/captures/{entry.source}_... and checks the rows it gives"
        )
    return problems


def _entry_problems(entry: Importer) -> list[str]:
    problems = (
        []
        if entry.source.isidentifier() and entry.source.islower()
        else ["needs a source of lower-case letters, digits and _ (its rows' source and its captures' prefix)"]
    )
    for field in ("label", "files", "suffixes", "formats"):
        if not getattr(entry, field):
            problems.append(f"lacks {field}: give it in its Importer(...)")
    problems += [
        f"offers {s} to the uploader but reads no {s} file: add it to formats"
        for s in entry.suffixes
        if s not in entry.formats
    ]
    return problems


def _offered_problems(entry: Importer) -> list[str]:
    """The CLI and the Explorer offer the tool, name it, and ask for what its files never state."""
    command, help_text = _import_command()
    options = {a.dest: a for a in command._actions}
    problems = [
        f"is not named by `specscope import --help` ({where})"
        for where, text in (("help", help_text), ("description", command.description))
        if entry.label not in (text or "")
    ]
    if entry.label not in import_form.uploader_label(200):
        problems.append("is not named by the Explorer's uploader label (import_form.uploader_label)")
    problems += [
        f"reads {s} files the Explorer's uploader does not take (import_form.TYPES)"
        for s in entry.suffixes
        if s.lstrip(".") not in import_form.TYPES
    ]
    if (
        identity.setup_label({"model": "m", "method": "none", "source": entry.source}).split(" · ")[-1]
        != f"via {entry.label}"
    ):
        problems.append("is not named on its rows' labels in the Explorer (identity.setup_label)")
    for field, files in entry.unstated.items():
        if field not in options or files not in (options[field].help or ""):
            problems.append(f"says {files} lacks {field}, but `specscope import` has no --{field} naming it")
        if field not in import_form.TOOL_GIVEN or files not in import_form.TOOL_HELP.get(field, ""):
            problems.append(
                f"says {files} lacks {field}, but the Explorer's import form does not ask for it "
                "(import_form.TOOL_GIVEN, TOOL_HELP)"
            )
    return problems


@pytest.mark.parametrize("entry", tool_exports.IMPORTERS, ids=lambda entry: entry.source)
def test_a_registered_importer_is_wired_everywhere(entry):
    problems = _entry_problems(entry) + _capture_problems(entry) + _offered_problems(entry)
    assert not problems, f"The {entry.source} importer is not wired:\n- " + "\n- ".join(problems)


def test_every_module_with_an_importer_is_registered():
    """Discovery finds every ``IMPORTER`` of the package, guidellm's and AIPerf's among them."""
    found = {
        module.name
        for module in pkgutil.iter_modules(tool_exports.__path__)
        if isinstance(
            getattr(importlib.import_module(f"{tool_exports.__name__}.{module.name}"), "IMPORTER", None), Importer
        )
    }
    assert [entry.source for entry in tool_exports.IMPORTERS] == sorted(found)
    assert {"aiperf": "AIPerf", "guidellm": "guidellm"}.items() <= tool_exports.MARKS.items()


def test_the_tools_read_only_their_own_files():
    """A file no tool wrote is left to SpecScope's other formats; a YAML or JSON-lines file goes to the one
    tool that writes them, which says what is wrong with one it did not write."""
    bench = CAPTURES / "vllm_bench_ngram_k4_c2.json"
    assert tool_exports.recognise(bench, bench.read_bytes()) is None
    assert tool_exports.read(Path("x.csv"), b"Method,Users\nngram,4\n", {}) is None
    with pytest.raises(InputError, match="not a guidellm report"):
        tool_exports.read(Path("x.yaml"), b"a: 1\n", {})
    with pytest.raises(InputError, match="not an AIPerf per-request file"):
        tool_exports.read(Path("x.jsonl"), b'{"a": 1}\n', {})
