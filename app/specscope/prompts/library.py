"""Where prompt sets live: the sets users stored in the SpecScope home (``save``) and the samples bundled in
``data/prompts``; a run's prompt found again by its set's name and id."""

from __future__ import annotations

from pathlib import Path

from specscope import access, files, settings
from specscope.errors import InputError
from specscope.prompts.sets import FORMATS, Prompt, PromptSet, load, parse, set_name

__all__ = ["save", "stored_sets", "bundled_sets", "find", "bundled_categories"]


def save(data: bytes, filename: str) -> tuple[PromptSet, Path]:
    """Validate and store an upload under ``prompts_dir()/<sha256[:16]>/<name><ext>``; idempotent;
    operators only (access.require)."""
    access.require("store a prompt set")
    prompt_set = parse(data, filename)
    folder = settings.prompts_dir() / prompt_set.sha256[:16]
    path = folder / f"{prompt_set.name}{Path(filename).suffix.lower()}"
    if not path.exists():
        files.write_atomic(path, data)
    return prompt_set, path


def stored_sets() -> list[Path]:
    """Prompt-set files saved in the home, newest first."""
    files = [p for p in settings.prompts_dir().glob("*/*") if p.suffix.lower() in FORMATS]
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def bundled_sets() -> list[Path]:
    """The sample sets shipped in ``data/prompts``."""
    folder = settings.bundled_data_dir() / "prompts"
    return sorted(p for p in folder.glob("*") if p.suffix.lower() in FORMATS) if folder.is_dir() else []


def find(dataset: str, prompt_id: str) -> tuple[Path, Prompt] | None:
    """The prompt ``prompt_id`` of the set named ``dataset`` (a run's ``dataset``): the newest stored
    set of that name holding it, else the bundled one; None when no set holds it."""
    for path in [*stored_sets(), *bundled_sets()]:
        if set_name(path.name) != dataset:
            continue
        try:
            found = next((p for p in load(path).prompts if p.prompt_id == prompt_id), None)
        except InputError:
            continue
        if found is not None:
            return path, found
    return None


def bundled_categories() -> dict[tuple[str, str], str]:
    """``{(set name, prompt id): category}`` of the bundled sets: the categories of rows measured
    on them before requests recorded one."""
    out = {}
    for path in bundled_sets():
        for prompt in load(path).prompts:
            if prompt.category:
                out[(set_name(path.name), prompt.prompt_id)] = prompt.category
    return out
