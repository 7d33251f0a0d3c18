"""The bounded tool loop: model, allowed tools, model again, at most ``max_steps`` times."""

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pydantic import ValidationError

from bot.engine.proposals import propose, refuse_second
from bot.engine.reply_stream import ReplyStream
from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMConfigurationError,
    LLMRequestError,
    LLMUnreachableError,
)
from bot.llm.types import LLMResult, Message, ToolCallingClient
from bot.sessions.pending import PendingAction
from tools.execution import (
    ToolArgumentsError,
    ToolExecutionError,
    ToolExecutionRecord,
    ToolExecutionResult,
    ToolExecutor,
    ToolNotAllowedError,
)
from tools.registry import ToolRegistry
from turn import (
    HandoffRequest,
    ToolCall,
    ToolLoopError,
    ToolLoopExecutionError,
    ToolLoopLimitError,
    ToolLoopProtocolError,
    ToolStatus,
    TurnContext,
    TurnOutcome,
    Usage,
)

# The seed design imports the loop's errors and the client protocol from the loop's module.
__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_TOOL_CALLS",
    "BoundedToolLoop",
    "ToolCallingClient",
    "ToolLoopError",
    "ToolLoopExecutionError",
    "ToolLoopLimitError",
    "ToolLoopObserver",
    "ToolLoopProtocolError",
    "ToolLoopResult",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 3
DEFAULT_MAX_TOOL_CALLS = 4


class ToolLoopObserver(Protocol):
    """Sees every model response and every tool execution as it happens.

    The chat service collects them for the turn's audit; a turn that fails
    half-way has still reported everything it did.
    """

    def on_model_response(self, step: int, result: LLMResult) -> None:
        """One model call finished (``step`` counts from 1)."""

    def on_tool_executed(self, step: int, record: ToolExecutionRecord) -> None:
        """One tool execution finished, whatever its outcome."""


@dataclass(frozen=True, slots=True)
class ToolLoopResult:
    """The final answer of one turn and what it cost."""

    text: str
    model: str
    usage: Usage
    response_ids: tuple[str, ...]
    model_steps: int
    tool_calls_count: int
    tool_names: tuple[str, ...]
    audit_records: tuple[ToolExecutionRecord, ...]
    # The write the model proposed this turn (one at most: a second is refused to the model).
    proposal: PendingAction | None = None
    # The model asked for a person this turn (the first request counts).
    handoff: HandoffRequest | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _CallOutcome:
    """One tool call's end: the tool message, its record, and what it asks of the turn."""

    content: str
    record: ToolExecutionRecord
    # A write the call proposed (for the customer's button), or the handoff it asked for.
    proposal: PendingAction | None = None
    handoff: HandoffRequest | None = None


@dataclass(frozen=True, slots=True)
class BoundedToolLoop:
    """Runs one turn: the model may call registered tools, then must answer.

    * at most ``max_steps`` model calls; the last one offers no tools at all (and
      ``tool_choice="none"``), so even a server that ignores ``tool_choice`` answers;
    * a call the executor rejects (unknown tool, invalid or non-JSON arguments) is
      answered to the model as that call's tool message, ``{"ok": false, "error":
      {"code", "message"}}`` naming the fields and the failed rule but never the
      values, so the model may correct itself within the same step budget; timeouts
      and technical errors still end the turn;
    * a server that ignores ``parallel_tool_calls=False`` gets each of its calls
      executed in order, within ``max_tool_calls`` executions per turn;
    * a write tool becomes a proposal, one per turn: a second write call is answered
      as a business error (``one_action_at_a_time``) and audited like any tool call.
    * the whole turn (model calls, their streams, tools) ends within
      ``deadline_seconds`` (``None``: no deadline), else ``ToolLoopError`` of kind
      ``deadline``: a per-request timeout bounds only one wait, and a stream that
      drips a piece (or a keep-alive) now and then never trips it.
    """

    client: ToolCallingClient
    registry: ToolRegistry
    executor: ToolExecutor
    max_steps: int = DEFAULT_MAX_STEPS
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    deadline_seconds: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_steps <= 5:
            raise ValueError("max_steps must be between 1 and 5")
        if self.max_tool_calls < 1:
            raise ValueError("max_tool_calls must be positive")
        if self.deadline_seconds is not None and not self.deadline_seconds > 0:
            raise ValueError("deadline_seconds must be positive")

    async def run(
        self,
        messages: Sequence[Message],
        context: TurnContext,
        observer: ToolLoopObserver | None = None,
        stream: ReplyStream | None = None,
    ) -> ToolLoopResult:
        """Run one turn over a copy of ``messages``; raises a :class:`ToolLoopError`.

        A failed model call raises :class:`ToolLoopError` itself (its kind says
        which failure); an answer outside the protocol :class:`ToolLoopProtocolError`;
        a spent budget :class:`ToolLoopLimitError`; a tool that timed out or crashed
        :class:`ToolLoopExecutionError` with that execution's record.

        ``stream`` is told each step's text as the model writes it, and the tools
        a step asks for before they run.
        """
        deadline = asyncio.timeout(self.deadline_seconds)
        try:
            async with deadline:
                return await self._run(messages, context, observer, stream)
        except TimeoutError as error:
            if not deadline.expired():
                raise
            raise ToolLoopError(
                f"the turn ran past its deadline of {self.deadline_seconds:g} s",
                TurnOutcome.DEADLINE,
            ) from error

    async def _run(
        self,
        messages: Sequence[Message],
        context: TurnContext,
        observer: ToolLoopObserver | None,
        stream: ReplyStream | None,
    ) -> ToolLoopResult:
        conversation = list(messages)
        schemas = self.registry.api_schemas()
        llm_results: list[LLMResult] = []
        audit_records: list[ToolExecutionRecord] = []
        proposal: PendingAction | None = None
        handoff: HandoffRequest | None = None

        for step in range(1, self.max_steps + 1):
            last_step = step == self.max_steps
            try:
                result = await self.client.generate_with_tools(
                    conversation,
                    [] if last_step else schemas,
                    tool_choice="none" if last_step else "auto",
                    on_text=stream.on_text if stream is not None else None,
                )
            except LLMClientError as error:
                raise ToolLoopError(
                    f"model call {step} failed: {error}", _model_failure_kind(error)
                ) from error
            llm_results.append(result)
            if observer is not None:
                observer.on_model_response(step, result)

            if result.refusal:
                raise ToolLoopProtocolError("the model refused to answer")
            if result.tool_calls and result.finish_reason in ("tool_calls", "stop"):
                # Some compatible servers report "stop" with tool calls; the calls decide.
                if last_step:
                    raise ToolLoopLimitError(
                        f"the model asked for a tool on the last allowed step ({step})"
                    )
                if len(audit_records) + len(result.tool_calls) > self.max_tool_calls:
                    raise ToolLoopLimitError(
                        f"the turn would exceed {self.max_tool_calls} tool executions"
                    )
                conversation.append(result.tool_calls_message())
                if stream is not None:
                    stream.on_tools(tuple(call.name for call in result.tool_calls))
                for tool_call in result.tool_calls:
                    call = await self._execute(
                        tool_call, context, step, observer, proposed=proposal is not None
                    )
                    audit_records.append(call.record)
                    # The first of each counts: one card per turn, one handoff.
                    proposal = proposal or call.proposal
                    handoff = handoff or call.handoff
                    conversation.append(
                        {"role": "tool", "tool_call_id": tool_call.id, "content": call.content}
                    )
                continue
            if result.finish_reason == "stop":
                built = _build_result(_require_text(result), llm_results, audit_records)
                return replace(built, proposal=proposal, handoff=handoff)
            raise ToolLoopProtocolError(f"unexpected finish reason {result.finish_reason!r}")

        # Unreachable while the last step forbids tools, kept as the loop's contract.
        raise ToolLoopLimitError("the loop ended without a final answer")

    async def _execute(
        self,
        tool_call: ToolCall,
        context: TurnContext,
        step: int,
        observer: ToolLoopObserver | None,
        *,
        proposed: bool,
    ) -> _CallOutcome:
        """Run one call; ``proposed``: the turn proposed an action already (a second is refused).

        A call the executor cannot finish raises :class:`ToolLoopExecutionError` (its
        record went to ``observer``).
        """
        action: PendingAction | None = None
        tool = self.registry.find(tool_call.name)
        try:
            if tool is not None and tool.approval == "card":
                # A call that needs the customer's yes changes nothing now: it becomes a
                # proposal. One action at a time: the customer gets one card per turn, so
                # a second is the tool's "no", with a code the model can explain.
                proposal = (
                    refuse_second(tool.name, tool_call, server=tool.server)
                    if proposed
                    else await propose(tool, tool_call, context)
                )
                action = proposal.action
                execution = ToolExecutionResult(content=proposal.content, audit=proposal.record)
            else:
                execution = await self.executor.execute(tool_call, context)
        except (ToolNotAllowedError, ToolArgumentsError) as error:
            # The model's own mistake: it gets the reason and may try again.
            if observer is not None:
                observer.on_tool_executed(step, error.audit)
            return _CallOutcome(
                content=_rejection_content(error, self.registry.names()), record=error.audit
            )
        except ToolExecutionError as error:
            if observer is not None:
                observer.on_tool_executed(step, error.audit)
            raise ToolLoopExecutionError(str(error), error.audit) from error
        if observer is not None:
            observer.on_tool_executed(step, execution.audit)
        hands_off = (
            tool is not None and execution.audit.status == ToolStatus.SUCCESS and tool.hands_off
        )
        return _CallOutcome(
            content=execution.content,
            record=execution.audit,
            proposal=action,
            handoff=HandoffRequest(reason=execution.audit.category or "") if hands_off else None,
        )


def _rejection_content(error: ToolExecutionError, tool_names: Sequence[str]) -> str:
    """The tool message for a rejected call: what was wrong, never the model's values."""
    if isinstance(error, ToolNotAllowedError):
        code = "unknown_tool"
        message = "No tool with this name is available. Available tools: " + (
            ", ".join(tool_names) or "none"
        )
    else:
        code = "invalid_arguments"
        problems = error.problems if isinstance(error, ToolArgumentsError) else ()
        message = (
            "Invalid arguments. " + "; ".join(problems) + ". Fix them and call the tool again."
            if problems
            else _describe_validation(error.__cause__)
        )
    return json.dumps(
        {"ok": False, "error": {"code": code, "message": message}}, ensure_ascii=False
    )


def _describe_validation(cause: BaseException | None) -> str:
    """Each failed field and the rule it broke, e.g. ``query: String should have ...``."""
    if not isinstance(cause, ValidationError):
        return "The arguments do not match the tool's schema."
    problems: list[str] = []
    for item in cause.errors(include_url=False):
        if item["type"] == "json_invalid":
            problems.append("arguments: not valid JSON; send one JSON object")
            continue
        field = ".".join(str(part) for part in item["loc"]) or "arguments"
        rule = item["msg"]
        value = item.get("input")
        # Some pydantic messages quote the input; the model's values never go back.
        if isinstance(value, str | int | float) and (
            repr(value) in rule or f"'{value}'" in rule or f'"{value}"' in rule
        ):
            rule = item["type"]
        problems.append(f"{field}: {rule}")
    return "Invalid arguments. " + "; ".join(problems) + ". Fix them and call the tool again."


def _require_text(result: LLMResult) -> str:
    text = (result.text or "").strip()
    if not text:
        raise ToolLoopProtocolError("the model returned no text")
    return text


def _build_result(
    text: str, llm_results: Sequence[LLMResult], audit_records: Sequence[ToolExecutionRecord]
) -> ToolLoopResult:
    return ToolLoopResult(
        text=text,
        model=llm_results[-1].model,
        usage=Usage.total(r.usage for r in llm_results),
        response_ids=tuple(r.response_id for r in llm_results),
        model_steps=len(llm_results),
        tool_calls_count=len(audit_records),
        tool_names=tuple(record.tool_name for record in audit_records),
        audit_records=tuple(audit_records),
    )


def _model_failure_kind(error: LLMClientError) -> TurnOutcome:
    if isinstance(error, LLMBadResponseError):
        return TurnOutcome.MODEL_ERROR
    if isinstance(error, LLMConfigurationError):
        return TurnOutcome.MODEL_MISCONFIGURED
    if isinstance(error, LLMUnreachableError):
        return TurnOutcome.MODEL_UNREACHABLE
    if isinstance(error, LLMRequestError):
        return TurnOutcome.BAD_REQUEST
    return TurnOutcome.MODEL_UNAVAILABLE
