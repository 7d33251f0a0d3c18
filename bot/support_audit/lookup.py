"""Reading the audit index (:mod:`bot.audit.index`): one turn, a chat's newest entries, stats.

Each lookup reads the index and then only the entries it names, so its cost
does not grow with the stream. A stream written before the index existed has
entries the index does not know: :meth:`AuditIndex.covers` says whether the
index alone can answer for a period, and the CLI reads the stream otherwise.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.audit.actions import ACTION_EVENTS, ToolActionStats
from bot.audit.analysis import AnalysisStats
from bot.audit.analysis import stats_of_counts as analysis_of_counts
from bot.audit.assist import AssistStats
from bot.audit.assist import stats_of_counts as assist_of_counts
from bot.audit.feedback import FeedbackStats
from bot.audit.feedback import stats_of_counts as feedback_of_counts
from bot.audit.handoffs import HandoffStats, OpenHandoff
from bot.audit.index import MAX_PREFIX, bucket_upper
from bot.audit.knowledge_gaps import SearchShare
from bot.audit.schema import EntryType, HandoffAuditEntry
from bot.audit.stats import AuditStats, Distribution, ToolStats, TurnStats
from bot.audit.stream import EntryFilter, StreamEntry, parse_entries
from bot.storage.connection import SyncRedisClient, text_of
from bot.storage.keys import RedisKeys, telegram_chat_id

# A chat's newest handoff entries read to describe its open handoff.
_HANDOFF_STEPS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedStats:
    """Everything ``stats`` shows, from the per-minute rollups."""

    stats: AuditStats
    entries: int
    searches: SearchShare
    handoffs: HandoffStats
    actions: list[ToolActionStats]
    feedback: FeedbackStats
    analysis: AnalysisStats
    assist: AssistStats


class AuditIndex:
    """The index of one audit stream, read with an injected ``decode_responses`` client."""

    def __init__(self, client: SyncRedisClient, stream: str) -> None:
        self._client = client
        self._stream = stream
        self._keys = RedisKeys.audit_index(stream)

    def covers(self, since_id: str = "-") -> bool:
        """Whether every entry from ``since_id`` on is indexed (the index alone can answer)."""
        start = self._client.get(self._keys.start)
        if start is None:
            return False
        if since_id != "-" and _id_key(since_id) >= _id_key(str(start)):
            return True
        first = self._client.xrange(self._stream, count=1)
        return not first or _id_key(str(first[0][0])) >= _id_key(str(start))

    def start_id(self) -> str:
        """The first entry id the index covers (``+`` when there is no index)."""
        start = self._client.get(self._keys.start)
        if start is None:
            return "+"
        return "(" + text_of(start)

    def turn(self, turn_id: str, since_id: str = "-") -> list[StreamEntry]:
        """The turn's entries from ``since_id`` on, oldest first (none if the index lacks it)."""
        value = self._client.hget(self._keys.turns, turn_id)
        if value is None:
            return []
        since = _id_key(since_id) if since_id != "-" else (0, 0)
        return self._entries([i for i in _ids(str(value)) if _id_key(i) >= since])

    def chat(
        self, chat_forms: Iterable[str], limit: int, entry_filter: EntryFilter, since_id: str = "-"
    ) -> list[StreamEntry]:
        """The chat's newest ``limit`` matching entries, oldest first (its newest turns only)."""
        turn_ids: list[str] = []
        for form in sorted(chat_forms):
            listed = self._client.hget(self._keys.chats, form)
            if listed:
                turn_ids.extend(str(listed).split(","))
        if not turn_ids:
            return []
        values = self._client.hmget(self._keys.turns, turn_ids)
        ids = [entry_id for value in values if value for entry_id in _ids(str(value))]
        since = _id_key(since_id) if since_id != "-" else (0, 0)
        ids = sorted({entry_id for entry_id in ids if _id_key(entry_id) >= since}, key=_id_key)
        found: list[StreamEntry] = []
        # Newest first, a batch at a time, until enough entries match.
        while ids and len(found) < limit:
            batch, ids = ids[-limit:], ids[:-limit]
            found = [e for e in self._entries(batch) if entry_filter.matches(e)] + found
        return found[-limit:]

    def open_handoffs(
        self,
        keys: RedisKeys,
        staff_chat_id: int,
        chat_forms: Callable[[str], frozenset[str]],
        now: datetime,
    ) -> list[OpenHandoff]:
        """Handoffs open now, as the bot's own open-handoffs set says, oldest first.

        The set names the conversations, the session's ``h`` field their state,
        and the chat's newest indexed handoff entries the trigger, the reason,
        when it opened and the wait for the first staff reply; the stream is
        not scanned. One whose opening the stream no longer holds is listed
        with what is known.
        """
        members = self._client.zrange(keys.open_handoffs(staff_chat_id), 0, -1)
        found: list[OpenHandoff] = []
        handoff_only = EntryFilter(entry_type=EntryType.HANDOFF.value)
        for member in members:
            conversation = str(member)
            chat_id = telegram_chat_id(conversation)
            chat = str(chat_id) if chat_id is not None else conversation
            state = self._client.hget(keys.conversation(conversation).session, "h")
            opened: StreamEntry | None = None
            wait_ms: float | None = None
            for entry in self.chat(chat_forms(chat), _HANDOFF_STEPS, handoff_only):
                step = HandoffAuditEntry.from_fields(entry.fields)
                if step.event == "opened":
                    opened, wait_ms = entry, None
                elif step.event == "first_reply":
                    wait_ms = step.wait_ms
            first = HandoffAuditEntry.from_fields(opened.fields) if opened else None
            opened_at = opened.recorded_at if opened is not None else now
            kind = str(state) if state else ("human" if wait_ms is not None else "waiting")
            waited = (
                (now - opened_at).total_seconds() if kind == "waiting" else (wait_ms or 0.0) / 1000
            )
            found.append(
                OpenHandoff(
                    chat_id=chat,
                    state=kind,
                    trigger=first.trigger if first else "",
                    reason=first.reason if first else "",
                    opened_at=opened_at,
                    waiting_seconds=max(waited, 0.0),
                )
            )
        return sorted(found, key=lambda handoff: handoff.opened_at)

    def seen(self, kind: str, value: str) -> bool:
        """Whether a ``tool``, ``status`` or ``outcome`` named ``value`` is in the stream now.

        Seen in an entry the stream still holds: not before its first entry.
        """
        last = self._client.hget(self._keys.names, f"{kind}:{value}")
        if last is None:
            return False
        first = self._client.xrange(self._stream, count=1)
        return not first or int(str(last)) >= _id_key(str(first[0][0]))[0]

    def stats(self, since: datetime) -> IndexedStats:
        """Stats of the minutes from ``since``'s minute on (whole minutes)."""
        first_minute = int(since.timestamp() // 60)
        minutes = [
            int(str(m))
            for m in self._client.zrangebyscore(self._keys.minutes, first_minute, "+inf")
        ]
        pipe = self._client.pipeline(transaction=False)
        for minute in minutes:
            pipe.hgetall(self._keys.minute(minute))
        rows: list[Mapping[str, str]] = pipe.execute() if minutes else []
        chats = (
            int(self._client.pfcount(*(self._keys.minute_chats(m) for m in minutes)))
            if minutes
            else 0
        )
        return _indexed_stats(_Rollup.of(rows), chats)

    def _entries(self, ids: Sequence[str]) -> list[StreamEntry]:
        pipe = self._client.pipeline(transaction=False)
        for entry_id in ids:
            pipe.xrange(self._stream, min=entry_id, max=entry_id)
        found: list[StreamEntry] = []
        for reply in pipe.execute():
            found.extend(parse_entries(reply))
        return found


@dataclass(frozen=True, slots=True)
class _Rollup:
    """Rollup rows summed: counts, histogram buckets, maxima."""

    counts: Counter[str]
    maxima: dict[str, float]

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, str]]) -> "_Rollup":
        counts: Counter[str] = Counter()
        maxima: dict[str, float] = {}
        for row in rows:
            for name, value in row.items():
                if name.startswith(MAX_PREFIX):
                    key = name[len(MAX_PREFIX) :]
                    maxima[key] = max(maxima.get(key, float(value)), float(value))
                else:
                    counts[name] += int(value)
        return cls(counts, maxima)

    def distribution(self, name: str) -> Distribution:
        """The histogram ``name|b<bucket>`` as p50/p95 (bucket upper bounds, capped by max)."""
        buckets = sorted(
            (int(key[len(name) + 2 :]), count)
            for key, count in self.counts.items()
            if key.startswith(name + "|b")
        )
        total = sum(count for _, count in buckets)
        top = self.maxima.get(name)
        if not total or top is None:
            return Distribution(count=0, p50=None, p95=None, max=None)
        return Distribution(
            count=total,
            p50=_percentile(buckets, total, 0.50, top),
            p95=_percentile(buckets, total, 0.95, top),
            max=top,
        )

    def grouped(self, prefix: str) -> dict[str, Counter[str]]:
        """``prefix|a|b`` counts as ``{a: {b: count}}``."""
        found: dict[str, Counter[str]] = {}
        for key, count in self.counts.items():
            if key.startswith(prefix + "|"):
                first, _, second = key[len(prefix) + 1 :].rpartition("|")
                found.setdefault(first, Counter())[second] += count
        return found


def _percentile(buckets: list[tuple[int, int]], total: int, fraction: float, top: float) -> float:
    rank = max(int(-(-fraction * total // 1)), 1)
    seen = 0
    for index, count in buckets:
        seen += count
        if seen >= rank:
            return min(bucket_upper(index), top)
    return top


def _indexed_stats(rollup: _Rollup, chats: int) -> IndexedStats:
    counts = rollup.counts
    tools = tuple(
        ToolStats.of(name, statuses, rollup.distribution(f"tool_ms|{name}"))
        for name, statuses in sorted(rollup.grouped("tool").items())
    )
    outcomes = Counter(
        {key.split("|", 1)[1]: n for key, n in counts.items() if key.startswith("outcome|")}
    )
    turns = TurnStats.of(
        outcomes,
        latency_ms=rollup.distribution("turn_ms"),
        total_tokens=rollup.distribution("tok"),
        tokens_sum=counts["tok_sum"],
        tokens_unknown=counts["tok_unknown"],
    )
    opened = counts["handoff|opened"]
    actions = [
        ToolActionStats(
            tool_name=name,
            counts={event: events.get(event, 0) for event in ACTION_EVENTS},
            decide_ms=rollup.distribution(f"decide|{name}"),
        )
        for name, events in sorted(rollup.grouped("action").items())
    ]
    return IndexedStats(
        stats=AuditStats(tools=tools, turns=turns),
        entries=counts["entries"],
        searches=SearchShare(searches=counts["search"], empty=counts["search_empty"]),
        handoffs=HandoffStats(
            opened=opened,
            chats=chats,
            rate=opened / chats if chats else None,
            first_reply_ms=rollup.distribution("wait"),
            reasons={
                key.split("|", 1)[1]: n
                for key, n in counts.items()
                if key.startswith("handoff_reason|")
            },
        ),
        actions=actions,
        feedback=feedback_of_counts({key: n for key, n in counts.items() if key.startswith("fb|")}),
        analysis=analysis_of_counts(
            {key: n for key, n in counts.items() if key.startswith(("an", "fbc|"))}
        ),
        assist=assist_of_counts({key: n for key, n in counts.items() if key.startswith("as|")}),
    )


def _ids(value: str) -> list[str]:
    return [entry_id for entry_id in value.partition("|")[2].split(",") if entry_id]


def _id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)
