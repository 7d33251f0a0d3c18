"""Audit statistics: per tool counts, error rates, durations; per turn outcomes, latency, tokens."""

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.audit.stream import StreamEntry
from turn import ToolStatus

TOOL_STATUSES: tuple[str, ...] = tuple(status.value for status in ToolStatus)
"""Every tool status, in the order tables show them."""

FAILED_STATUSES = frozenset(
    {ToolStatus.REJECTED.value, ToolStatus.TIMEOUT.value, ToolStatus.TECHNICAL_ERROR.value}
)
"""Statuses that count as errors in stats: a business error is an answer, not a malfunction."""


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

    @classmethod
    def of(cls, name: str, statuses: Mapping[str, int], duration_ms: Distribution) -> "ToolStats":
        """The stats of a tool run ``statuses`` times (by status), at least once."""
        count = sum(statuses.values())
        return cls(
            tool_name=name,
            count=count,
            by_status=dict(statuses),
            error_rate=sum(statuses.get(s, 0) for s in FAILED_STATUSES) / count,
            duration_ms=duration_ms,
        )


@dataclass(frozen=True, slots=True)
class TurnStats:
    """Every turn's outcome, latency and tokens (tokens only where known)."""

    count: int
    by_outcome: Mapping[str, int]
    latency_ms: Distribution
    total_tokens: Distribution
    tokens_sum: int
    tokens_unknown: int
    # Per conversation language (``-``: an entry written before languages were recorded),
    # the turns' outcomes; the most turns first.
    by_language: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        outcomes: Mapping[str, int],
        *,
        latency_ms: Distribution,
        total_tokens: Distribution,
        tokens_sum: int,
        tokens_unknown: int,
        languages: Mapping[str, Mapping[str, int]] | None = None,
    ) -> "TurnStats":
        """The stats of turns counted by outcome (the most frequent outcome first)."""
        by_language = {
            language: dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
            for language, counts in sorted(
                (languages or {}).items(), key=lambda item: (-sum(item[1].values()), item[0])
            )
        }
        return cls(
            count=sum(outcomes.values()),
            by_outcome=dict(sorted(outcomes.items(), key=lambda item: (-item[1], item[0]))),
            latency_ms=latency_ms,
            total_tokens=total_tokens,
            tokens_sum=tokens_sum,
            tokens_unknown=tokens_unknown,
            by_language=by_language,
        )


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
    languages: dict[str, Counter[str]] = {}
    latencies: list[float] = []
    tokens: list[float] = []
    tokens_unknown = 0
    for stream_entry in entries:
        tool, turn = stream_entry.tool, stream_entry.turn
        if tool is not None:
            tool_statuses.setdefault(tool.tool_name, Counter())[str(tool.status)] += 1
            if tool.duration_ms is not None:
                tool_durations.setdefault(tool.tool_name, []).append(tool.duration_ms)
        elif turn is not None:
            outcomes[str(turn.outcome)] += 1
            languages.setdefault(turn.language or "-", Counter())[str(turn.outcome)] += 1
            if turn.latency_ms is not None:
                latencies.append(turn.latency_ms)
            total = turn.usage.total_tokens
            if total is None:
                tokens_unknown += 1
            else:
                tokens.append(float(total))
    tools = tuple(
        ToolStats.of(name, statuses, Distribution.of(tool_durations.get(name, [])))
        for name, statuses in sorted(tool_statuses.items())
    )
    turns = TurnStats.of(
        outcomes,
        latency_ms=Distribution.of(latencies),
        total_tokens=Distribution.of(tokens),
        tokens_sum=int(sum(tokens)),
        tokens_unknown=tokens_unknown,
        languages=languages,
    )
    return AuditStats(tools=tools, turns=turns)
