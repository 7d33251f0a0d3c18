"""The one table renderer of the staff CLI: every table fits the width, headers over their values.

Every table command (``tail``, ``turn``, ``stats``, ``handoffs``, ``knowledge-gaps``,
``actions``, ``dead-letters``) prints through :func:`render`. When a table is wider
than the terminal, in this order:

1. columns with a short title (``BUSINESS_ERROR`` -> ``BIZ``) take it, and a legend
   under the table says what each one means: ``(OK=SUCCESS  BIZ=BUSINESS_ERROR ...)``,
   each of its lines in parentheses;
2. the least needed columns are shortened to their minimum (with ``…``);
3. the least needed columns are dropped, but never a ``keep`` column (a count: the
   counts of a row must still add up) nor a ``key`` column (what names the row);
4. if the ``keep`` columns still do not fit, the table is folded: printed as
   several tables one under the other, each with the ``key`` columns first and as
   many of the others as fit.

A line is never longer than the width. Colour marks statuses and outcomes, and only
on a terminal (never in a pipe, never with ``NO_COLOR``).
"""

import os
import shutil
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

ELLIPSIS = "…"
_RESET = "\x1b[0m"
_GREEN, _YELLOW, _RED = "\x1b[32m", "\x1b[33m", "\x1b[31m"
_GOOD = frozenset({"success", "answered", "executed", "confirmed", "closed", "human"})
_MIXED = frozenset({"business_error", "waiting", "declined", "expired", "superseded", "opened"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """A column: its title, how much it matters (higher stays longer), how narrow it may get.

    ``short`` is the title used when the table is too wide (explained in a legend);
    a ``keep`` column (a count) is folded onto another table rather than dropped; a
    ``key`` column (what names the row) is repeated in every folded part.
    """

    title: str
    priority: int
    min_width: int | None = None
    right: bool = False
    coloured: bool = False
    short: str | None = None
    keep: bool = False
    key: bool = False


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
    otherwise each column is as wide as its widest cell. A last column of free text
    (left-aligned) is not padded. See the module docstring for what a narrow width does.
    """
    paint = _paint if colour else None
    if widths is not None:
        parts = [_fit(columns, list(widths), width, [c.title for c in columns])]
    else:
        parts = _plan(columns, rows, width)
    lines: list[str] = []
    for number, part in enumerate(parts):
        if number:
            lines.append("")
        layout = _Layout(columns=columns, shown=part.shown, sizes=part.sizes, width=width)
        if header:
            lines.append(layout.line(part.titles, None))
        lines.extend(layout.line(row, paint) for row in rows)
    if header:
        lines.extend(_legend(columns, parts, width))
    return lines


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    """One table as printed: the columns shown, every column's width and title."""

    shown: list[int]
    sizes: list[int]
    titles: list[str]


def _plan(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None
) -> list[_Part]:
    """The table, or the folded tables, that fit ``width``."""
    titles = [c.title for c in columns]
    natural = _natural(titles, rows)
    if width is None or _total(range(len(columns)), natural) <= width:
        return [_Part(shown=list(range(len(columns))), sizes=natural, titles=titles)]
    titles = [c.short or c.title for c in columns]
    natural = _natural(titles, rows)
    fitted = _fit(columns, natural, width, titles)
    if _total(fitted.shown, fitted.sizes) <= width:
        return [fitted]
    return _fold(columns, fitted, width)


def _fold(columns: Sequence[Column], fitted: _Part, width: int) -> list[_Part]:
    """``fitted`` cut into tables that each fit: the key columns, then what fits beside them."""
    keys = [i for i in fitted.shown if columns[i].key]
    groups: list[list[int]] = [[]]
    for index in (i for i in fitted.shown if i not in keys):
        if groups[-1] and _total([*keys, *groups[-1], index], fitted.sizes) > width:
            groups.append([])
        groups[-1].append(index)
    return [
        _Part(shown=sorted([*keys, *group]), sizes=fitted.sizes, titles=fitted.titles)
        for group in groups
    ]


def _legend(columns: Sequence[Column], parts: Sequence[_Part], width: int | None) -> list[str]:
    """What each short title shown stands for, wrapped to ``width``."""
    shown = sorted({i for part in parts for i in part.shown})
    meanings = [
        f"{parts[0].titles[i]}={columns[i].title}"
        for i in shown
        if parts[0].titles[i] != columns[i].title
    ]
    lines: list[str] = []
    for meaning in meanings:
        # Every legend line is in parentheses of its own: readers (and tests) know it.
        if lines and (width is None or len(lines[-1]) + len(meaning) + 2 < width):
            lines[-1] = f"{lines[-1][:-1]}  {meaning})"
        else:
            lines.append(f"({meaning})")
    return lines


def _natural(titles: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(title)] + [len(row[i]) for row in rows]) for i, title in enumerate(titles)]


def _total(shown: Iterable[int], sizes: Sequence[int]) -> int:
    indexes = list(shown)
    return sum(sizes[i] for i in indexes) + 2 * (len(indexes) - 1)


def _fit(
    columns: Sequence[Column], natural: list[int], width: int | None, titles: list[str]
) -> _Part:
    """The columns shown and every column's width: shortened, then dropped, by priority.

    ``keep`` and ``key`` columns are shortened but never dropped (:func:`_fold` deals
    with what is still too wide).
    """
    shown = list(range(len(columns)))
    sizes = list(natural)
    if width is None:
        return _Part(shown=shown, sizes=sizes, titles=titles)
    by_priority = sorted(shown, key=lambda i: columns[i].priority)
    for index in by_priority:
        least = columns[index].min_width
        excess = _total(shown, sizes) - width
        if excess > 0 and least is not None and sizes[index] > least:
            sizes[index] = max(least, sizes[index] - excess)
    for index in by_priority:
        if _total(shown, sizes) <= width or len(shown) == 1:
            break
        if not (columns[index].keep or columns[index].key):
            shown.remove(index)
    # Room freed by a dropped column goes back to shortened ones, the most needed first.
    for index in reversed(by_priority):
        room = width - _total(shown, sizes)
        if index in shown and room > 0:
            sizes[index] = min(natural[index], sizes[index] + room)
    return _Part(shown=shown, sizes=sizes, titles=titles)


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
            if index == last and not column.right:
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
