"""What the audit CLI prints: entry tables, an entry's fields, JSON lines and stats."""

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime, tzinfo
from typing import TextIO

from bot.audit.actions import ActionStep
from bot.audit.analysis import AnalysisStats
from bot.audit.handoffs import OpenHandoff
from bot.audit.knowledge_gaps import KnowledgeGap
from bot.audit.schema import number_of
from bot.audit.stats import TOOL_STATUSES, AuditStats, Distribution
from bot.audit.stream import StreamEntry, stream_id_time
from bot.queue.dead_letters import DeadLetter
from bot.support_audit.table import Column, format_duration_ms, render


@dataclass(frozen=True, slots=True)
class EntryTable:
    """Rows that fit the terminal: time, type, chat, turn, step, tool, status, error,
    duration, details; the least needed columns go first when the width is short."""

    _COLUMNS = (
        Column(title="TIME", priority=9),
        Column(title="TYPE", priority=6),
        Column(title="CHAT", priority=7, min_width=8),
        Column(title="TURN", priority=10),
        Column(title="STEP", priority=2),
        Column(title="TOOL", priority=5, min_width=10),
        Column(title="STATUS", priority=8, coloured=True),
        Column(title="ERROR", priority=4, min_width=8),
        Column(title="DURATION", priority=3, right=True),
        Column(title="DETAILS", priority=1, min_width=12),
    )
    # Widths used when rows arrive one by one (--follow) and cannot be measured first.
    _FIXED = (19, 7, 18, 10, 4, 18, 17, 17, 8, 0)

    zone: tzinfo | None
    fixed: bool = False
    _: KW_ONLY
    width: int | None = None
    colour: bool = False

    def print(self, entries: Sequence[StreamEntry], out: TextIO, header: bool) -> None:
        """Print ``entries`` (and the header line first, if asked)."""
        rows = [
            tuple(printable(cell) for cell in (*self._row(entry), _details(entry)))
            for entry in entries
        ]
        lines = render(
            self._COLUMNS,
            rows,
            width=self.width,
            colour=self.colour,
            header=header,
            widths=self._FIXED if self.fixed else None,
        )
        for line in lines:
            print(line, file=out)

    def _row(self, entry: StreamEntry) -> tuple[str, ...]:
        when = entry.event_time.astimezone(self.zone).strftime("%Y-%m-%d %H:%M:%S")
        turn, tool = entry.turn, entry.tool
        if turn is not None:
            names = ",".join(turn.tool_names) or "-"
            return (when, "turn", turn.chat_id, turn.turn_id, "", names,
                    str(turn.outcome), turn.error_code, _format_ms(turn.latency_ms))  # fmt: skip
        if tool is not None:
            return (when, entry.type, tool.chat_id, tool.turn_id, _text(tool.step),
                    tool.tool_name, str(tool.status), tool.error_code or "",
                    _format_ms(tool.duration_ms))  # fmt: skip
        fields = entry.fields
        duration = number_of(fields.get("duration_ms"))
        return (when, entry.type or "?", entry.chat_id, entry.turn_id, "",
                fields.get("tool_name", ""), fields.get("event", ""),
                fields.get("error_code", ""), _format_ms(duration))  # fmt: skip


def field_lines(entry: StreamEntry, width: int | None = None) -> list[str]:
    """Every field of ``entry`` on its own line: the name, then the value (``-`` when empty).

    A value too long for ``width`` continues on the next lines under itself,
    broken after a comma or a space, never inside a word.
    """
    lines: list[str] = []
    for name, value in entry.fields.items():
        label = f"{printable(name) + ':':<19}"
        pieces = _pieces(printable(value) or "-", None if width is None else width - len(label))
        lines.append(label + pieces[0])
        lines.extend(" " * len(label) + piece for piece in pieces[1:])
    return lines


def _pieces(text: str, room: int | None) -> list[str]:
    if room is None or len(text) <= room or room < 8:
        return [text]
    tokens = re.findall(r"[^, ]+[, ]?|[, ]", text)
    pieces = [""]
    for token in tokens:
        if pieces[-1] and len(pieces[-1]) + len(token.rstrip()) > room:
            pieces.append("")
        pieces[-1] += token
    return [piece.rstrip() for piece in pieces]


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


def stats_lines(
    stats: AuditStats,
    since: datetime,
    entries: int,
    zone: tzinfo | None,
    width: int | None = None,
) -> list[str]:
    """The stats report: a header line, the per-tool table, then turn outcomes, latency, tokens.

    The per-tool table fits ``width``: the status counts take short titles (with a
    legend), the percentiles go (the maximum first), and the counts are never
    dropped, so that each row's statuses add up to its calls.
    """
    start = since.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"since {start}: {entries} entries, {stats.turns.count} turns", ""]
    columns = (
        Column(title="TOOL", priority=10, min_width=12, key=True),
        Column(title="CALLS", priority=9, right=True, keep=True),
        *(
            Column(
                title=status.upper(),
                short=_STATUS_SHORT.get(status),
                priority=8,
                right=True,
                keep=True,
            )
            for status in TOOL_STATUSES
        ),
        Column(title="ERR%", priority=8, right=True, keep=True),
        Column(title="P50", priority=7, right=True),
        Column(title="P95", priority=6, right=True),
        Column(title="MAX", priority=3, right=True),
    )
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
        lines.extend(render(columns, rows, width=width))
    else:
        lines.append("no tool calls")
    lines.append("")
    turns = stats.turns
    outcomes = ", ".join(f"{printable(name)} {count}" for name, count in turns.by_outcome.items())
    lines.append(f"turns: {turns.count}" + (f" ({outcomes})" if outcomes else ""))
    if turns.by_language:
        lines.append(
            "languages: "
            + ", ".join(
                f"{printable(language)} {sum(counts.values())} ("
                + ", ".join(f"{printable(name)} {count}" for name, count in counts.items())
                + ")"
                for language, counts in turns.by_language.items()
            )
        )
    p50, p95, top = _ms_cells(turns.latency_ms)
    lines.append(f"latency:  p50 {p50}  p95 {p95}  max {top}")
    tokens = turns.total_tokens
    lines.append(
        f"tokens:   p50 {_int_cell(tokens.p50)}  p95 {_int_cell(tokens.p95)}  "
        f"max {_int_cell(tokens.max)}  total {turns.tokens_sum}  "
        f"(unknown in {turns.tokens_unknown} turns)"
    )
    return lines


# Short titles of the per-tool status counts on a narrow terminal (explained in a legend).
_STATUS_SHORT = {
    "success": "OK",
    "business_error": "BIZ",
    "rejected": "REJ",
    "timeout": "T/O",
    "technical_error": "TECH",
}


def _local_time(at: datetime, zone: tzinfo | None) -> str:
    return at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


# The time a row happened: what names it, with the turn it belongs to.
_TIME = Column(title="TIME", priority=9, key=True)
_CHAT = Column(title="CHAT", priority=7, min_width=8)
_TURN = Column(title="TURN", priority=10, key=True)


def knowledge_gap_lines(
    gaps: Sequence[KnowledgeGap], zone: tzinfo | None, *, width: int | None
) -> list[str]:
    """Turns whose searches found nothing: time, chat, turn, searches (a count: never dropped)."""
    columns = (_TIME, _CHAT, _TURN, Column(title="SEARCHES", priority=8, right=True, keep=True))
    rows = [
        (
            _local_time(gap.at, zone),
            printable(gap.chat_id),
            printable(gap.turn_id),
            str(gap.searches),
        )
        for gap in gaps
    ]
    return render(columns, rows, width=width)


def action_lines(
    steps: Sequence[ActionStep], zone: tzinfo | None, *, width: int | None, colour: bool
) -> list[str]:
    """Every action step: time, chat, turn, action, tool, event, code, time to decide, run time."""
    columns = (
        _TIME,
        _CHAT,
        _TURN,
        Column(title="ACTION", priority=4, min_width=8),
        Column(title="TOOL", priority=5, min_width=12),
        Column(title="EVENT", priority=8, coloured=True, key=True),
        Column(title="CODE", priority=6, min_width=6),
        Column(title="DECIDED", priority=3, right=True),
        Column(title="RAN", priority=2, right=True),
    )
    rows = [
        (
            _local_time(step.at, zone),
            printable(step.step.chat_id),
            printable(step.step.turn_id),
            printable(step.step.action_id),
            printable(step.step.tool_name),
            printable(step.step.event),
            printable(step.step.error_code) or "-",
            format_duration_ms(step.step.decide_ms),
            format_duration_ms(step.step.duration_ms),
        )
        for step in steps
    ]
    return render(columns, rows, width=width, colour=colour)


def dead_letter_lines(
    letters: Sequence[DeadLetter], zone: tzinfo | None, *, width: int | None
) -> list[str]:
    """Messages given up: when, update id, incident code, attempts, the last error's kind.

    A confirmed action whose outcome is unknown (its call may have reached the shop's
    MCP server) also says which action, tool and server, after its error.
    """
    columns = (
        Column(title="GIVEN UP", priority=9, key=True),
        Column(title="UPDATE", priority=6),
        Column(title="INCIDENT", priority=10, key=True),
        Column(title="ATTEMPTS", priority=8, right=True, keep=True),
        Column(title="ERROR", priority=7, min_width=12),
    )
    rows = [
        (
            _local_time(datetime.fromtimestamp(letter.given_up_ms / 1000, tz=UTC), zone),
            str(letter.update_id),
            printable(letter.turn_id),
            str(letter.attempts),
            printable(letter.error) + _action_of(letter),
        )
        for letter in letters
    ]
    return render(columns, rows, width=width)


def _action_of(letter: DeadLetter) -> str:
    if letter.kind != "action":
        return ""
    return (
        f" action={printable(letter.action_id or '')}"
        f" tool={printable(letter.tool_name or '')}"
        f" server={printable(letter.server or '')}"
    )


def handoff_lines(
    handoffs: Sequence[OpenHandoff],
    zone: tzinfo | None,
    *,
    width: int | None,
    colour: bool,
) -> list[str]:
    """The open handoffs as a table that fits ``width``: chat, state, opened, trigger, wait."""
    columns = (
        Column(title="CHAT", priority=9, min_width=8),
        Column(title="STATE", priority=8, coloured=True),
        Column(title="OPENED", priority=5),
        Column(title="WAITED", priority=10, right=True),
        Column(title="TRIGGER", priority=7, min_width=7),
    )
    rows = [
        (
            printable(handoff.chat_id),
            printable(handoff.state),
            handoff.opened_at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S"),
            "-"
            if handoff.waiting_seconds is None
            else format_duration_ms(handoff.waiting_seconds * 1000),
            printable("/".join(part for part in (handoff.trigger, handoff.reason) if part)),
        )
        for handoff in handoffs
    ]
    return render(columns, rows, width=width, colour=colour)


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
            "by_language": {
                language: dict(counts) for language, counts in stats.turns.by_language.items()
            },
            "latency_ms": distribution(stats.turns.latency_ms),
            "total_tokens": distribution(stats.turns.total_tokens),
            "tokens_sum": stats.turns.tokens_sum,
            "tokens_unknown": stats.turns.tokens_unknown,
        },
    }


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
    fields = entry.fields
    named = (
        ("trigger", fields.get("trigger", "")),
        ("reason", fields.get("reason", "")),
        ("closed_by", fields.get("closed_by", "")),
        ("action", fields.get("action_id", "")),
    )
    parts = [f"{name}={value}" for name, value in named if value]
    for name in ("wait_ms", "decide_ms"):
        value = number_of(fields.get(name))
        if value is not None:
            parts.append(f"{name.removesuffix('_ms')}={format_duration_ms(value)}")
    return " ".join(parts)


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _format_ms(value: float | None) -> str:
    return format_duration_ms(value)


def _ms_cells(distribution: Distribution) -> tuple[str, str, str]:
    return (
        _format_ms(distribution.p50),
        _format_ms(distribution.p95),
        _format_ms(distribution.max),
    )


def _int_cell(value: float | None) -> str:
    return "-" if value is None else str(int(value))


def analysis_lines(stats: AnalysisStats, *, width: int | None) -> list[str]:
    """``stats``' lines on analysed conversations: per category how many, how many the bot
    settled alone (containment) and how many a person took part in; then sentiment,
    language and failures. None at all when nothing was analysed."""
    if not stats.conversations and not stats.failed:
        return []
    columns = (
        Column(title="CATEGORY", priority=10, key=True),
        Column(title="CONVERSATIONS", priority=9, right=True, short="CONV", keep=True),
        Column(title="BOT ALONE", priority=8, right=True, short="BOT", keep=True),
        Column(title="CONTAINMENT", priority=7, right=True, short="CONT"),
        Column(title="HANDED OFF", priority=6, right=True, short="HUM", keep=True),
        Column(title="CSAT", priority=5, right=True),
    )
    rows = [
        (
            printable(category.category),
            str(category.conversations),
            str(category.contained),
            "-" if category.containment is None else f"{category.containment * 100:.0f}%",
            str(category.handed_off),
            "-" if category.csat is None else f"{category.csat * 100:.0f}%",
        )
        for category in stats.categories
    ]
    lines = [f"analysis: {stats.conversations} conversations analysed"]
    if rows:
        lines.extend(render(columns, rows, width=width))
    for name, counts in (("sentiment", stats.sentiments), ("language", stats.languages)):
        if counts:
            shown = ", ".join(f"{key} {n}" for key, n in sorted(counts.items()))
            lines.append(f"analysis {name}: {shown}")
    if stats.failed:
        shown = ", ".join(f"{key} {n}" for key, n in sorted(stats.failed.items()))
        lines.append(f"analysis failed: {shown}")
    if stats.quality:
        scored = sum(stats.quality.values())
        shown = "  ".join(f"{score}: {stats.quality.get(score, 0)}" for score in range(1, 6))
        lines.append(f"quality of {scored} bot-alone conversations (1-5): {shown}")
    resolved = stats.resolved_by_bot + stats.resolved_by_staff
    if resolved:
        bot_share = stats.resolved_by_bot / resolved * 100
        lines.append(
            f"resolved: by the bot alone {stats.resolved_by_bot} ({bot_share:.0f}%), "
            f"with staff {stats.resolved_by_staff} ({100 - bot_share:.0f}%)"
        )
    return lines


_CRITERIA_SHORT = {
    "resolved": "res",
    "facts_from_tools": "facts",
    "actions_with_press": "press",
    "customer_language": "lang",
    "tone": "tone",
}
_QUALITY_TURNS_SHOWN = 2


def quality_lines(
    entries: Sequence[StreamEntry], zone: tzinfo | None, *, width: int | None
) -> list[str]:
    """``quality``: one row per scored conversation, worst first (never text).

    The failed criteria in short (``res facts press lang tone``) and the two newest
    turn codes, so a row fits 80 columns; ``--json`` has them all.
    """
    columns = (
        _TIME,
        _CHAT,
        Column(title="SCORE", priority=9, right=True, keep=True),
        Column(title="FAILED", priority=7),
        Column(title="NEWEST TURNS", priority=8, short="TURNS", key=True),
    )
    rows = []
    for entry in entries:
        failed = [name for name in entry.fields.get("failed_criteria", "").split(",") if name]
        codes = [code for code in entry.fields.get("turn_codes", "").split(",") if code]
        rows.append(
            (
                _local_time(stream_id_time(entry.entry_id), zone),
                printable(entry.fields.get("chat_id", "")),
                printable(entry.fields.get("quality", "")),
                printable(",".join(_CRITERIA_SHORT.get(name, name) for name in failed)) or "-",
                printable(",".join(codes[-_QUALITY_TURNS_SHOWN:])) or "-",
            )
        )
    return render(columns, rows, width=width)


def analysed_lines(
    entries: Sequence[StreamEntry], zone: tzinfo | None, *, width: int | None
) -> list[str]:
    """``analysis``: one row per analysis (time, chat, its categories; never text)."""
    columns = (
        _TIME,
        _CHAT,
        Column(title="CATEGORY", priority=9, key=True),
        Column(title="SENTIMENT", priority=7, short="SENT"),
        Column(title="URGENCY", priority=6, short="URG"),
        Column(title="LANG", priority=3),
        Column(title="RESOLVED", priority=5, short="RES"),
        Column(title="PERSON", priority=4, short="HUM"),
        Column(title="TURNS", priority=2, right=True, keep=True),
    )
    rows = []
    for entry in entries:
        fields = entry.fields
        event = fields.get("event")
        if event == "analysis_failed":
            category = f"(failed: {printable(fields.get('error', ''))})"
        elif event == "escalation_offered":
            category = "(person offered)"
        else:
            category = printable(fields.get("category", ""))
        rows.append(
            (
                _local_time(stream_id_time(entry.entry_id), zone),
                printable(fields.get("chat_id", "")),
                category,
                printable(fields.get("sentiment", "")) or "-",
                printable(fields.get("urgency", "")) or "-",
                printable(fields.get("language", "")) or "-",
                {"1": "yes", "0": "no"}.get(fields.get("resolved", ""), "-"),
                {"1": "yes", "0": "no"}.get(fields.get("person", ""), "-"),
                printable(fields.get("turns", "")) or "-",
            )
        )
    return render(columns, rows, width=width)
