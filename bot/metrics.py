"""Prometheus metrics of one application: built once in the composition root, never global.

Every metric lives in the :class:`~prometheus_client.CollectorRegistry` given to
:class:`BotMetrics`, so two applications in one process (tests, benchmarks) never
share a counter. Values that other components already count (updates in flight,
audit entries lost, queue depth) are read when Prometheus scrapes, through
callbacks registered here, instead of being counted twice.
"""

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from time import perf_counter
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.analysis.model import SENTIMENTS
from bot.audit.analysis import ANALYSED, ESCALATION_OFFERED, AnalysisAuditEntry
from bot.audit.schema import (
    LATENCY_MS,
    MILLISECONDS,
    OUTCOME,
    QUEUE_MS,
    STATUS,
    TOOL_NAME,
    TYPE,
    AuditEntry,
    EntryType,
    HandoffAuditEntry,
    TurnAuditEntry,
)
from bot.audit.sink import AuditSink
from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from bot.llm.health import MODEL_STATES, ModelHealth
from bot.llm.types import (
    LLMResult,
    Message,
    TextListener,
    ToolCallingClient,
    ToolChoice,
    ToolDefinition,
)
from bot.queue.staff_actions import Trigger
from bot.settings import DEFAULT_CATEGORIES
from turn import TurnOutcome

ANALYSIS_OUTCOMES = ("contained", "handed_off", "unresolved")
"""How an analysed conversation ended, as the ``analyses`` metric labels it."""

NAMESPACE = "support"

# A tool name the model invented becomes this label: labels must stay a small, known set.
UNKNOWN_TOOL = "unknown"

# Turns take seconds (model calls); queue time is mostly milliseconds, seconds when a chat is busy.
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0, 120.0)
QUEUE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)
# A customer waits minutes, hours at night, for the first staff reply.
HANDOFF_WAIT_BUCKETS = (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)
HANDOFF_TRIGGERS = frozenset(get_args(Trigger))
HANDOFF_CLOSERS = frozenset({"staff", "idle"})

_ERROR_KINDS: tuple[tuple[type[LLMClientError], str], ...] = (
    (LLMTimeoutError, "timeout"),
    (LLMRateLimitError, "rate_limited"),
    (LLMUnavailableError, "unavailable"),
    (LLMConfigurationError, "misconfigured"),
    (LLMRequestError, "refused"),
    (LLMBadResponseError, "bad_response"),
)


# The metrics whose values other components keep (BotMetrics.observe_*): kind and help text.
_CALLBACK_METRICS: Mapping[str, tuple[type[GaugeMetricFamily | CounterMetricFamily], str]] = {
    "updates_in_flight": (
        GaugeMetricFamily,
        "Updates entered and not yet finished in this process.",
    ),
    "queue_depth": (
        GaugeMetricFamily,
        "Chats with queued messages not yet answered (waiting for or held by a worker).",
    ),
    "audit_entries_pending": (
        GaugeMetricFamily,
        "Audit entries held in this process until Redis takes them (lost if it dies).",
    ),
    "audit_entries_lost": (
        CounterMetricFamily,
        "Audit entries Redis did not take since the process started.",
    ),
}


def model_error_kind(error: LLMClientError) -> str:
    """The ``kind`` label of a failed model request."""
    for error_type, kind in _ERROR_KINDS:
        if isinstance(error, error_type):
            return kind
    return "other"


class BotMetrics:
    """The bot's metrics, registered in ``registry``; the methods are the recording seams."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        known_tools: Iterable[str] = (),
        known_categories: Iterable[str] = DEFAULT_CATEGORIES,
    ) -> None:
        self.registry = registry
        self._known_tools = frozenset(known_tools)
        # The shop's analysis categories: the only label values a category may take.
        self._known_categories = frozenset(known_categories)
        self._callbacks = _CallbackCollector()
        registry.register(self._callbacks)
        # Every metric in the bot's namespace and in ``registry``.
        counter = partial(Counter, namespace=NAMESPACE, registry=registry)
        histogram = partial(Histogram, namespace=NAMESPACE, registry=registry)
        self.turns = counter(
            "turns", "Customer turns by outcome (answered or the failure kind).", ["outcome"]
        )
        self.turn_seconds = histogram(
            "turn_duration_seconds",
            "Time of one turn in the chat service, from the message to the answer or failure.",
            buckets=TURN_BUCKETS,
        )
        self.queue_seconds = histogram(
            "update_queue_seconds",
            "Time an update waited between arrival and the start of its handling.",
            buckets=QUEUE_BUCKETS,
        )
        self.model_seconds = histogram(
            "model_request_duration_seconds",
            "Time of one model request (with the SDK's retries), whatever its result.",
            buckets=MODEL_BUCKETS,
        )
        self.model_errors = counter(
            "model_request_errors", "Model requests that failed, by kind.", ["kind"]
        )
        self.retries = counter(
            "retries",
            "Attempts made again after a failure (bot.ops.retry), by operation.",
            ["operation"],
        )
        self.tool_executions = counter(
            "tool_executions", "Tool executions by tool and status.", ["tool", "status"]
        )
        self.actions = counter(
            "actions",
            "Steps of actions the customer confirms (write tools), by tool and event.",
            ["tool", "event"],
        )
        self.redis_errors = counter(
            "redis_errors",
            "Redis operations that failed, by the component that saw the failure.",
            ["component"],
        )
        self.handoffs_opened = counter(
            "handoffs_opened", "Handoffs to staff opened, by what opened them.", ["trigger"]
        )
        self.handoffs_closed = counter(
            "handoffs_closed",
            "Handoffs ended, by who ended them (staff, or idleness).",
            ["closed_by"],
        )
        self.handoff_first_reply_seconds = histogram(
            "handoff_first_reply_seconds",
            "Time from a handoff's opening to the first staff reply.",
            buckets=HANDOFF_WAIT_BUCKETS,
        )
        self.feedback = counter(
            "feedback",
            "Customers' answers to the satisfaction question, by score (1 to 5).",
            ["score"],
        )
        self.feedback_asked = counter("feedback_asked", "Satisfaction questions sent to customers.")
        self.analyses = counter(
            "analyses",
            "Analysed conversations by category and how they ended: contained (resolved by "
            "the bot alone), handed_off (a person took part), unresolved; failed analyses "
            "count with category 'none'.",
            ["category", "outcome"],
        )
        self.analysis_sentiment = counter(
            "analysis_sentiment",
            "Analysed conversations by the customer's sentiment.",
            ["sentiment"],
        )
        self.escalations_offered = counter(
            "escalations_offered",
            "Angry, urgent customers offered a person after an analysis (the offer delivered).",
        )
        self.transcriptions = counter(
            "transcriptions", "Voice messages transcribed (the transcript became a turn)."
        )
        self.transcription_seconds = histogram(
            "transcription_duration_seconds",
            "Time of one transcription request, successful or not.",
            buckets=MODEL_BUCKETS,
        )
        self.transcribed_audio_seconds = counter(
            "transcribed_audio_seconds", "Seconds of voice messages transcribed."
        )
        self.media_refusals = counter(
            "media_refusals",
            "Voice messages and photos not taken, by reason: the customer is asked to write "
            "instead (while a person answers, a voice message goes to staff untranscribed).",
            ["kind", "reason"],
        )
        self.images_to_model = counter("images_to_model", "Images sent to the model in turns.")
        for sentiment in SENTIMENTS:
            self.analysis_sentiment.labels(sentiment=sentiment)
        for category in self._known_categories:
            for outcome in ANALYSIS_OUTCOMES:
                self.analyses.labels(category=category, outcome=outcome)
        for score in range(1, 6):
            self.feedback.labels(score=str(score))
        for trigger in HANDOFF_TRIGGERS:
            self.handoffs_opened.labels(trigger=trigger)
        for closer in HANDOFF_CLOSERS:
            self.handoffs_closed.labels(closed_by=closer)
        for kind in (*(kind for _, kind in _ERROR_KINDS), "other"):
            self.model_errors.labels(kind=kind)
        for component in ("sessions", "audit", "dedup", "flood"):
            self.redis_errors.labels(component=component)
        self.turns.labels(outcome=TurnOutcome.ANSWERED.value)

    def record_turn(self, outcome: str, seconds: float) -> None:
        """One turn ended with ``outcome``."""
        self.turns.labels(outcome=outcome).inc()
        self.turn_seconds.observe(seconds)
        if outcome == TurnOutcome.STORAGE_UNAVAILABLE:
            self.redis_errors.labels(component="sessions").inc()

    def record_tool(self, tool: str, status: str) -> None:
        """One tool execution ended with ``status``."""
        label = tool if tool in self._known_tools else UNKNOWN_TOOL
        self.tool_executions.labels(tool=label, status=status).inc()

    def record_action(self, tool: str, event: str) -> None:
        """One step (``proposed``, ``confirmed``, ``executed``...) of an action of ``tool``."""
        label = tool if tool in self._known_tools else UNKNOWN_TOOL
        self.actions.labels(tool=label, event=event).inc()

    def record_transcription(self, *, seconds: float, audio_seconds: int, ok: bool) -> None:
        """One transcription request took ``seconds``; ``ok``: it gave words for a turn."""
        self.transcription_seconds.observe(seconds)
        if ok:
            self.transcriptions.inc()
            self.transcribed_audio_seconds.inc(audio_seconds)

    def record_media_refusal(self, kind: str, reason: str) -> None:
        """A ``kind`` (``voice``, ``photo``) message refused for ``reason``."""
        self.media_refusals.labels(kind=kind, reason=reason).inc()

    def retried(self, operation: str) -> None:
        """One more attempt of ``operation`` after a failure (the :mod:`bot.ops.retry` counter)."""
        self.retries.labels(operation=operation).inc()

    def record_feedback(self, event: str, score: str) -> None:
        """A satisfaction question asked, or answered with ``score`` (1 to 5)."""
        if event == "asked":
            self.feedback_asked.inc()
        elif event == "answered" and score in {"1", "2", "3", "4", "5"}:
            self.feedback.labels(score=score).inc()

    def record_analysis(self, entry: AnalysisAuditEntry) -> None:
        """One analysis (or its failure), by category and how the conversation ended;
        or the offer of a person it led to."""
        if entry.event == ESCALATION_OFFERED:
            self.escalations_offered.inc()
            return
        if entry.event != ANALYSED:
            self.analyses.labels(category="none", outcome="failed").inc()
            return
        category = entry.category if entry.category in self._known_categories else "other"
        if entry.person:
            outcome = "handed_off"
        elif entry.resolved:
            outcome = "contained"
        else:
            outcome = "unresolved"
        self.analyses.labels(category=category, outcome=outcome).inc()
        if entry.sentiment in SENTIMENTS:
            self.analysis_sentiment.labels(sentiment=entry.sentiment).inc()

    def record_handoff(self, entry: HandoffAuditEntry) -> None:
        """One handoff step (its audit entry): opened, first staff reply, or closed."""
        if entry.event == "opened":
            known = entry.trigger in HANDOFF_TRIGGERS
            self.handoffs_opened.labels(trigger=entry.trigger if known else "other").inc()
        elif entry.event == "closed":
            known = entry.closed_by in HANDOFF_CLOSERS
            self.handoffs_closed.labels(closed_by=entry.closed_by if known else "other").inc()
        elif entry.event == "first_reply" and entry.wait_ms is not None:
            self.handoff_first_reply_seconds.observe(entry.wait_ms / 1000)

    def record_queue_time(self, seconds: float) -> None:
        """An update waited ``seconds`` before its handling started."""
        self.queue_seconds.observe(seconds)

    def record_redis_error(self, component: str) -> None:
        """A Redis operation of ``component`` failed (the component went on without it)."""
        self.redis_errors.labels(component=component).inc()

    def observe_in_flight(self, read: Callable[[], int]) -> None:
        """Export ``read()`` as the number of updates being handled right now."""
        self._callbacks.reads["updates_in_flight"] = read

    def observe_queue_depth(self, read: Callable[[], int]) -> None:
        """Export ``read()`` as the chats with queued work not yet finished (0 until set)."""
        self._callbacks.reads["queue_depth"] = read

    def observe_audit_pending(self, read: Callable[[], int]) -> None:
        """Export ``read()`` as the audit entries held in memory until Redis takes them."""
        self._callbacks.reads["audit_entries_pending"] = read

    def observe_model_state(self, read: Callable[[], str]) -> None:
        """Read the model's state (:class:`bot.llm.health.ModelHealth`) at every scrape."""
        self.registry.register(_ModelStateCollector(read))

    def observe_audit_lost(self, read: Callable[[], int]) -> None:
        """Export ``read()`` (a count that only grows) as the audit entries lost."""
        self._callbacks.reads["audit_entries_lost"] = read


class _ModelStateCollector(Collector):
    """``support_model_state{state}``: 1 for the model's state now, 0 for the others."""

    def __init__(self, read: Callable[[], str]) -> None:
        self._read = read

    def collect(self) -> Iterable[Metric]:
        """One sample per state (a closed set)."""
        now = self._read()
        family = GaugeMetricFamily(
            f"{NAMESPACE}_model_state",
            "The chat model's state as the start-up probe and the turns see it: ok, unknown "
            "(not probed yet), misconfigured (key, model or base URL refused), unreachable, "
            "unavailable, rate_limited.",
            labels=["state"],
        )
        for state in MODEL_STATES:
            family.add_metric([state], 1.0 if state == now else 0.0)
        yield family


class _CallbackCollector(Collector):
    """Gauges and counters whose values other components keep; read at scrape time."""

    def __init__(self) -> None:
        # By name (see _CALLBACK_METRICS); the queue depth reads 0 until a queue reports it.
        self.reads: dict[str, Callable[[], int]] = {"queue_depth": lambda: 0}

    def collect(self) -> Iterable[Metric]:
        """One sample per registered callback."""
        for name, read in self.reads.items():
            family, documentation = _CALLBACK_METRICS[name]
            yield family(f"{NAMESPACE}_{name}", documentation, value=read())


class MetricsAuditSink:
    """An :class:`AuditSink` that counts each turn and tool execution, then passes them on.

    The chat service writes one batch per turn (tool entries, then the turn
    entry), whatever the outcome: the one place that sees every turn end.
    ``lost_entries`` reads the wrapped sink's count, to tell a failed write.
    """

    def __init__(
        self, inner: AuditSink, metrics: BotMetrics, lost_entries: Callable[[], int]
    ) -> None:
        self._inner = inner
        self._metrics = metrics
        self._lost_entries = lost_entries

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Count a worker's turn (given as stream fields), then write it through once."""
        for fields in entries:
            if fields.get(TYPE) == EntryType.ACTION:
                self._metrics.record_action(fields.get(TOOL_NAME, ""), fields.get("event", ""))
                continue
            if fields.get(TYPE) == EntryType.HANDOFF:
                self._metrics.record_handoff(HandoffAuditEntry.from_fields(fields))
                continue
            if fields.get(TYPE) == EntryType.FEEDBACK:
                self._metrics.record_feedback(fields.get("event", ""), fields.get("score", ""))
                continue
            if fields.get(TYPE) == EntryType.ANALYSIS:
                self._metrics.record_analysis(AnalysisAuditEntry.from_fields(fields))
                continue
            # Only the labels and durations are read: decoding whole entries cost a turn more.
            if fields.get(TYPE) == EntryType.TURN:
                latency_ms = MILLISECONDS.decode(fields.get(LATENCY_MS))
                self._metrics.record_turn(fields.get(OUTCOME, ""), (latency_ms or 0.0) / 1000)
                queue_ms = MILLISECONDS.decode(fields.get(QUEUE_MS))
                if queue_ms is not None:
                    self._metrics.record_queue_time(queue_ms / 1000)
            else:
                self._metrics.record_tool(fields.get(TOOL_NAME, ""), fields.get(STATUS, ""))
        await self._write_through(lambda: self._inner.write_fields(entries))

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Count, then write through the wrapped sink (which never raises)."""
        for entry in entries:
            if isinstance(entry, TurnAuditEntry):
                self._metrics.record_turn(str(entry.outcome), (entry.latency_ms or 0.0) / 1000)
            else:
                self._metrics.record_tool(entry.tool_name, str(entry.status))
        await self._write_through(lambda: self._inner.write(entries))

    async def _write_through(self, write: Callable[[], Awaitable[None]]) -> None:
        # The wrapped sink never raises: entries it lost are how a failed write shows.
        lost_before = self._lost_entries()
        await write()
        if self._lost_entries() > lost_before:
            self._metrics.record_redis_error("audit")


class MeteredChatModel:
    """A :class:`ToolCallingClient` that times every request and counts its failures."""

    def __init__(
        self, inner: ToolCallingClient, metrics: BotMetrics, health: ModelHealth | None = None
    ) -> None:
        self._inner = inner
        self._metrics = metrics
        # Told every request's result: a turn finds a fault (or the cure) as a probe would.
        self._health = health

    @property
    def model_name(self) -> str:
        """The wrapped client's model name."""
        return self._inner.model_name

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        """The wrapped call, timed; a failure is counted by kind and re-raised."""
        started = perf_counter()
        try:
            result = await self._inner.generate_with_tools(
                messages, tools, tool_choice, on_text=on_text
            )
        except LLMClientError as error:
            self._metrics.model_errors.labels(kind=model_error_kind(error)).inc()
            if self._health is not None:
                self._health.failed(error)
            raise
        finally:
            self._metrics.model_seconds.observe(perf_counter() - started)
        if self._health is not None:
            self._health.succeeded()
        return result

    async def close(self) -> None:
        """Close the wrapped client."""
        await self._inner.close()
