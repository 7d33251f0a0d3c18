"""Reading the audit stream for support staff: entries, filters, time ranges, stats, export.

Everything that does not talk to Redis is a pure function of its arguments;
the two classes that do (:class:`AuditStreamReader`, :class:`StreamExporter`)
take an injected synchronous client created with ``decode_responses=True``.
"""

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis

TOOL_STATUSES = ("success", "business_error", "rejected", "timeout", "technical_error")
"""Every tool status, in the order tables show them."""

FAILED_STATUSES = frozenset({"rejected", "timeout", "technical_error"})
"""Statuses that count as errors in stats: a business error is an answer, not a malfunction."""

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class AuditStreamError(RuntimeError):
    """The stream cannot be read as an audit stream; ``str()`` is the one line staff see."""


class TimeSpecError(ValueError):
    """A ``--since`` value that is neither a duration nor an ISO-8601 time."""


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One stream entry: its id and its flat string fields."""

    entry_id: str
    fields: Mapping[str, str]

    @property
    def type(self) -> str:
        """``tool`` or ``turn``."""
        return self.fields.get("type", "")

    @property
    def recorded_at(self) -> datetime:
        """When Redis appended the entry (the millisecond part of its id), in UTC."""
        return stream_id_time(self.entry_id)

    @property
    def event_time(self) -> datetime:
        """When it happened: a tool's ``started_at``, else the time it was recorded."""
        started_at = self.fields.get("started_at", "")
        if started_at:
            try:
                parsed = datetime.fromisoformat(started_at)
            except ValueError:
                return self.recorded_at
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        return self.recorded_at

    def get(self, name: str) -> str:
        """A field's value, ``""`` when absent."""
        return self.fields.get(name, "")

    def to_json_dict(self) -> dict[str, str]:
        """The entry for JSON lines: ``id``, ``recorded_at`` (ISO-8601 UTC), then every field."""
        return {
            "id": self.entry_id,
            "recorded_at": self.recorded_at.isoformat(timespec="milliseconds"),
            **self.fields,
        }


@dataclass(frozen=True, slots=True)
class EntryFilter:
    """Which entries a command shows; an empty filter lets every entry through.

    ``chat_ids`` holds every form the chat may have in the stream (the real id
    and, when a key is configured, its pseudonym). ``tool`` matches a tool
    entry's name and a turn entry that called that tool; ``status`` matches a
    tool entry's status and a turn entry's outcome.
    """

    chat_ids: frozenset[str] = frozenset()
    tool: str | None = None
    status: str | None = None
    entry_type: str | None = None

    def matches(self, entry: StreamEntry) -> bool:
        """Whether ``entry`` passes every condition."""
        if self.entry_type is not None and entry.type != self.entry_type:
            return False
        if self.chat_ids and entry.get("chat_id") not in self.chat_ids:
            return False
        if self.tool is not None:
            if entry.type == "turn":
                if self.tool not in entry.get("tool_names").split(","):
                    return False
            elif entry.get("tool_name") != self.tool:
                return False
        if self.status is not None:
            value = entry.get("outcome") if entry.type == "turn" else entry.get("status")
            if value != self.status:
                return False
        return True


def parse_since(text: str, now: datetime) -> datetime:
    """``1h``, ``30m``, ``2d``, ``1w``, ``45s`` before ``now``, or an ISO-8601 time.

    An ISO time without an offset is local time (what staff read on the table).
    """
    match = _RELATIVE.match(text)
    if match is not None:
        amount, unit = int(match.group(1)), match.group(2)
        return now - timedelta(**{_UNITS[unit]: amount})
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError as error:
        raise TimeSpecError(
            f"--since {text!r}: use a duration such as 15m, 1h, 2d, 1w "
            "or an ISO-8601 time such as 2026-12-01T09:30"
        ) from error
    # astimezone() on a naive time reads it as local time.
    return parsed.astimezone(UTC)


def stream_id_at(moment: datetime) -> str:
    """The smallest stream id at or after ``moment``."""
    return f"{max(math.ceil(moment.timestamp() * 1000), 0)}-0"


def stream_id_time(entry_id: str) -> datetime:
    """The time encoded in a stream id, in UTC."""
    milliseconds = int(entry_id.split("-", 1)[0])
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)


def parse_entries(raw: object) -> list[StreamEntry]:
    """Entries from an ``XRANGE``/``XREVRANGE``-shaped reply (``[(id, fields), ...]``).

    ``XAUTOCLAIM`` may report an id whose entry was trimmed meanwhile with no
    fields; such ids are skipped.
    """
    entries: list[StreamEntry] = []
    for item in _as_list(raw):
        entry_id, fields = item
        if fields:
            entries.append(StreamEntry(entry_id=str(entry_id), fields=dict(fields)))
    return entries


def parse_read_reply(raw: object, stream: str) -> list[StreamEntry]:
    """Entries of ``stream`` in an ``XREAD``/``XREADGROUP`` reply (RESP2 list or RESP3 map)."""
    if isinstance(raw, dict):
        found = raw.get(stream)
        if found is None:
            return []
        # RESP3 replies carry the entries in a one-element list.
        return parse_entries(found[0] if found and isinstance(found[0], list) else found)
    entries: list[StreamEntry] = []
    for name, items in _as_list(raw):
        if name == stream:
            entries.extend(parse_entries(items))
    return entries


def _as_list(raw: object) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AuditStreamError(f"unexpected reply from Redis: {type(raw).__name__}")
    return raw


# ---------------------------------------------------------------- statistics


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values (``None`` for no values)."""
    if not sorted_values:
        return None
    rank = max(math.ceil(fraction * len(sorted_values)), 1)
    return sorted_values[rank - 1]


@dataclass(frozen=True, slots=True)
class Distribution:
    """p50, p95 and max of some measurements (all ``None`` when there were none)."""

    count: int
    p50: float | None
    p95: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> "Distribution":
        """The distribution of ``values``."""
        ordered = sorted(values)
        return cls(
            count=len(ordered),
            p50=percentile(ordered, 0.50),
            p95=percentile(ordered, 0.95),
            max=ordered[-1] if ordered else None,
        )


@dataclass(frozen=True, slots=True)
class ToolStats:
    """One tool's executions."""

    tool_name: str
    count: int
    by_status: Mapping[str, int]
    error_rate: float
    duration_ms: Distribution


@dataclass(frozen=True, slots=True)
class TurnStats:
    """Every turn's outcome, latency and tokens (tokens only where known)."""

    count: int
    by_outcome: Mapping[str, int]
    latency_ms: Distribution
    total_tokens: Distribution
    tokens_sum: int
    tokens_unknown: int


@dataclass(frozen=True, slots=True)
class AuditStats:
    """What ``audit stats`` shows."""

    tools: tuple[ToolStats, ...]
    turns: TurnStats


def compute_stats(entries: Iterable[StreamEntry]) -> AuditStats:
    """Per tool: count by status, error rate, duration; per turn: outcomes, latency, tokens."""
    tool_statuses: dict[str, Counter[str]] = {}
    tool_durations: dict[str, list[float]] = {}
    outcomes: Counter[str] = Counter()
    latencies: list[float] = []
    tokens: list[float] = []
    tokens_unknown = 0
    for entry in entries:
        if entry.type == "tool":
            name = entry.get("tool_name")
            tool_statuses.setdefault(name, Counter())[entry.get("status")] += 1
            duration = _number(entry.get("duration_ms"))
            if duration is not None:
                tool_durations.setdefault(name, []).append(duration)
        elif entry.type == "turn":
            outcomes[entry.get("outcome")] += 1
            latency = _number(entry.get("latency_ms"))
            if latency is not None:
                latencies.append(latency)
            total = _number(entry.get("total_tokens"))
            if total is None:
                tokens_unknown += 1
            else:
                tokens.append(total)
    tools = tuple(
        ToolStats(
            tool_name=name,
            count=sum(statuses.values()),
            by_status=dict(statuses),
            error_rate=sum(statuses[s] for s in FAILED_STATUSES) / sum(statuses.values()),
            duration_ms=Distribution.of(tool_durations.get(name, [])),
        )
        for name, statuses in sorted(tool_statuses.items())
    )
    turns = TurnStats(
        count=sum(outcomes.values()),
        by_outcome=dict(sorted(outcomes.items(), key=lambda item: (-item[1], item[0]))),
        latency_ms=Distribution.of(latencies),
        total_tokens=Distribution.of(tokens),
        tokens_sum=int(sum(tokens)),
        tokens_unknown=tokens_unknown,
    )
    return AuditStats(tools=tools, turns=turns)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- reading


class AuditStreamReader:
    """Reads one stream: the newest entries, a time range, one turn, new entries as they come."""

    def __init__(self, client: redis.Redis, stream: str, batch_size: int = 500) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._client = client
        self._stream = stream
        self._batch = batch_size

    def check(self) -> None:
        """Raise :class:`AuditStreamError` unless the stream exists and is a stream."""
        check_stream(self._client, self._stream)

    def last_id(self) -> str:
        """The id of the newest entry (``0-0`` for an empty stream)."""
        newest = parse_entries(self._client.xrevrange(self._stream, count=1))
        return newest[0].entry_id if newest else "0-0"

    def newest(
        self,
        limit: int,
        entry_filter: EntryFilter,
        since_id: str = "-",
        until_id: str = "+",
    ) -> list[StreamEntry]:
        """The newest ``limit`` matching entries between the two ids, oldest first."""
        found: list[StreamEntry] = []
        for entry in self._backwards(until_id, since_id):
            if entry_filter.matches(entry):
                found.append(entry)
                if len(found) >= limit:
                    break
        found.reverse()
        return found

    def scan(self, since_id: str = "-", until_id: str = "+") -> Iterator[StreamEntry]:
        """Every entry between the two ids, oldest first, read in batches."""
        start = since_id
        while True:
            batch = parse_entries(
                self._client.xrange(self._stream, min=start, max=until_id, count=self._batch)
            )
            yield from batch
            if len(batch) < self._batch:
                return
            start = "(" + batch[-1].entry_id

    def turn(self, turn_id: str, since_id: str = "-") -> list[StreamEntry]:
        """Every entry of one turn, oldest first.

        A turn's entries are appended together, its ``type=turn`` entry last, so
        the newest-first scan stops once that entry and as many tool entries as
        it counts are found (the whole range is read only for a turn that lost
        entries or does not exist).
        """
        found: list[StreamEntry] = []
        expected_tools: int | None = None
        tools_seen = 0
        for entry in self._backwards("+", since_id):
            if entry.get("turn_id") != turn_id:
                continue
            found.append(entry)
            if entry.type == "turn":
                expected = _number(entry.get("tool_calls"))
                expected_tools = int(expected) if expected is not None else None
            else:
                tools_seen += 1
            if expected_tools is not None and tools_seen >= expected_tools:
                break
        found.reverse()
        return found

    def follow(
        self, after_id: str, entry_filter: EntryFilter, block_ms: int = 1000
    ) -> Iterator[StreamEntry]:
        """Matching entries appended after ``after_id``, as they come; never ends by itself."""
        last = after_id
        while True:
            reply = self._client.xread({self._stream: last}, count=self._batch, block=block_ms)
            for entry in parse_read_reply(reply, self._stream):
                last = entry.entry_id
                if entry_filter.matches(entry):
                    yield entry

    def _backwards(self, until_id: str, since_id: str) -> Iterator[StreamEntry]:
        end = until_id
        while True:
            batch = parse_entries(
                self._client.xrevrange(self._stream, max=end, min=since_id, count=self._batch)
            )
            yield from batch
            if len(batch) < self._batch:
                return
            end = "(" + batch[-1].entry_id


def check_stream(client: redis.Redis, stream: str) -> None:
    """Raise :class:`AuditStreamError` unless ``stream`` exists and is a stream."""
    reply = client.type(stream)
    kind = reply.decode() if isinstance(reply, bytes) else str(reply)
    if kind == "none":
        raise AuditStreamError(
            f"audit stream {stream!r} does not exist (nothing audited yet, "
            "or AUDIT_STREAM / the REDIS_URL database is not the bot's)"
        )
    if kind != "stream":
        raise AuditStreamError(f"key {stream!r} is a {kind}, not a stream: check AUDIT_STREAM")


# ---------------------------------------------------------------- export


class StreamExporter:
    """Hands every entry of the stream to ``emit`` once, through a consumer group.

    Entries a crashed exporter received but never acknowledged stay pending in
    the group; the next run claims those idle for ``claim_idle_ms`` with
    ``XAUTOCLAIM`` and emits them first. Each entry is acknowledged right after
    ``emit`` returns, so ``emit`` must have written (and flushed) it by then: an
    exporter that dies before that leaves the entry pending, never lost, and
    one that dies between the two repeats at most that one entry (receivers
    can drop it by its ``id``).
    """

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        *,
        group: str,
        consumer: str,
        claim_idle_ms: int = 60_000,
        batch_size: int = 100,
    ) -> None:
        if claim_idle_ms < 0:
            raise ValueError("claim_idle_ms must not be negative")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._client = client
        self._stream = stream
        self._group = group
        self._consumer = consumer
        self._claim_idle_ms = claim_idle_ms
        self._batch = batch_size

    def ensure_group(self) -> bool:
        """Create the group at the start of the stream if missing; ``True`` if created."""
        check_stream(self._client, self._stream)
        try:
            self._client.xgroup_create(self._stream, self._group, id="0")
        except redis.ResponseError as error:
            if str(error).startswith("BUSYGROUP"):
                return False
            raise
        return True

    def run(
        self,
        emit: Callable[[StreamEntry], None],
        follow: bool = False,
        block_ms: int = 1000,
    ) -> int:
        """Emit reclaimed, then new entries; return how many (``follow`` runs until interrupted)."""
        emitted = self._reclaim(emit) + self._drain(emit, block_ms=None)
        while follow:
            emitted += self._reclaim(emit) + self._drain(emit, block_ms=block_ms)
        return emitted

    def _reclaim(self, emit: Callable[[StreamEntry], None]) -> int:
        emitted = 0
        cursor = "0-0"
        while True:
            reply = _as_list(
                self._client.xautoclaim(
                    self._stream,
                    self._group,
                    self._consumer,
                    min_idle_time=self._claim_idle_ms,
                    start_id=cursor,
                    count=self._batch,
                )
            )
            cursor = str(reply[0])
            emitted += self._emit_all(parse_entries(reply[1]), emit)
            if cursor == "0-0":
                return emitted

    def _drain(self, emit: Callable[[StreamEntry], None], block_ms: int | None) -> int:
        emitted = 0
        while True:
            reply = self._client.xreadgroup(
                self._group,
                self._consumer,
                {self._stream: ">"},
                count=self._batch,
                block=block_ms,
            )
            entries = parse_read_reply(reply, self._stream)
            emitted += self._emit_all(entries, emit)
            if len(entries) < self._batch:
                return emitted

    def _emit_all(self, entries: Sequence[StreamEntry], emit: Callable[[StreamEntry], None]) -> int:
        for entry in entries:
            emit(entry)
            self._client.xack(self._stream, self._group, entry.entry_id)
        return len(entries)
