"""Prompt sets: parse and validate uploaded files, and keep them in the home under a content hash.

Accepted formats (chosen by the file name's extension):

- ``.jsonl`` / ``.ndjson``: one JSON object a line with ``prompt`` (vLLM's ``custom`` dataset
  format, optional ``output_tokens``) or chat ``messages`` (``[{"role", "content"}]``);
  an optional ``id``, ``category`` and ``response_format`` (a JSON schema, regex or choice list the
  answer must follow: ``specscope.formats``).
- ``.csv``: a header row with a ``prompt`` column (optional ``id``, ``output_tokens``, ``category``,
  ``response_format`` as JSON text).
- ``.txt``: one prompt a line, or, when the file has blank lines, blank-line separated blocks.
- ``.json``: ShareGPT, a list of ``{"conversations": [{"from": "human", "value": ...}]}``;
  the first human turn is the prompt.

``parse`` raises InputError naming the line (and field) of the first problem; ``problems``
lists them all. A ``category`` (``coding``, ``chat``, ...: letters, digits, spaces, ``.``, ``_``,
``-``, at most 40 characters) groups a set's prompts in per-prompt speedups. ``save`` stores the
raw bytes under ``prompts_dir()/<sha256[:16]>/``.

    prompt_set = parse(data, "my-set.jsonl")
    prompt_set.prompts[0].messages    # what the runner sends to /v1/chat/completions
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from specscope import formats
from specscope.errors import InputError

__all__ = [
    "Prompt",
    "PromptSet",
    "parse",
    "problems",
    "load",
    "set_name",
    "FORMATS",
    "MAX_BYTES",
    "MAX_PROMPTS",
    "MAX_PROMPT_CHARS",
]

MAX_BYTES = 10 * 1024 * 1024
MAX_PROMPTS = 10_000
MAX_PROMPT_CHARS = 200_000
MAX_OUTPUT_TOKENS = 65_536
MAX_CATEGORY_CHARS = 40
ROLES = ("system", "user", "assistant")
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".txt": "txt", ".json": "sharegpt"}
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_CATEGORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$")


@dataclass(frozen=True)
class Prompt:
    """One prompt: chat messages (a single user turn for plain text), where it came from."""

    prompt_id: str
    line: int
    messages: tuple[tuple[str, str], ...]
    output_tokens: int | None = None
    category: str | None = None
    response_format: formats.ResponseFormat | None = None  # the answer's constraint, if any

    @property
    def text(self) -> str:
        """The last user turn (the prompt as a reader sees it)."""
        return next(content for role, content in reversed(self.messages) if role == "user")

    def chat_messages(self) -> list[dict]:
        """The prompt as OpenAI chat messages."""
        return [{"role": role, "content": content} for role, content in self.messages]


@dataclass(frozen=True)
class PromptSet:
    """A validated prompt set: its name (the ``dataset`` of result rows), format and content hash."""

    name: str
    format: str
    sha256: str
    prompts: tuple[Prompt, ...]

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def has_formats(self) -> bool:
        """Whether any prompt carries a response format."""
        return any(p.response_format is not None for p in self.prompts)

    def with_formats(self) -> PromptSet:
        """The set's prompts that carry a response format, in order (what a constrained cell sends): a
        prompt without one has nothing to be constrained to."""
        return replace(self, prompts=tuple(p for p in self.prompts if p.response_format is not None))

    def split_note(self) -> str:
        """One sentence on how constrained cells split this set; '' when every prompt (or none) carries a
        format."""
        formatted = len(self.with_formats())
        if formatted in (0, len(self)):
            return ""
        carry, those = ("carries", "that one") if formatted == 1 else ("carry", f"those {formatted}")
        return (
            f"Only {formatted} of the {len(self)} prompts {carry} a response format: constrained cells (and "
            f"their baseline) run {those}, free cells all {len(self)}."
        )


class _Problems:
    """Collects every problem; ``first`` is raised by ``parse``."""

    def __init__(self, filename: str):
        self.filename = filename
        self.items: list[InputError] = []

    def add(self, line: int, message: str, field: str | None = None) -> None:
        where = f"{self.filename} line {line}" + (f", field '{field}'" if field else "")
        self.items.append(InputError(f"{where}: {message}", line=line, field=field))


def set_name(filename: str) -> str:
    """A prompt set's name from its file name: the stem, safe for paths and labels."""
    stem = Path(filename).stem if filename else "prompts"
    return _NAME_CHARS.sub("-", stem).strip("-.")[:80] or "prompts"


def _check_text(found: _Problems, line: int, field: str, value) -> str | None:
    if not isinstance(value, str):
        found.add(line, f"must be a string, not {type(value).__name__}", field)
        return None
    if not value.strip():
        found.add(line, "is empty; give the prompt text", field)
        return None
    if len(value) > MAX_PROMPT_CHARS:
        found.add(line, f"is {len(value):,} characters long; the limit is {MAX_PROMPT_CHARS:,}", field)
        return None
    if "\x00" in value:
        found.add(line, "holds a NUL character; remove it", field)
        return None
    return value


def _check_output_tokens(found: _Problems, line: int, value) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OUTPUT_TOKENS:
        found.add(line, f"must be a whole number from 1 to {MAX_OUTPUT_TOKENS}, not {value!r:.40}", "output_tokens")
        return None
    return value


def _check_category(found: _Problems, line: int, value) -> str | None:
    if value is None or value == "":
        return None
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or len(text) > MAX_CATEGORY_CHARS or not _CATEGORY.match(text):
        found.add(
            line,
            f"must be a short text (letters, digits, spaces, '.', '_', '-'; at most "
            f"{MAX_CATEGORY_CHARS} characters), e.g. coding, not {value!r:.40}",
            "category",
        )
        return None
    return text


def _check_format(found: _Problems, line: int, value) -> formats.ResponseFormat | None:
    if value is None or value == "":
        return None
    try:
        return formats.parse(value)
    except formats.SchemaProblems as exc:
        for message in exc.messages:
            found.add(line, message, "response_format")
    except ValueError as exc:
        found.add(line, str(exc), "response_format")
    return None


def _prompt_id(found: _Problems, line: int, value) -> str | None:
    if value is None or value == "":
        return f"L{line}"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        found.add(line, f"must be a string or a number, not {type(value).__name__}", "id")
        return None
    text = str(value)
    if len(text) > 200:
        found.add(line, "is longer than 200 characters", "id")
        return None
    return text


def _lines(text: str) -> list[str]:
    """Lines as an editor numbers them (only \\n ends a line; JSON may hold U+2028)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _from_record(found: _Problems, line: int, record) -> Prompt | None:
    """A JSONL object: ``prompt`` or ``messages``, optional ``output_tokens``, ``id``, ``category`` and
    ``response_format``."""
    if not isinstance(record, dict):
        found.add(line, f"must be a JSON object, not {type(record).__name__}")
        return None
    output_tokens = _check_output_tokens(found, line, record.get("output_tokens"))
    prompt_id = _prompt_id(found, line, record.get("id"))
    category = _check_category(found, line, record.get("category"))
    response_format = _check_format(found, line, record.get("response_format"))
    messages: tuple[tuple[str, str], ...] | None
    if "prompt" in record:
        text = _check_text(found, line, "prompt", record["prompt"])
        messages = None if text is None else (("user", text),)
    elif "messages" in record:
        messages = _messages(found, line, record["messages"])
    else:
        found.add(line, "has neither 'prompt' nor 'messages'; give one of them", "prompt")
        return None
    if (
        messages is None
        or prompt_id is None
        or (record.get("output_tokens") not in (None, "") and output_tokens is None)
        or (record.get("category") not in (None, "") and category is None)
        or (record.get("response_format") not in (None, "") and response_format is None)
    ):
        return None
    return Prompt(prompt_id, line, messages, output_tokens, category, response_format)


def _messages(found: _Problems, line: int, value) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, list) or not value:
        found.add(line, 'must be a non-empty list of {"role", "content"} objects', "messages")
        return None
    out = []
    for i, message in enumerate(value):
        field = f"messages[{i}]"
        if not isinstance(message, dict):
            found.add(line, "must be an object with 'role' and 'content'", field)
            return None
        role = message.get("role")
        if role not in ROLES:
            found.add(line, f"must be one of {', '.join(ROLES)}, not {role!r:.40}", f"{field}.role")
            return None
        content = _check_text(found, line, f"{field}.content", message.get("content"))
        if content is None:
            return None
        out.append((role, content))
    if out[-1][0] != "user":
        found.add(
            line,
            "the last message must have role 'user' (the turn the model answers)",
            f"messages[{len(out) - 1}].role",
        )
        return None
    return tuple(out)


def _parse_jsonl(found: _Problems, text: str) -> list[Prompt]:
    prompts = []
    for line, raw in enumerate(_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            found.add(line, f"is not valid JSON ({str(exc)[:80]})")
            continue
        prompt = _from_record(found, line, record)
        if prompt is not None:
            prompts.append(prompt)
    return prompts


def _parse_csv(found: _Problems, text: str) -> list[Prompt]:
    reader = csv.reader(io.StringIO(text, newline=""))
    prompts: list[Prompt] = []
    try:
        header = next(reader, None)
        if header is None:
            found.add(1, "has no header row; the first row must name a 'prompt' column")
            return prompts
        names = [h.strip().lower() for h in header]
        if "prompt" not in names:
            found.add(1, f"the header names no 'prompt' column (found: {', '.join(names)[:120]})", "prompt")
            return prompts
        columns = {
            name: names.index(name)
            for name in ("prompt", "id", "output_tokens", "category", "response_format")
            if name in names
        }
        start = reader.line_num + 1
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(names):
                found.add(line, f"has {len(row)} cells but the header has {len(names)}")
                continue
            record = {name: row[index] for name, index in columns.items()}
            prompt = _from_record(found, line, record)
            if prompt is not None:
                prompts.append(prompt)
    except csv.Error as exc:
        found.add(max(reader.line_num, 1), f"is not valid CSV ({exc})")
    return prompts


def _parse_txt(found: _Problems, text: str) -> list[Prompt]:
    lines = _lines(text)
    filled = [i for i, line in enumerate(lines) if line.strip()]
    paragraphs = bool(filled) and any(not lines[i].strip() for i in range(filled[0], filled[-1]))
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    first = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            if current:
                blocks.append((first, current))
            current = []
            continue
        if not paragraphs:
            blocks.append((number, [line]))
            continue
        if not current:
            first = number
        current.append(line)
    if current:
        blocks.append((first, current))
    prompts = []
    for start, block in blocks:  # the line a block starts on
        text_value = _check_text(found, start, "prompt", "\n".join(block).strip())
        if text_value is not None:
            prompts.append(Prompt(f"L{start}", start, (("user", text_value),)))
    return prompts


def _json_elements(found: _Problems, text: str):
    """Yield (line, element) for each element of a top-level JSON array, keeping line numbers."""
    decoder = json.JSONDecoder()
    position = len(text) - len(text.lstrip())

    def line_of(index: int) -> int:
        return text.count("\n", 0, index) + 1

    if not text[position : position + 1] == "[":
        found.add(line_of(position), "a ShareGPT file must be a JSON list of conversations ('[' ...)")
        return
    position += 1
    expect_value = True
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            found.add(line_of(position), "the JSON list is not closed with ']'")
            return
        if text[position] == "]":
            if position + 1 < len(text) and text[position + 1 :].strip():
                found.add(line_of(position + 1), "there is text after the closing ']'")
            return
        if not expect_value:
            if text[position] != ",":
                found.add(line_of(position), "expected ',' or ']' between conversations")
                return
            position += 1
            expect_value = True
            continue
        try:
            element, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError) as exc:
            found.add(line_of(getattr(exc, "pos", position) or position), f"is not valid JSON ({str(exc)[:80]})")
            return
        yield line_of(position), element
        position, expect_value = end, False


def _parse_sharegpt(found: _Problems, text: str) -> list[Prompt]:
    prompts = []
    for line, element in _json_elements(found, text):
        if not isinstance(element, dict):
            found.add(line, f"must be a conversation object, not {type(element).__name__}")
            continue
        turns = element.get("conversations", element.get("conversation"))
        if not isinstance(turns, list):
            found.add(line, 'must be a list of {"from", "value"} turns', "conversations")
            continue
        human = next(
            (i for i, t in enumerate(turns) if isinstance(t, dict) and t.get("from") in ("human", "user")), None
        )
        if human is None:
            found.add(line, "has no turn from 'human'", "conversations")
            continue
        text_value = _check_text(found, line, f"conversations[{human}].value", turns[human].get("value"))
        prompt_id = _prompt_id(found, line, element.get("id"))
        if text_value is not None and prompt_id is not None:
            prompts.append(Prompt(prompt_id, line, (("user", text_value),)))
    return prompts


_PARSERS = {"jsonl": _parse_jsonl, "csv": _parse_csv, "txt": _parse_txt, "sharegpt": _parse_sharegpt}


def _decode(found: _Problems, data: bytes) -> str | None:
    if len(data) > MAX_BYTES:
        found.add(
            1,
            f"the file is {len(data) / 1e6:.1f} MB; the limit is {MAX_BYTES / 1e6:.0f} MB; split it into smaller sets",
        )
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        found.add(data.count(b"\n", 0, exc.start) + 1, "is not UTF-8 text; save the file as UTF-8")
        return None
    if not text.strip():
        found.add(1, "the file is empty; it needs at least one prompt")
        return None
    return text


def _run(data: bytes, filename: str) -> tuple[_Problems, list[Prompt], str]:
    found = _Problems(Path(filename).name or "upload")
    suffix = Path(filename).suffix.lower()
    if suffix not in FORMATS:
        found.add(
            1,
            f"SpecScope reads prompt sets from {', '.join(sorted(FORMATS))} files; "
            f"rename or convert '{suffix or 'no extension'}'",
        )
        return found, [], ""
    fmt = FORMATS[suffix]
    text = _decode(found, data)
    if text is None:
        return found, [], fmt
    prompts = _PARSERS[fmt](found, text)
    if not found.items and not prompts:
        found.add(1, "holds no prompts")
    if len(prompts) > MAX_PROMPTS:
        found.add(prompts[MAX_PROMPTS].line, f"the set has more than {MAX_PROMPTS:,} prompts; split it")
    seen: dict[str, int] = {}
    for prompt in prompts:
        if prompt.prompt_id in seen:
            found.add(prompt.line, f"repeats id {prompt.prompt_id!r:.60} of line {seen[prompt.prompt_id]}", "id")
        seen.setdefault(prompt.prompt_id, prompt.line)
    return found, prompts, fmt


def problems(data: bytes, filename: str) -> list[InputError]:
    """Every problem in the file, each an InputError with ``line`` (and ``field`` when known)."""
    return _run(data, filename)[0].items


def parse(data: bytes, filename: str, name: str | None = None) -> PromptSet:
    """A validated PromptSet; raises InputError for the first problem (saying how many there are)."""
    found, prompts, fmt = _run(data, filename)
    if found.items:
        first = found.items[0]
        more = len(found.items) - 1
        if more:
            raise InputError(
                f"{first} ({more} more problem{'s' if more > 1 else ''} after it)", line=first.line, field=first.field
            )
        raise first
    return PromptSet(name or set_name(filename), fmt, hashlib.sha256(data).hexdigest(), tuple(prompts))


def load(path: Path | str) -> PromptSet:
    """Read and parse a prompt-set file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist; check the path.", line=1) from exc
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror}).", line=1) from exc
    return parse(data, path.name)
