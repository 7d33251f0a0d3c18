"""Tables that fit the terminal: columns dropped or shortened by priority, never wrapped.

A line is never longer than the width: columns of the lowest priority are
shortened to their minimum (with ``…``), then dropped, and the free-text last
column takes what is left. Colour marks statuses and outcomes, and only on a
terminal (never in a pipe, never with ``NO_COLOR``).
"""

import os
import shutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

ELLIPSIS = "…"
_RESET = "\x1b[0m"
_GREEN, _YELLOW, _RED = "\x1b[32m", "\x1b[33m", "\x1b[31m"
_GOOD = frozenset({"success", "answered", "executed", "confirmed", "closed", "human"})
_MIXED = frozenset({"business_error", "waiting", "declined", "expired", "superseded", "opened"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """A column: its title, how much it matters (higher stays longer), how narrow it may get."""

    title: str
    priority: int
    min_width: int | None = None
    right: bool = False
    coloured: bool = False


def terminal_width(out: TextIO) -> int | None:
    """``COLUMNS`` if set, else the terminal's width; ``None`` (no limit) for a pipe or file."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not _is_terminal(out):
        return None
    return shutil.get_terminal_size().columns


def colour_enabled(out: TextIO) -> bool:
    """Colour only on a terminal and without ``NO_COLOR`` (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and _is_terminal(out)


def wrap_lines(lines: Sequence[str], width: int | None) -> list[str]:
    """Text lines (not tables) broken between words to fit ``width``, continued indented."""
    if width is None:
        return list(lines)
    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
            continue
        wrapped.extend(
            textwrap.wrap(
                line,
                width,
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return wrapped


def format_duration_ms(value: float | None) -> str:
    """``864 ms``, ``4.2 ms``, ``12.3 s``, ``4m 05s``, ``2h 03m``, ``3d 04h`` (``-`` if unknown)."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    whole = int(value / 1000)
    for unit, minor, minor_name, name in _UNITS:
        if whole >= unit:
            return f"{whole // unit}{name} {whole % unit // minor:02d}{minor_name}"
    return f"{whole // 60}m {whole % 60:02d}s"


# Seconds per unit, per minor unit, and their names, largest first.
_UNITS = ((86400, 3600, "h", "d"), (3600, 60, "m", "h"))


def render(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None,
    colour: bool = False,
    header: bool = True,
    widths: Sequence[int] | None = None,
) -> list[str]:
    """The lines of the table (header first if asked), each at most ``width`` characters.

    ``widths`` fixes the column widths (rows printed one by one, ``--follow``);
    otherwise each column is as wide as its widest cell. The last column is free
    text and is not padded.
    """
    natural = list(widths) if widths is not None else _natural(columns, rows)
    shown, sizes = _fit(columns, natural, width)
    layout = _Layout(columns=columns, shown=shown, sizes=sizes, width=width)
    paint = _paint if colour else None
    lines = []
    if header:
        lines.append(layout.line([c.title for c in columns], None))
    lines.extend(layout.line(row, paint) for row in rows)
    return lines


def _natural(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(c.title)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]


def _fit(
    columns: Sequence[Column], natural: list[int], width: int | None
) -> tuple[list[int], list[int]]:
    """The indexes of the columns shown and every column's width."""
    shown = list(range(len(columns)))
    sizes = list(natural)

    def total() -> int:
        return sum(sizes[i] for i in shown) + 2 * (len(shown) - 1)

    if width is None:
        return shown, sizes
    by_priority = sorted(shown, key=lambda i: columns[i].priority)
    for index in by_priority:
        least = columns[index].min_width
        if total() > width and least is not None and sizes[index] > least:
            sizes[index] = max(least, sizes[index] - (total() - width))
    for index in by_priority:
        if total() <= width or len(shown) == 1:
            break
        shown.remove(index)
    # Room freed by a dropped column goes back to shortened ones, the most needed first.
    for index in reversed(by_priority):
        if index in shown and total() < width:
            sizes[index] = min(natural[index], sizes[index] + width - total())
    return shown, sizes


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """Which columns are shown, and how wide."""

    columns: Sequence[Column]
    shown: list[int]
    sizes: list[int]
    width: int | None

    def line(self, cells: Sequence[str], paint: Callable[[str, str], str] | None) -> str:
        """One row: cells shortened to their column, padded, joined; never over the width."""
        parts: list[str] = []
        used = 0
        last = len(self.columns) - 1
        for index in self.shown:
            column = self.columns[index]
            size = self.sizes[index]
            if index == last:
                size = len(cells[index]) if self.width is None else max(self.width - used, 0)
            # Without a width to keep to, a long cell only pushes the row on (--follow).
            cell = cells[index] if self.width is None else _shorten(cells[index], size)
            padded = cell.rjust(size) if column.right else cell.ljust(size)
            if paint is not None and column.coloured:
                padded = paint(cell, padded)
            parts.append(padded)
            used += size + 2
        return "  ".join(parts).rstrip()


def _shorten(text: str, size: int) -> str:
    if len(text) <= size:
        return text
    if size <= 0:
        return ""
    return text[: size - 1] + ELLIPSIS


def _paint(value: str, padded: str) -> str:
    if value in _GOOD:
        code = _GREEN
    elif value in _MIXED:
        code = _YELLOW
    elif value in ("", "-"):
        return padded
    else:
        code = _RED
    stripped = padded.rstrip()
    return f"{code}{stripped}{_RESET}{padded[len(stripped) :]}"


def _is_terminal(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty is not None and isatty())
