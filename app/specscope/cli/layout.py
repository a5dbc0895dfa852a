"""Text that fits a terminal: a table narrowed to a width, prose wrapped to it.

``terminal_width()`` is the terminal's width, or ``DEFAULT_WIDTH`` (160) when output goes to a pipe or a
file. ``fit_table`` renders a DataFrame in a width: numbers right-aligned, text left-aligned, a missing
value as "–". Where the natural table is wider, text columns wrap between words inside their column (an
interval's ``[low, high]`` kept whole), at the widths that add the fewest lines (a row then takes several
lines, a blank line between rows); a column that still does not fit is left out and named below the
table. ``wrap`` wraps prose, one paragraph per line of its input. A ``Report`` (what a library function
gives a command to print) is a list of prose strings and tables; ``render`` lays it out.

    print(layout.fit_table(frame, layout.terminal_width()))
    print(layout.fit_table(frame, None))        # --wide: every column whole
    print(layout.wrap(sentence))
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Sequence

import pandas as pd

__all__ = ["DEFAULT_WIDTH", "GAP", "Report", "terminal_width", "fit_table", "wrap", "render", "json_flag"]

DEFAULT_WIDTH = 160  # columns, where the output is no terminal
GAP = "  "  # between two columns
MISSING = "–"
NBSP = "\u00a0"
Report = Sequence[str | pd.DataFrame]  # prose (a paragraph per line) and tables, in printing order


def terminal_width() -> int:
    """The terminal's width in columns (``$COLUMNS`` first), else ``DEFAULT_WIDTH``."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def _cell(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return MISSING
    if isinstance(value, float):  # 3 decimals at most, none for a whole number: 12.346, 0.5, 4
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def _kept(text: str) -> str:
    """``text`` with the spaces inside an interval's brackets made non-breaking: ``[0.994, 1.244]`` stays whole."""
    return re.sub(r"\[[^\]]*\]", lambda m: m.group(0).replace(" ", NBSP), text)


def _wrapped(text: str, size: int) -> list[str]:
    lines = textwrap.wrap(_kept(text), size, break_on_hyphens=False, break_long_words=False) or [""]
    return [line.replace(NBSP, " ") for line in lines]


def _longest_word(texts) -> int:
    return max((len(word) for text in texts for word in _kept(text).split(" ")), default=1)


def _narrowed(lengths: list[list[int]], floors: list[int], limit: int) -> list[int] | None:
    """Column widths summing to at most ``limit`` that add the fewest lines by wrapping (``lengths``: each
    column's cell lengths, its header's first; a column never narrower than its floor); None if the floors
    alone are wider. A knapsack over the widths at which a column's cells wrap less (their lengths)."""
    if sum(floors) > limit:
        return None
    best: dict[int, tuple[int, list[int]]] = {0: (0, [])}  # total width -> (lines added, widths so far)
    for column, floor in zip(lengths, floors):
        step: dict[int, tuple[int, list[int]]] = {}
        for size in sorted({floor, *(n for n in column if n > floor)}):
            wrapped = sum(-(-n // size) - 1 for n in column)  # about the extra lines its cells take
            for used, (cost, sizes) in best.items():
                total = used + size
                if total <= limit and (total not in step or cost + wrapped < step[total][0]):
                    step[total] = (cost + wrapped, [*sizes, size])
        best = step
    return min(best.values(), key=lambda found: found[0])[1]


def _floors(columns: list[str], text: list[list[str]], numeric: list[bool]) -> list[int]:
    """How narrow each column may get: a number never wraps, text only between words (a header too)."""
    return [
        max(_longest_word([name]), *(len(row[i]) for row in text))
        if num
        else _longest_word([name, *(row[i] for row in text)])
        for i, (num, name) in enumerate(zip(numeric, columns))
    ]


def _lines(cells: list[str], sizes: list[int], numeric: list[bool]) -> list[str]:
    """One row's lines: each cell wrapped in its column, numbers right-aligned."""
    parts = [_wrapped(c, s) if len(c) > s else [c] for c, s in zip(cells, sizes)]
    return [
        GAP.join(
            (p[n] if n < len(p) else "").rjust(s) if num else (p[n] if n < len(p) else "").ljust(s)
            for p, s, num in zip(parts, sizes, numeric)
        ).rstrip()
        for n in range(max(len(p) for p in parts))
    ]


def fit_table(frame: pd.DataFrame, width: int | None = None) -> str:
    """``frame`` as a text table at most ``width`` columns wide (None: as wide as it needs)."""
    columns = [str(c) for c in frame.columns]
    text = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) for c in frame.columns
    ]
    sizes = [max([len(name), *(len(row[i]) for row in text)]) for i, name in enumerate(columns)]
    left_out: list[str] = []
    while width is not None and columns:
        lengths = [[len(name), *(len(row[i]) for row in text)] for i, name in enumerate(columns)]
        found = _narrowed(lengths, _floors(columns, text, numeric), width - len(GAP) * (len(columns) - 1))
        if found is not None:
            sizes = found
            break
        left_out.insert(0, columns.pop())  # the last column goes first: tables put their keys on the left
        numeric.pop()
        text = [row[:-1] for row in text]
    rows = [_lines(row, sizes, numeric) for row in text] if columns else []
    spaced = any(len(row) > 1 for row in rows)  # a blank line between rows where some row wraps
    out = _lines(columns, sizes, numeric) if columns else []
    for row in rows:
        out += ([""] if spaced else []) + row
    if left_out:
        out.append(
            wrap(
                f"({len(left_out)} column{'s' if len(left_out) > 1 else ''} left out to fit {width} "
                f"columns: {', '.join(left_out)}; --wide or --json shows them)",
                width,
            )
        )
    return "\n".join(out)


def wrap(text: str, width: int | None = None) -> str:
    """Prose wrapped to ``width`` (default: the terminal's), each input line a paragraph; indentation kept."""
    size = width or terminal_width()
    out = []
    for line in text.splitlines() or [""]:
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, size, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False) or [
            ""
        ]
    return "\n".join(out)


def json_flag(flag: str, value: object, indent: str = "    ", width: int | None = None) -> str:
    """``--speculative-config '{...}'`` wrapped to ``width`` between JSON items, outside strings: the newlines
    fall inside the quotes, where JSON takes them as spaces, so the lines still paste as one argument."""
    text = json.dumps(value)
    breaks, quoted, escaped = [], False, False
    for i, char in enumerate(text):
        if quoted:
            quoted, escaped = (escaped or char != '"'), (not escaped and char == "\\")
        elif char == '"':
            quoted = True
        elif char == "," and text[i + 1 : i + 2] == " ":
            breaks.append(i + 2)
    size, lines, line, start = width or terminal_width(), [], f"{indent}{flag} '", 0
    for end in [*breaks, len(text)]:
        piece = text[start:end]
        if len(line) + len(piece.rstrip()) > size and line.strip() not in ("", f"{flag} '"):
            lines.append(line.rstrip())
            line = " " * len(indent) + "  "
        line, start = line + piece, end
    return "\n".join([*lines, line + "'"])


def render(report: Report, width: int | None = None) -> str:
    """A report's tables fitted to ``width`` (None: whole) and its prose wrapped to it (or the terminal's)."""
    return "\n".join(fit_table(part, width) if isinstance(part, pd.DataFrame) else wrap(part, width) for part in report)
