"""What the audit CLI prints: entry tables, an entry's fields, JSON lines and stats."""

import json
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo
from typing import TextIO

from bot.audit.stats import TOOL_STATUSES, AuditStats, Distribution
from bot.audit.stream import StreamEntry


class EntryTable:
    """Aligned rows: local time, type, chat, turn, step, tool, status, error, duration, details."""

    _HEADERS = ("TIME", "TYPE", "CHAT", "TURN", "STEP", "TOOL", "STATUS", "ERROR", "DURATION")
    # Widths used when rows arrive one by one (--follow) and cannot be measured first.
    _FIXED = (19, 4, 18, 10, 4, 18, 17, 17, 11)

    def __init__(self, zone: tzinfo | None, fixed: bool = False) -> None:
        self._zone = zone
        self._fixed = fixed

    def print(self, entries: Sequence[StreamEntry], out: TextIO, header: bool) -> None:
        """Print ``entries`` (and the header line first, if asked)."""
        rows = [tuple(printable(cell) for cell in self._row(entry)) for entry in entries]
        if self._fixed:
            widths = list(self._FIXED)
        else:
            widths = [
                max([len(title)] + [len(row[index]) for row in rows])
                for index, title in enumerate(self._HEADERS)
            ]
        if header:
            print(_join(self._HEADERS, widths, "DETAILS"), file=out)
        for row, entry in zip(rows, entries, strict=True):
            print(_join(row, widths, printable(_details(entry))), file=out)

    def _row(self, entry: StreamEntry) -> tuple[str, ...]:
        when = entry.event_time.astimezone(self._zone).strftime("%Y-%m-%d %H:%M:%S")
        turn, tool = entry.turn, entry.tool
        if turn is not None:
            names = ",".join(turn.tool_names) or "-"
            return (when, "turn", turn.chat_id, turn.turn_id, "", names,
                    str(turn.outcome), "", _format_ms(turn.latency_ms))  # fmt: skip
        if tool is not None:
            return (when, entry.type, tool.chat_id, tool.turn_id, _text(tool.step),
                    tool.tool_name, str(tool.status), tool.error_code or "",
                    _format_ms(tool.duration_ms))  # fmt: skip
        return (when, entry.type or "?", entry.chat_id, entry.turn_id,
                "", "", "", "", "-")  # fmt: skip


def field_lines(entry: StreamEntry) -> list[str]:
    """Every field of ``entry`` on its own line: the name, then the value (``-`` when empty)."""
    return [
        f"{printable(name) + ':':<19}{printable(value) or '-'}"
        for name, value in entry.fields.items()
    ]


# Characters a terminal acts on instead of showing: C0/C1 controls (ESC starts a
# colour or cursor sequence), format characters (bidi overrides reorder a line),
# line and paragraph separators, and surrogates.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """``text`` with every control or format character shown as a Python escape (``\\x1b``).

    Stream fields may come from outside unfiltered (the model name is the
    provider's); in table mode they must not reach the terminal raw.
    """
    if all(unicodedata.category(char) not in _UNPRINTABLE_CATEGORIES for char in text):
        return text
    return "".join(
        ascii(char)[1:-1] if unicodedata.category(char) in _UNPRINTABLE_CATEGORIES else char
        for char in text
    )


def json_line(entry: StreamEntry) -> str:
    """``entry`` as one JSON object on one line (no newline at the end)."""
    return json.dumps(entry.to_json_dict(), ensure_ascii=False)


def print_json_lines(entries: Iterable[StreamEntry], out: TextIO) -> None:
    """Print each entry as one JSON line."""
    for entry in entries:
        print(json_line(entry), file=out)


def stats_lines(stats: AuditStats, since: datetime, entries: int, zone: tzinfo | None) -> list[str]:
    """The stats report: a header line, the per-tool table, then turn outcomes, latency, tokens."""
    start = since.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"since {start}: {entries} entries, {stats.turns.count} turns", ""]
    headers = ("TOOL", "CALLS", *(status.upper() for status in TOOL_STATUSES), "ERR%")
    headers += ("P50", "P95", "MAX")
    rows = [
        (
            printable(tool.tool_name),
            str(tool.count),
            *(str(tool.by_status.get(status, 0)) for status in TOOL_STATUSES),
            f"{tool.error_rate * 100:.1f}%",
            *_ms_cells(tool.duration_ms),
        )
        for tool in stats.tools
    ]
    if rows:
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
        lines.append(_align(headers, widths))
        lines.extend(_align(row, widths) for row in rows)
    else:
        lines.append("no tool calls")
    lines.append("")
    turns = stats.turns
    outcomes = ", ".join(f"{printable(name)} {count}" for name, count in turns.by_outcome.items())
    lines.append(f"turns: {turns.count}" + (f" ({outcomes})" if outcomes else ""))
    p50, p95, top = _ms_cells(turns.latency_ms)
    lines.append(f"latency:  p50 {p50}  p95 {p95}  max {top}")
    tokens = turns.total_tokens
    lines.append(
        f"tokens:   p50 {_int_cell(tokens.p50)}  p95 {_int_cell(tokens.p95)}  "
        f"max {_int_cell(tokens.max)}  total {turns.tokens_sum}  "
        f"(unknown in {turns.tokens_unknown} turns)"
    )
    return lines


def stats_json(stats: AuditStats, since: datetime, entries: int) -> dict[str, object]:
    """The stats report as one JSON-ready object."""

    def distribution(value: Distribution) -> dict[str, float | None]:
        return {"p50": value.p50, "p95": value.p95, "max": value.max}

    return {
        "since": since.isoformat(),
        "entries": entries,
        "tools": [
            {
                "tool_name": tool.tool_name,
                "count": tool.count,
                "by_status": dict(tool.by_status),
                "error_rate": tool.error_rate,
                "duration_ms": distribution(tool.duration_ms),
            }
            for tool in stats.tools
        ],
        "turns": {
            "count": stats.turns.count,
            "by_outcome": dict(stats.turns.by_outcome),
            "latency_ms": distribution(stats.turns.latency_ms),
            "total_tokens": distribution(stats.turns.total_tokens),
            "tokens_sum": stats.turns.tokens_sum,
            "tokens_unknown": stats.turns.tokens_unknown,
        },
    }


def _join(cells: Sequence[str], widths: Sequence[int], details: str) -> str:
    parts = [
        cell.rjust(width) if index == len(cells) - 1 else cell.ljust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
    ]
    return ("  ".join(parts) + "  " + details).rstrip()


def _details(entry: StreamEntry) -> str:
    turn, tool = entry.turn, entry.tool
    if turn is not None:
        usage = turn.usage
        tokens = "/".join(
            _text(count) or "?"
            for count in (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
        )
        return (
            f"model={turn.model} steps={_text(turn.model_steps)} "
            f"tools={_text(turn.tool_calls)} tokens={tokens} "
            f"prompt={turn.prompt_id}@{turn.prompt_version}"
        )
    if tool is not None:
        return f"call={tool.call_id}"
    return ""


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _format_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} ms" if value < 10_000 else f"{value / 1000:.2f} s"


def _align(cells: Sequence[str], widths: Sequence[int]) -> str:
    # The first column is a name (left), the rest are numbers (right).
    return "  ".join(
        cell.ljust(width) if index == 0 else cell.rjust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
    )


def _ms_cells(distribution: Distribution) -> tuple[str, str, str]:
    return (
        _format_ms(distribution.p50),
        _format_ms(distribution.p95),
        _format_ms(distribution.max),
    )


def _int_cell(value: float | None) -> str:
    return "-" if value is None else str(int(value))
