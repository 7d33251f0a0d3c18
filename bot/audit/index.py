"""The audit index, written with each turn's entries: lookups and stats without reading the stream.

One script (:class:`~bot.storage.scripts.audit.WriteOnce`) appends a turn's
entries and, in the same call and the same cluster slot, records (see
:class:`~bot.storage.keys.AuditIndexKeys`):

- the turn's entry ids (``turn CODE`` reads only those entries);
- the chat's newest turn ids, at most :data:`CHAT_TURNS_KEPT` (``tail --chat``);
- per-minute rollups: counts by tool and status, outcome, handoff and action
  event, feedback (questions asked and scores, by who answered), analyses
  (by category, resolved and whether a person took part; sentiment, language), and fixed
  histogram buckets for every time and token count that ``stats`` gives
  percentiles of (so a percentile is the bucket's upper bound, within
  :data:`BUCKET_GROWTH` of the true value; the maximum is exact);
- when each tool, status and outcome was last seen, to the end of its minute
  (a filter that names none of them finds nothing, at once).

Nothing in it holds text or arguments: ids, names, categories and numbers.
The script marks the turn first (``SET NX``), so a repeated write changes
neither the stream nor the index. A turn's rollups are gathered per minute in
the script and written with one read and one write of the minute's hash. After
appending it trims the index with the stream: turns whose newest entry is older
than the stream's first entry are removed, and, by a write that opens a minute
or removes turns, minutes before it (a few hundred at most per write, so the
cost of a write stays bounded). The trim runs when a minute opens and every
:data:`TRIM_EVERY_ENTRIES` entries of a minute, not on every write: the index
names turns the stream lost for a few writes at most (lookups find them gone).
"""

import math
from collections.abc import Mapping, Sequence

from bot.audit.analysis import rollup_fields as analysis_rollups
from bot.audit.assist import rollup_fields as assist_rollups
from bot.audit.feedback import rollup_fields as feedback_rollups
from bot.audit.schema import (
    CHAT_ID,
    DURATION_MS,
    HANDOFF_REASON,
    LATENCY_MS,
    OUTCOME,
    RESULT_COUNT,
    STATUS,
    TOOL_NAME,
    TOTAL_TOKENS,
    TURN_ID,
    TYPE,
    EntryType,
    number_of,
)
from bot.storage.keys import AuditIndexKeys
from bot.storage.scripts.audit import AuditEntryArgs, WriteOnce

CHAT_TURNS_KEPT = 100
"""How many of a chat's newest turns the index names."""

BUCKET_GROWTH = 1.1
"""Each histogram bucket's upper bound is this much above the previous one's."""

_TRIM_BATCH = 500
TRIM_EVERY_ENTRIES = 32
"""A minute's entries between two trims of the index: at most this many turns are
written between two trims, each of which can drop :data:`_TRIM_BATCH` turns."""
SEARCH_TOOL = "search_help_center"
MAX_PREFIX = "max|"
HLL_PREFIX = "hll|"
NAME_PREFIX = "name|"


def bucket(value: float) -> int:
    """The histogram bucket of ``value`` (0 for values up to 1)."""
    if value <= 1:
        return 0
    return math.ceil(math.log(value) / math.log(BUCKET_GROWTH) - 1e-9)


def bucket_upper(index: int) -> float:
    """The upper bound of bucket ``index`` (what a percentile in it reads as)."""
    return float(BUCKET_GROWTH**index)


def rollups(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The rollup updates of one entry (see the script): counts, buckets, maxima, names."""
    kind = fields.get(TYPE, "")
    out: list[tuple[str, str]] = [("entries", "1")]
    if kind == EntryType.TOOL:
        name, status = fields.get(TOOL_NAME, ""), fields.get(STATUS, "")
        out += [(f"tool|{name}|{status}", "1"), (NAME_PREFIX, f"tool:{name}")]
        out.append((NAME_PREFIX, f"status:{status}"))
        out += _measure(f"tool_ms|{name}", fields.get(DURATION_MS))
        count = number_of(fields.get(RESULT_COUNT))
        if name == SEARCH_TOOL and status == "success" and count is not None:
            out.append(("search", "1"))
            if count == 0:
                out.append(("search_empty", "1"))
    elif kind == EntryType.TURN:
        outcome = fields.get(OUTCOME, "")
        out += [(f"outcome|{outcome}", "1"), (NAME_PREFIX, f"outcome:{outcome}")]
        if fields.get(CHAT_ID):
            out.append((HLL_PREFIX, fields[CHAT_ID]))
        out += _measure("turn_ms", fields.get(LATENCY_MS))
        tokens = number_of(fields.get(TOTAL_TOKENS))
        if tokens is None:
            out.append(("tok_unknown", "1"))
        else:
            out += [("tok_sum", str(int(tokens))), *_measure("tok", str(tokens))]
    elif kind == EntryType.HANDOFF:
        out += _handoff_rollups(fields)
    elif kind == EntryType.ACTION:
        name, event = fields.get(TOOL_NAME, ""), fields.get("event", "")
        out.append((f"action|{name}|{event}", "1"))
        if event in ("confirmed", "declined"):
            out += _measure(f"decide|{name}", fields.get("decide_ms"))
    else:
        out += _FEATURE_ROLLUPS.get(kind, _none)(fields)
    return out


def _handoff_rollups(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """A handoff step's counts: by event, an opened one by reason, a first reply's wait."""
    event = fields.get("event", "")
    out = [(f"handoff|{event}", "1")]
    if event == "opened":
        out.append((f"handoff_reason|{fields.get(HANDOFF_REASON) or 'unknown'}", "1"))
    if event == "first_reply":
        out += _measure("wait", fields.get("wait_ms"))
    return out


def _none(_fields: Mapping[str, str]) -> list[tuple[str, str]]:
    return []


# Entry types whose rollups their own module knows (feedback, analysis).
_FEATURE_ROLLUPS = {
    EntryType.FEEDBACK.value: feedback_rollups,
    EntryType.ANALYSIS.value: analysis_rollups,
    EntryType.ASSIST.value: assist_rollups,
}


def write_once(
    index: AuditIndexKeys,
    stream: str,
    done_key: str,
    rows: Sequence[Mapping[str, str]],
    *,
    maxlen: int,
    done_ttl_seconds: int,
    trim_every: int = TRIM_EVERY_ENTRIES,
) -> WriteOnce:
    """The :class:`~bot.storage.scripts.audit.WriteOnce` call of one turn's ``rows``."""
    first = rows[0]
    return WriteOnce(
        stream=stream,
        done=done_key,
        index=index,
        maxlen=maxlen,
        done_ttl=done_ttl_seconds,
        turn_id=first.get(TURN_ID, ""),
        chat=first.get(CHAT_ID, ""),
        chats_kept=CHAT_TURNS_KEPT,
        trim_batch=_TRIM_BATCH,
        trim_every=trim_every,
        entries=tuple(
            AuditEntryArgs(fields=tuple(row.items()), rollups=tuple(rollups(row))) for row in rows
        ),
    )


def _measure(name: str, raw: str | None) -> list[tuple[str, str]]:
    value = number_of(raw)
    if value is None:
        return []
    return [(f"{name}|b{bucket(value)}", "1"), (f"{MAX_PREFIX}{name}", repr(value))]
