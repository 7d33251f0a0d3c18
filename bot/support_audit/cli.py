"""``support-audit`` / ``python -m bot audit``: support staff read the audit stream.

Commands: ``tail`` (newest entries, ``--follow`` for new ones), ``turn`` (one
incident), ``stats`` (per tool and per turn), ``knowledge-gaps`` (turns whose
help-center searches found nothing), ``export`` (every entry once,
through a consumer group), ``pseudonym`` (the stream's name for a chat) and
``dead-letters`` (messages given up after ``JOB_MAX_ATTEMPTS``).
Only the Redis and audit settings are read, so no bot token or model key is needed.
"""

import argparse
import contextlib
import json
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import NoReturn, TextIO, TypeVar

import redis
from pydantic import ValidationError

from bot.audit.actions import action_stats, action_steps, step_json
from bot.audit.actions import stats_json as action_stats_json
from bot.audit.actions import stats_lines as action_stats_lines
from bot.audit.analysis import analysis_stats
from bot.audit.analysis import stats_json as analysis_stats_json
from bot.audit.assist import assist_stats
from bot.audit.assist import stats_json as assist_stats_json
from bot.audit.assist import stats_lines as assist_stats_lines
from bot.audit.feedback import feedback_stats
from bot.audit.feedback import stats_json as feedback_stats_json
from bot.audit.feedback import stats_lines as feedback_stats_lines
from bot.audit.handoffs import handoff_stats, open_handoffs
from bot.audit.knowledge_gaps import knowledge_gaps, search_share
from bot.audit.pseudonym import chat_pseudonym, is_pseudonym
from bot.audit.schema import TYPE, EntryType
from bot.audit.stats import compute_stats
from bot.audit.stream import (
    AuditStreamError,
    EntryFilter,
    StreamEntry,
    stream_id_at,
    stream_id_time,
)
from bot.queue.dead_letters import drop_dead_letter, read_dead_letters, retry_dead_letter
from bot.settings import AuditSettings, HandoffSettings, RedisSettings
from bot.storage.connection import RedisSetupError, SyncRedisClient, describe_target, sync_client
from bot.storage.keys import RedisKeys
from bot.support_audit.export import StreamExporter
from bot.support_audit.lookup import AuditIndex
from bot.support_audit.reader import AuditStreamReader
from bot.support_audit.render import (
    EntryTable,
    action_lines,
    analysed_lines,
    analysis_lines,
    dead_letter_lines,
    field_lines,
    handoff_lines,
    json_line,
    knowledge_gap_lines,
    print_json_lines,
    printable,
    quality_lines,
    stats_json,
    stats_lines,
)
from bot.support_audit.table import colour_enabled, terminal_width, wrap_lines
from bot.support_audit.time_spec import TimeSpecError, parse_since
from bot.tryout.local_redis import LocalRedisError, redis_or_private
from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH

PROGRAM = "support-audit"
MIN_HMAC_KEY_CHARS = 16
# A turn id (turn.ids) standing alone, not inside a longer run of letters and digits.
_INCIDENT_CODE = re.compile(rf"(?<![A-Z0-9])[{TURN_ID_ALPHABET}]{{{TURN_ID_LENGTH}}}(?![A-Z0-9])")
_Row = TypeVar("_Row")
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    """Bad command-line arguments (argparse would print usage and exit)."""


class _Parser(argparse.ArgumentParser):
    # argparse prints a usage block and exits; staff get one line and main() keeps control.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


@dataclass(frozen=True, slots=True)
class _Context:
    """What every command needs, built once by :func:`main`."""

    client: SyncRedisClient
    stream: str
    hmac_key: bytes | None
    zone: tzinfo | None
    out: TextIO
    now: datetime
    block_ms: int
    key_prefix: str = "support"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 failure, 2 bad arguments or settings)."""
    try:
        args = _build_parser().parse_args(argv)
        redis_settings = RedisSettings()
        audit_settings = AuditSettings()
    except _UsageError as error:
        return _fail(f"{error} (see {PROGRAM} --help)", EXIT_USAGE)
    except SystemExit as exit_request:  # --help prints and asks to exit
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    except ValidationError as error:
        return _fail(f"bad settings: {_first_error(error)}", EXIT_USAGE)
    try:
        # Without REDIS_URL: the try-out's private server (the console's data in .data/).
        with redis_or_private(redis_settings) as (redis_settings, _):
            return _connected(args, redis_settings, audit_settings)
    except LocalRedisError as error:
        return _fail(str(error), EXIT_FAILURE)


def _connected(
    args: argparse.Namespace, redis_settings: RedisSettings, audit_settings: AuditSettings
) -> int:
    """Run the command against the Redis of ``redis_settings``."""
    try:
        # No retries: a command line should fail at once, not after a pause.
        client = sync_client(redis_settings)
    except RedisSetupError as error:
        return _fail(f"bad settings: {error}", EXIT_USAGE)
    hmac_key = audit_settings.hmac_key
    context = _Context(
        client=client,
        stream=getattr(args, "stream", None) or audit_settings.stream,
        hmac_key=hmac_key.get_secret_value().encode("utf-8") if hmac_key is not None else None,
        zone=UTC if getattr(args, "utc", False) else None,
        out=sys.stdout,
        now=datetime.now(UTC),
        # Block a little under the socket timeout so that a quiet stream is not a timeout.
        block_ms=max(int(min(1.0, redis_settings.socket_timeout_seconds / 2) * 1000), 1),
        key_prefix=redis_settings.key_prefix,
    )
    with client:
        return _run(args.run, args, context, describe_target(redis_settings))


def _run(
    command: Callable[[argparse.Namespace, _Context], int],
    args: argparse.Namespace,
    context: _Context,
    shown_url: str,
) -> int:
    """Run ``command`` and turn every expected failure into one line and an exit status."""
    try:
        return command(args, context)
    except KeyboardInterrupt:
        # Ctrl-C is how staff end --follow: a normal end, not a failure.
        return EXIT_OK
    except (redis.ConnectionError, redis.TimeoutError) as error:
        return _fail(f"cannot reach Redis at {shown_url}: {_one_line(error)}", EXIT_FAILURE)
    except (AuditStreamError, TimeSpecError) as error:
        return _fail(str(error), EXIT_FAILURE)
    except redis.RedisError as error:
        return _fail(f"Redis refused the command: {_one_line(error)}", EXIT_FAILURE)
    except BrokenPipeError:
        # The reader of our output went away (``| head``): nothing more to say, and
        # stdout goes to /dev/null so that the interpreter's final flush stays quiet.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _build_parser() -> _Parser:
    # SUPPRESS defaults: the options may come before or after the command, and a
    # subcommand's default must not overwrite what was given before it.
    common = _Parser(add_help=False)
    _add_common_options(common)

    parser = _Parser(
        prog=PROGRAM,
        description="Read the support bot's audit stream (REDIS_URL, AUDIT_STREAM).",
    )
    _add_common_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    tail = commands.add_parser(
        "tail", parents=[common], help="newest entries as a table (or JSON lines)"
    )
    tail.add_argument("-n", type=_positive_int, default=20, help="how many entries (default 20)")
    tail.add_argument("--follow", "-f", action="store_true", help="then print new entries")
    tail.add_argument("--chat", help="only this chat (real id or pseudonym)")
    tail.add_argument("--tool", help="only this tool (and turns that called it)")
    tail.add_argument("--status", help="only this tool status or turn outcome")
    tail.add_argument(
        "--type", choices=("tool", "turn", "handoff", "action", "link"), dest="entry_type"
    )
    tail.add_argument("--since", help="only entries after this: 15m, 1h, 2d, 1w or ISO-8601")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.set_defaults(run=_tail)

    turn = commands.add_parser(
        "turn", parents=[common], help="everything recorded for one turn (incident code)"
    )
    turn.add_argument(
        "turn_id",
        help="the incident code the customer was shown (pasted text around it is fine)",
    )
    turn.add_argument("--since", help="look no further back than this (faster on long streams)")
    turn.add_argument("--json", action="store_true", help="one JSON object per line")
    turn.set_defaults(run=_turn)

    # Reports over a period: the name, the help, how far back by default, the command.
    reports: tuple[tuple[str, str, str, Callable[[argparse.Namespace, _Context], int]], ...] = (
        ("stats", "per tool and per turn: counts, errors, latency", "24h", _stats),
        ("handoffs", "conversations handed to staff now, and their wait", "7d", _handoffs),
        (
            "actions",
            "steps of actions customers confirm (write tools); never their arguments",
            "24h",
            _actions,
        ),
        (
            "knowledge-gaps",
            "turns whose help-center searches found nothing (the articles to write)",
            "7d",
            _knowledge_gaps,
        ),
        (
            "analysis",
            "analysed conversations: category, sentiment, urgency, resolved; never text",
            "7d",
            _analysis,
        ),
        (
            "quality",
            "conversations the bot handled alone, by quality score (worst first)",
            "7d",
            _quality,
        ),
    )
    for name, help_text, since, run in reports:
        report = commands.add_parser(name, parents=[common], help=help_text)
        report.add_argument("--since", default=since, help=f"look this far back (default {since})")
        # stats prints one object; the others a row a line.
        json_help = "one JSON object" if name == "stats" else "one JSON object per line"
        report.add_argument("--json", action="store_true", help=json_help)
        if name == "analysis":
            report.add_argument("--category", help="only this category (e.g. return)")
        if name == "quality":
            report.add_argument(
                "--worst", type=_positive_int, default=20, help="how many (default 20)"
            )
        report.set_defaults(run=run)

    export = commands.add_parser(
        "export", parents=[common], help="every entry exactly once as JSON lines (consumer group)"
    )
    export.add_argument("--group", required=True, help="consumer group (created if missing)")
    export.add_argument(
        "--consumer", default=socket.gethostname(), help="consumer name (default: host name)"
    )
    export.add_argument(
        "--claim-idle-ms",
        type=_non_negative_int,
        default=60_000,
        help="reclaim entries another run left unacknowledged this long (default 60000)",
    )
    export.add_argument("--follow", "-f", action="store_true", help="keep exporting until Ctrl-C")
    export.set_defaults(run=_export)

    pseudonym = commands.add_parser(
        "pseudonym", parents=[common], help="the pseudonym of a chat id (needs AUDIT_HMAC_KEY)"
    )
    pseudonym.add_argument("chat_id")
    pseudonym.set_defaults(run=_pseudonym)

    dead_letters = commands.add_parser(
        "dead-letters",
        parents=[common],
        help="messages given up after JOB_MAX_ATTEMPTS (ids and the error kind, never text)",
    )
    dead_letters.add_argument(
        "-n", type=_positive_int, default=50, help="how many, newest first (default 50)"
    )
    dead_letters.add_argument("--json", action="store_true", help="one JSON object per line")
    dead_letters.set_defaults(run=_dead_letters)
    letter_actions = dead_letters.add_subparsers(dest="letter_action", parser_class=_Parser)
    retry = letter_actions.add_parser(
        "retry", parents=[common], help="queue the message again in its chat (a new incident code)"
    )
    retry.add_argument("incident", help="the dead letter's incident code")
    retry.set_defaults(run=_retry_dead_letter)
    drop = letter_actions.add_parser(
        "drop", parents=[common], help="forget the dead letter and the message kept with it"
    )
    drop.add_argument("incident", help="the dead letter's incident code")
    drop.set_defaults(run=_drop_dead_letter)
    return parser


# ---------------------------------------------------------------- commands


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stream",
        default=argparse.SUPPRESS,
        help="stream to read (default: AUDIT_STREAM, support:audit)",
    )
    parser.add_argument(
        "--utc",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show times in UTC, not local time (JSON lines, and so export, are always UTC)",
    )


def _tail(args: argparse.Namespace, context: _Context) -> int:
    reader = _checked_reader(context)
    entry_filter = EntryFilter(
        chat_ids=_chat_forms(args.chat, context.hmac_key),
        tool=args.tool,
        status=args.status,
        entry_type=args.entry_type,
    )
    since_id = _since_id(args, context)
    # The newest id is taken first so that --follow continues exactly where the tail ended.
    last_id = reader.last_id()
    index = AuditIndex(context.client, context.stream)
    indexed = index.covers(since_id)
    if indexed and not args.follow and _unknown_filter(index, args):
        return _fail(f"nothing found: {_filter_text(args)}", EXIT_FAILURE)
    if indexed and entry_filter.chat_ids:
        entries = index.chat(entry_filter.chat_ids, args.n, entry_filter, since_id=since_id)
    else:
        entries = reader.newest(args.n, entry_filter, since_id=since_id, until_id=last_id)
    if not entries and not args.follow and (args.chat or args.tool or args.status):
        return _fail(f"nothing found: {_filter_text(args)}", EXIT_FAILURE)
    table = EntryTable(
        context.zone,
        fixed=args.follow,
        width=terminal_width(context.out),
        colour=colour_enabled(context.out),
    )
    if args.json:
        print_json_lines(entries, context.out)
    else:
        table.print(entries, context.out, header=True)
    if not args.follow:
        return EXIT_OK
    context.out.flush()
    for entry in reader.follow(last_id, entry_filter, block_ms=context.block_ms):
        if args.json:
            print_json_lines([entry], context.out)
        else:
            table.print([entry], context.out, header=False)
        context.out.flush()
    return EXIT_OK


def _turn(args: argparse.Namespace, context: _Context) -> int:
    reader = _checked_reader(context)
    since_id = _since_id(args, context)
    turn_id = incident_code(args.turn_id)
    index = AuditIndex(context.client, context.stream)
    entries = index.turn(turn_id, since_id=since_id)
    if not entries and not index.covers(since_id):
        # Written before the index existed: only the stream's older part is read.
        entries = reader.turn(turn_id, since_id=since_id, until_id=index.start_id())
    if not entries:
        return _fail(
            f"no entries for turn {turn_id!r} in {context.stream!r} "
            "(mistyped, or older than the stream keeps; if Redis was down then, the bot "
            "writes the entries when Redis is back, and until then they are in the bot's log: "
            f"grep it for 'audit stream' and {turn_id})",
            EXIT_FAILURE,
        )
    if args.json:
        print_json_lines(entries, context.out)
        return EXIT_OK
    table = EntryTable(
        context.zone, width=terminal_width(context.out), colour=colour_enabled(context.out)
    )
    table.print(entries, context.out, header=True)
    summary = next((entry for entry in entries if entry.turn is not None), None)
    print(file=context.out)
    if summary is None:
        print(
            "no turn entry: the turn was still running, or its end was not recorded",
            file=context.out,
        )
        return EXIT_OK
    for line in field_lines(summary, terminal_width(context.out)):
        print(line, file=context.out)
    return EXIT_OK


def _stats(args: argparse.Namespace, context: _Context) -> int:
    period = _period(args, context)
    index = AuditIndex(context.client, context.stream)
    if index.covers(period.since_id):
        rolled = index.stats(period.since)
        stats, handoff, searches = rolled.stats, rolled.handoffs, rolled.searches
        actions, read = rolled.actions, rolled.entries
        feedback, analysis = rolled.feedback, rolled.analysis
        assist = rolled.assist
    else:
        counted = _Counting(period.entries())
        entries = list(counted)
        stats = compute_stats(entries)
        handoff = handoff_stats(entries)
        searches = search_share(entries)
        actions, read = action_stats(entries), counted.count
        feedback = feedback_stats(entries)
        analysis = analysis_stats(entries)
        assist = assist_stats(entries)
    if args.json:
        report = stats_json(stats, period.since, read)
        report["knowledge"] = {
            "searches": searches.searches,
            "empty": searches.empty,
            "empty_rate": searches.empty_rate,
        }
        report["actions"] = action_stats_json(actions)
        report["feedback"] = feedback_stats_json(feedback)
        report["analysis"] = analysis_stats_json(analysis)
        report["assist"] = assist_stats_json(assist)
        report["handoffs"] = {
            "opened": handoff.opened,
            "chats": handoff.chats,
            "rate": handoff.rate,
            "reasons": dict(handoff.reasons),
            "first_reply_ms": {
                "p50": handoff.first_reply_ms.p50,
                "p95": handoff.first_reply_ms.p95,
                "max": handoff.first_reply_ms.max,
            },
        }
        print(json.dumps(report, ensure_ascii=False), file=context.out)
        return EXIT_OK
    width = terminal_width(context.out)
    lines = stats_lines(stats, period.since, read, context.zone, width)
    empty = "-" if searches.empty_rate is None else f"{searches.empty_rate * 100:.1f}%"
    lines.append(
        f"help center: {searches.searches} searches, {searches.empty} found nothing ({empty}); "
        f"see {PROGRAM} knowledge-gaps"
    )
    rate = "-" if handoff.rate is None else f"{handoff.rate * 100:.1f}%"
    wait = handoff.first_reply_ms
    lines.append(
        f"handoffs: {handoff.opened} opened in {handoff.chats} chats ({rate}); "
        f"first staff reply: p50 {_seconds(wait.p50)}  p95 {_seconds(wait.p95)}  "
        f"max {_seconds(wait.max)}" + _reasons(handoff.reasons)
    )
    lines.extend(assist_stats_lines(assist))
    lines.extend(action_stats_lines(actions))
    lines.extend(feedback_stats_lines(feedback))
    for line in wrap_lines(lines, width):
        print(line, file=context.out)
    # A table of its own: already fitted to the width (wrapping would break its columns).
    for line in analysis_lines(analysis, width=width):
        print(line, file=context.out)
    return EXIT_OK


def _analysis(args: argparse.Namespace, context: _Context) -> int:
    category = args.category
    analysed = [
        entry
        for entry in _period(args, context).entries()
        if entry.fields.get(TYPE) == EntryType.ANALYSIS
        and (category is None or entry.fields.get("category") == category)
    ]
    return _report(
        args,
        context,
        analysed,
        json_row=lambda entry: {
            "at": stream_id_time(entry.entry_id).isoformat(timespec="milliseconds"),
            **entry.fields,
        },
        empty="no analyses" + (f" in category {category}" if category else ""),
        lines=lambda: analysed_lines(analysed, context.zone, width=terminal_width(context.out)),
    )


def _quality(args: argparse.Namespace, context: _Context) -> int:
    scored = [
        entry
        for entry in _period(args, context).entries()
        if entry.fields.get(TYPE) == EntryType.ANALYSIS and entry.fields.get("quality")
    ]
    # Worst first; among equal scores the newest first (staff read those first).
    scored.sort(key=lambda entry: entry.entry_id, reverse=True)
    scored.sort(key=lambda entry: int(entry.fields.get("quality", "9") or "9"))
    worst = scored[: args.worst]
    return _report(
        args,
        context,
        worst,
        json_row=lambda entry: {
            "at": stream_id_time(entry.entry_id).isoformat(timespec="milliseconds"),
            "chat_id": entry.fields.get("chat_id", ""),
            "quality": int(entry.fields.get("quality", "0") or "0"),
            "failed_criteria": [c for c in entry.fields.get("failed_criteria", "").split(",") if c],
            "turn_codes": [c for c in entry.fields.get("turn_codes", "").split(",") if c],
        },
        empty="no scored conversations",
        lines=lambda: quality_lines(worst, context.zone, width=terminal_width(context.out)),
    )


def _knowledge_gaps(args: argparse.Namespace, context: _Context) -> int:
    gaps = knowledge_gaps(_period(args, context).entries())
    return _report(
        args,
        context,
        gaps,
        json_row=lambda gap: {
            "at": gap.at.isoformat(timespec="milliseconds"),
            "chat_id": gap.chat_id,
            "turn_id": gap.turn_id,
            "searches": gap.searches,
        },
        empty="no searches without an article",
        lines=lambda: knowledge_gap_lines(gaps, context.zone, width=terminal_width(context.out)),
    )


def _checked_reader(context: _Context) -> AuditStreamReader:
    """The stream's reader, once the stream is known to exist."""
    reader = AuditStreamReader(context.client, context.stream)
    reader.check()
    return reader


def _since_id(args: argparse.Namespace, context: _Context) -> str:
    """Where an optional ``--since`` starts in the stream (``-``, its start, without it)."""
    return stream_id_at(parse_since(args.since, context.now)) if args.since else "-"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Period:
    """A report's checked stream and the start of its ``--since`` period."""

    reader: AuditStreamReader
    since: datetime

    @property
    def since_id(self) -> str:
        """The smallest stream id in the period."""
        return stream_id_at(self.since)

    def entries(self) -> Iterator[StreamEntry]:
        """Every entry in the period, oldest first."""
        return self.reader.scan(since_id=self.since_id)


def _period(args: argparse.Namespace, context: _Context) -> _Period:
    """The checked stream and the start of the report's ``--since`` period."""
    return _Period(reader=_checked_reader(context), since=parse_since(args.since, context.now))


def _report(
    args: argparse.Namespace,
    context: _Context,
    rows: Sequence[_Row],
    *,
    json_row: Callable[[_Row], Mapping[str, object]],
    empty: str,
    lines: Callable[[], Iterable[str]],
) -> int:
    """Print ``rows``: a JSON object a line with ``--json``, else ``empty`` or the table's lines."""
    if args.json:
        for row in rows:
            print(json.dumps(json_row(row), ensure_ascii=False), file=context.out)
    elif not rows:
        print(empty, file=context.out)
    else:
        for line in lines():
            print(line, file=context.out)
    return EXIT_OK


def _reasons(reasons: Mapping[str, int]) -> str:
    """``; by reason: customer_asked 3, ...`` (the most first), or nothing without any."""
    if not reasons:
        return ""
    ordered = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    return "; by reason: " + ", ".join(f"{reason} {count}" for reason, count in ordered)


def _seconds(value_ms: float | None) -> str:
    return "-" if value_ms is None else f"{value_ms / 1000:.0f}s"


def _actions(args: argparse.Namespace, context: _Context) -> int:
    steps = action_steps(_period(args, context).entries())
    width, colour = terminal_width(context.out), colour_enabled(context.out)
    return _report(
        args,
        context,
        steps,
        json_row=step_json,
        empty="no actions",
        lines=lambda: action_lines(steps, context.zone, width=width, colour=colour),
    )


def _handoffs(args: argparse.Namespace, context: _Context) -> int:
    period = _period(args, context)
    staff_chat_id = _staff_chat_id()
    index = AuditIndex(context.client, context.stream)
    if staff_chat_id is not None and index.covers():
        current = index.open_handoffs(
            RedisKeys(context.key_prefix),
            staff_chat_id,
            lambda chat: _chat_forms(chat, context.hmac_key),
            context.now,
        )
    else:
        # Without STAFF_CHAT_ID the staff group's set is unknown: the stream tells.
        current = open_handoffs(period.entries(), context.now)
    width, colour = terminal_width(context.out), colour_enabled(context.out)
    return _report(
        args,
        context,
        current,
        json_row=lambda handoff: {
            "chat_id": handoff.chat_id,
            "state": handoff.state,
            "trigger": handoff.trigger,
            "reason": handoff.reason,
            "opened_at": handoff.opened_at.isoformat(),
            "waiting_seconds": handoff.waiting_seconds,
        },
        empty="no open handoffs",
        lines=lambda: handoff_lines(current, context.zone, width=width, colour=colour),
    )


def _export(args: argparse.Namespace, context: _Context) -> int:
    exporter = StreamExporter(
        context.client,
        context.stream,
        group=args.group,
        consumer=args.consumer,
        claim_idle_ms=args.claim_idle_ms,
    )
    exporter.ensure_group()
    out = context.out

    def emit(entry: StreamEntry) -> None:
        out.write(json_line(entry) + "\n")
        # Flushed before the entry is acknowledged: an acknowledged entry has left the process.
        out.flush()

    try:
        exporter.run(emit, follow=args.follow, block_ms=context.block_ms)
    except BrokenPipeError:
        # Unlike a tail cut short by ``| head``, a receiver that went away is a failed
        # delivery: the entry being written stays pending for the next run.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail(
            "the receiver closed the output; unexported entries stay for the next run",
            EXIT_FAILURE,
        )
    return EXIT_OK


def _pseudonym(args: argparse.Namespace, context: _Context) -> int:
    if context.hmac_key is None:
        return _fail("AUDIT_HMAC_KEY is not set: there is no pseudonym to compute", EXIT_USAGE)
    if len(context.hmac_key.decode("utf-8")) < MIN_HMAC_KEY_CHARS:
        # The bot refuses such a key too: a pseudonym under it would match nothing it wrote.
        return _fail(f"AUDIT_HMAC_KEY must be at least {MIN_HMAC_KEY_CHARS} characters", EXIT_USAGE)
    print(chat_pseudonym(args.chat_id, context.hmac_key), file=context.out)
    return EXIT_OK


def _dead_letters(args: argparse.Namespace, context: _Context) -> int:
    letters = read_dead_letters(context.client, RedisKeys(context.key_prefix), args.n)

    return _report(
        args,
        context,
        letters,
        json_row=lambda letter: {
            "given_up_at": _from_ms(letter.given_up_ms).isoformat(),
            "update_id": letter.update_id,
            "turn_id": letter.turn_id,
            "attempts": letter.attempts,
            "error": letter.error,
            "queued_at": _from_ms(letter.enqueued_ms).isoformat(),
            # An action whose outcome is unknown says which one (a job's letter is as before).
            **(
                {
                    "kind": letter.kind,
                    "action_id": letter.action_id,
                    "tool_name": letter.tool_name,
                    "server": letter.server,
                }
                if letter.kind == "action"
                else {}
            ),
        },
        empty="no dead letters",
        lines=lambda: dead_letter_lines(letters, context.zone, width=terminal_width(context.out)),
    )


def _retry_dead_letter(args: argparse.Namespace, context: _Context) -> int:
    code = incident_code(args.incident)
    result = retry_dead_letter(context.client, RedisKeys(context.key_prefix), code)
    if result.verdict == "unknown":
        return _fail(f"no dead letter {printable(code)}", EXIT_FAILURE)
    if result.verdict == "outcome_unknown":
        return _fail(
            f"dead letter {printable(code)} is a confirmed action whose outcome is unknown: "
            "it is never run again; check it in the shop, tell the customer, then drop it",
            EXIT_FAILURE,
        )
    if result.verdict == "not_retryable":
        return _fail(
            f"dead letter {printable(code)} was kept without its message (an older version): "
            "it cannot be retried; drop it",
            EXIT_FAILURE,
        )
    print(
        f"dead letter {code} queued again as {result.turn_id} "
        f"(support-audit turn {result.turn_id})",
        file=context.out,
    )
    return EXIT_OK


def _drop_dead_letter(args: argparse.Namespace, context: _Context) -> int:
    code = incident_code(args.incident)
    if not drop_dead_letter(context.client, RedisKeys(context.key_prefix), code):
        return _fail(f"no dead letter {printable(code)}", EXIT_FAILURE)
    print(f"dead letter {code} dropped", file=context.out)
    return EXIT_OK


def _from_ms(value_ms: int) -> datetime:
    return datetime.fromtimestamp(value_ms / 1000, UTC)


# ---------------------------------------------------------------- small helpers


def incident_code(text: str) -> str:
    """The turn id in what staff pasted: ``Код обращения: K7M2QX9PAF`` gives ``K7M2QX9PAF``.

    The last 10-character run of the turn-id alphabet wins; text without one is
    taken as typed (upper-cased), so the not-found line shows what was searched.
    """
    codes = _INCIDENT_CODE.findall(text.upper())
    return codes[-1] if codes else text.strip().upper()


class _Counting:
    """Passes entries through and counts them (stats say how many entries they read)."""

    def __init__(self, entries: Iterable[StreamEntry]) -> None:
        self._entries = entries
        self.count = 0

    def __iter__(self) -> Iterator[StreamEntry]:
        for entry in self._entries:
            self.count += 1
            yield entry


def _staff_chat_id() -> int | None:
    """The staff group (``STAFF_CHAT_ID``) whose open handoffs to list, if set and valid."""
    try:
        return HandoffSettings().staff_chat_id
    except ValidationError:
        return None


def _unknown_filter(index: AuditIndex, args: argparse.Namespace) -> bool:
    """Whether a ``--tool`` or ``--status`` names nothing the index has seen."""
    if args.tool and not index.seen("tool", args.tool):
        return True
    status = args.status
    return bool(status) and not (index.seen("status", status) or index.seen("outcome", status))


def _filter_text(args: argparse.Namespace) -> str:
    """The filters as typed, for the "nothing found" line."""
    parts = [
        f"--{name} {value}"
        for name, value in (("chat", args.chat), ("tool", args.tool), ("status", args.status))
        if value
    ]
    return "no entries match " + " ".join(parts)


def _chat_forms(chat: str | None, hmac_key: bytes | None) -> frozenset[str]:
    """Every form ``chat`` may have in the stream: as typed, and its pseudonym if a key is set."""
    if not chat:
        return frozenset()
    forms = {chat}
    if hmac_key is not None and not is_pseudonym(chat):
        forms.add(chat_pseudonym(chat, hmac_key))
    return frozenset(forms)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    names = ", ".join(str(part) for part in first.get("loc", ()))
    return f"{names}: {first['msg']}" if names else str(first["msg"])


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _fail(message: str, status: int) -> int:
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
