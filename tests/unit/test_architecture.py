"""The architecture as tests, read from the source with ``ast`` and ``tokenize`` (nothing is imported):

- no import cycle among the modules under ``app/``, imports inside functions included;
- the library's packages are floors (``FLOORS``): no import goes up one;
- no run of 6 statements appears twice in ``app/`` with the same shape (names and literals aside);
- every public library function and class says what it does in a docstring.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

from helpers.paths import APP

RUN = 6  # statements in a row that may not appear twice


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".egg-info" not in p.as_posix())


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules under ``root`` it imports anywhere in its body (functions included).

    ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``; importing a
    module also points at the package inits above it (they run first), the importer's own aside.
    """
    paths = {_module_name(root, p): p for p in _sources(root)}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1]
                        + ([node.module] if node.module else [])
                    )
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            for target in (t for t in targets if t in paths and t != name):
                graph[name].add(target)
                # importing pkg.sub runs pkg/__init__.py first: an edge to every package above the target,
                # but the importer's own (its package is already being imported when it runs)
                parts = target.split(".")
                graph[name].update(
                    parent
                    for parent in (".".join(parts[:i]) for i in range(1, len(parts)))
                    if parent in paths and parent != name and not name.startswith(parent + ".")
                )
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_under_app():
    graph = import_graph(APP)
    assert "specscope.launch.process" in graph and "specscope.sweep" in graph
    assert "specscope.launch" in graph["specscope.sweep.launchers"]  # sweeps start servers through launch
    assert not any(m.startswith("specscope.sweep") for m in graph["specscope.launch.process"])
    assert not any(m.startswith("specscope.launch") for m in graph["specscope.results.store"])  # /proc sits below both
    assert cycles(graph) == []


# The library's floors, lowest first: a module imports only from its own floor or a lower one.
FLOORS = (
    "ground",
    "prompts",
    "engine",
    "client",
    "results",
    "analysis",
    "launch",
    "sweep",
    "advice",
    "loop",
    "live",
    "cli",
    "ui",
    "views",
    "dashboard",
    "main",
)
GROUND = {
    "specscope",
    *(
        f"specscope.{name}"
        for name in (
            "schema",
            "settings",
            "errors",
            "formats",
            "files",
            "stats",
            "distributions",
            "ties",
            "procfs",
            "access",
        )
    ),
}


def floor(module: str) -> str:
    parts = module.split(".")
    if module in GROUND or parts[0] != "specscope":
        return "ground" if module in GROUND else parts[0]
    return parts[1]


def test_every_import_goes_to_the_same_floor_or_below():
    graph = import_graph(APP)
    assert {floor(m) for m in graph} <= set(FLOORS), {floor(m) for m in graph} - set(FLOORS)  # a new module: place it
    up = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if FLOORS.index(floor(b)) > FLOORS.index(floor(a))
    )
    assert up == [], up


def test_advice_reads_results_and_runs_no_sweep():
    """Advice models results; the sweeps that advise live in ``specscope.loop``, so a page that shows a fit
    loads no sweep machinery (no Ray executor, no server pool)."""
    graph = import_graph(APP)
    assert any(m.startswith("specscope.sweep") for m in graph["specscope.loop.deploy_run"])  # the loop runs them
    into_sweep = sorted(
        f"{a} -> {b}" for a, targets in graph.items() if floor(a) == "advice" for b in targets if floor(b) == "sweep"
    )
    assert into_sweep == [], into_sweep


def test_an_import_up_a_floor_is_found(tmp_path):
    for name, body in {
        "engine/__init__.py": "",
        "engine/catalog.py": "from specscope.client import probe\n",
        "client/__init__.py": "",
        "client/probe.py": "",
        "__init__.py": "",
    }.items():
        (tmp_path / "specscope" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "specscope" / name).write_text(body)
    graph = import_graph(tmp_path)
    up = {(a, b) for a, targets in graph.items() for b in targets if FLOORS.index(floor(b)) > FLOORS.index(floor(a))}
    assert up == {
        ("specscope.engine.catalog", "specscope.client.probe"),
        ("specscope.engine.catalog", "specscope.client"),
    }  # the module, and the package init run first


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """pkg/__init__.py imports pkg.inner.a; other.py imports pkg.inner.b, which runs pkg/__init__.py (and so
    pkg.inner.a) first; pkg.inner.a imports other: a circle through the init."""
    inner = tmp_path / "pkg" / "inner"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.inner import a\n")
    (inner / "__init__.py").write_text("")
    (inner / "a.py").write_text("import other\n")
    (inner / "b.py").write_text("")
    (tmp_path / "other.py").write_text("from pkg.inner import b\n")
    assert cycles(import_graph(tmp_path)) == [["other", "pkg", "pkg.inner.a"]]


def test_a_cycle_hidden_in_a_function_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def late():\n    from pkg.a import thing\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(tmp_path)) == [["pkg.a", "pkg.b"]]


def _shape(tok: tokenize.TokenInfo, previous: str) -> str:
    if tok.type == tokenize.STRING:
        return "S"
    if tok.type == tokenize.NUMBER:
        return "0"
    if tok.type == tokenize.NAME and not keyword.iskeyword(tok.string) and previous != ".":
        return "N"  # a variable, function or class name; attribute names after '.' are kept
    return tok.string


def statements(path: Path) -> list[tuple[str, int]]:
    """(the statement's shape, its line) for every logical line but boilerplate.

    The shape has names as N, strings as S, numbers as 0, keywords, operators and attribute
    names kept: ``base = url.strip()`` and ``root = text.strip()`` have the same shape.
    """
    out, words, texts, start = [], [], [], None
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if words and not _boilerplate(texts):
                out.append((" ".join(words), start))
            words, texts, start = [], [], None
        elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            start = tok.start[0] if start is None else start
            words.append(_shape(tok, texts[-1] if texts else ""))
            texts.append("S" if tok.type == tokenize.STRING else "0" if tok.type == tokenize.NUMBER else tok.string)
    return out


def _boilerplate(words: list[str]) -> bool:
    """Imports, ``__all__``, decorators, bare strings (docstrings), class headers and declarations.

    Declarations: ``name: type [= default]`` fields and ``NAME = literal`` constants; the
    statements of any method or function still count.
    """
    if words[0] in ("import", "from", "@", "__all__", "class") or words == ["S"]:
        return True
    if len(words) >= 2 and words[1] == ":" and words[0].isidentifier() and not keyword.iskeyword(words[0]):
        return True
    literal = {"S", "0", "True", "False", "None", "(", ")", ","}
    return len(words) >= 3 and words[1] == "=" and set(words[2:]) <= literal


def repeated_runs(root: Path, run: int = RUN) -> list[list[tuple[str, int]]]:
    """Every run of ``run`` statements found at two or more places, as (file, first line) lists."""
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in _sources(root):
        found = statements(path)
        for i in range(len(found) - run + 1):
            key = tuple(text for text, _ in found[i : i + run])
            seen[key].append((path.relative_to(root).as_posix(), found[i][1]))
    return [places for places in seen.values() if len(places) > 1]


def test_no_run_of_six_statements_appears_twice_in_app():
    assert repeated_runs(APP) == []


def test_a_copied_run_with_other_names_and_messages_is_found(tmp_path):
    body = (
        "def {name}(url):\n    base = url.strip()\n    try:\n        r = get(base, timeout=5)\n"
        "    except Error as exc:\n        raise Unreachable('{msg}') from exc\n    return r.json()\n"
    )
    (tmp_path / "one.py").write_text(body.format(name="first", msg="nothing at the URL"))
    (tmp_path / "two.py").write_text(
        "import os\n\n\n"
        + body.format(name="second", msg="no server").replace("base", "root").replace("get(", "fetch(")
    )
    (tmp_path / "three.py").write_text(body.format(name="third", msg="x").replace("timeout=5", "timeout=5, v=1"))
    assert [sorted(places) for places in repeated_runs(tmp_path)] == [
        [("one.py", 1), ("two.py", 4)],
        [("one.py", 2), ("two.py", 5)],
    ]


def _public(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return {element.value for element in node.value.elts}
    return set()


@pytest.mark.parametrize("path", _sources(APP / "specscope"), ids=lambda p: p.relative_to(APP).as_posix())
def test_public_library_functions_have_a_docstring(path):
    tree = ast.parse(path.read_text())
    public = _public(tree)
    missing = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name not in public:
            continue
        if not ast.get_docstring(node):
            missing.append(node.name)
        if isinstance(node, ast.ClassDef):
            missing += [
                f"{node.name}.{m.name}"
                for m in node.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not m.name.startswith("_")
                and not ast.get_docstring(m)
            ]
    assert missing == [], f"{path.name}: give these a one-line docstring"


ROOM_LIMITS = {"specscope/sweep": 300, "specscope/live": 300}  # lines a module there may have; elsewhere 500


def test_no_module_outgrows_its_room():
    """Small modules: none over 500 lines under app/, none over 300 in the sweep and live packages."""
    grown = []
    for path in sorted(APP.rglob("*.py")):
        where = path.relative_to(APP).as_posix()
        limit = next((n for room, n in ROOM_LIMITS.items() if where.startswith(room + "/")), 500)
        lines = len(path.read_text().splitlines())
        if lines > limit:
            grown.append(f"{where}: {lines} lines (at most {limit})")
    assert not grown, grown
