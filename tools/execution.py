"""Running one model-requested tool call safely: allowlist, validation, timeout, audit."""

import asyncio
import dataclasses
import functools
import json
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

from pydantic import BaseModel, ValidationError

from tools.registry import ArgumentsT, RegisteredTool, ToolRegistry
from turn import ToolBusinessError, ToolCall, ToolExecutionRecord, ToolStatus, TurnContext

__all__ = [
    "CallTimer",
    "ToolArgumentsError",
    "ToolAuditRecord",
    "ToolBusinessError",
    "ToolExecutionError",
    "ToolExecutionRecord",
    "ToolExecutionResult",
    "ToolExecutionStatus",
    "ToolExecutor",
    "ToolNotAllowedError",
    "ToolTechnicalError",
    "ToolTimeoutError",
    "business_error_content",
    "execute_registered",
    "technical_error",
    "timeout_error",
    "tool_content",
    "validated_arguments",
]

logger = logging.getLogger(__name__)

# The seed design's names for the execution record and its status (the same classes):
# code written against the seed imports them from here.
ToolAuditRecord = ToolExecutionRecord
ToolExecutionStatus = ToolStatus


@dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The JSON text for the ``tool`` message, and the record of the execution (``audit``)."""

    content: str
    audit: ToolExecutionRecord


class ToolExecutionError(RuntimeError):
    """An execution that cannot give the model a result; carries its audit record."""

    def __init__(self, message: str, audit: ToolExecutionRecord) -> None:
        super().__init__(message)
        self.audit = audit


class ToolNotAllowedError(ToolExecutionError):
    """The model named a tool that is not registered."""


class ToolArgumentsError(ToolExecutionError):
    """The model's arguments failed the tool's arguments model.

    ``problems`` (fields and rules, never values) when the check was not pydantic's
    (an MCP tool's JSON Schema); else the chained ``ValidationError`` says it.
    """

    def __init__(
        self, message: str, audit: ToolExecutionRecord, problems: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, audit)
        self.problems = problems


class ToolTimeoutError(ToolExecutionError):
    """The handler did not finish within the tool's timeout."""


class ToolTechnicalError(ToolExecutionError):
    """The handler failed unexpectedly or returned the wrong type."""


class CallTimer:
    """Times one tool call from its creation and makes its audit record."""

    def __init__(self, tool_call: ToolCall, server: str | None = None) -> None:
        self._call = tool_call
        self._server = server
        self.started_at = datetime.now(UTC)
        self._started = perf_counter()

    def record(
        self, status: ToolStatus, error_code: str | None, category: str | None = None
    ) -> ToolExecutionRecord:
        """The call's record, its duration measured now."""
        return ToolExecutionRecord(
            call_id=self._call.id,
            tool_name=self._call.name,
            started_at=self.started_at.isoformat(),
            duration_seconds=perf_counter() - self._started,
            status=status,
            error_code=error_code,
            category=category,
            server=self._server,
        )


def validated_arguments(
    model: type[ArgumentsT], tool_name: str, tool_call: ToolCall, timer: CallTimer
) -> ArgumentsT:
    """The call's arguments as ``model``; :class:`ToolArgumentsError` when they do not fit."""
    try:
        return model.model_validate_json(tool_call.arguments or "{}")
    except ValidationError as error:
        raise ToolArgumentsError(
            f"arguments of {tool_name} failed validation",
            timer.record(ToolStatus.REJECTED, "invalid_arguments"),
        ) from error


def timeout_error(tool_name: str, timeout_seconds: float, timer: CallTimer) -> ToolTimeoutError:
    """The error for a call of ``tool_name`` that outlived its ``timeout_seconds``."""
    return ToolTimeoutError(
        f"{tool_name} did not finish within {timeout_seconds} s",
        timer.record(ToolStatus.TIMEOUT, "timeout"),
    )


def technical_error(tool_name: str, timer: CallTimer) -> ToolTechnicalError:
    """The error for a call of ``tool_name`` that crashed (its cause is chained, for the logs)."""
    return ToolTechnicalError(
        f"{tool_name} failed", timer.record(ToolStatus.TECHNICAL_ERROR, "technical_error")
    )


def business_error_content(error: ToolBusinessError) -> str:
    """The tool message for a product rule's "no": its code and its message for the model."""
    return tool_content({"ok": False, "error": {"code": error.code, "message": str(error)}})


def tool_content(payload: dict[str, Any]) -> str:
    """A tool message's JSON text (non-ASCII kept as is: the model reads Russian)."""
    return json.dumps(payload, ensure_ascii=False)


class ToolExecutor:
    """Runs registered tools for the model.

    Plain (non-async) handlers run in a pool of at most ``max_workers`` threads.
    A timeout stops the *wait*, not the thread: a plain handler that ignores its
    timeout keeps its worker busy until it returns, which is why the pool is
    bounded and why handlers doing I/O must set their own client timeouts.
    Plain handlers registered with ``blocking=False`` are called on the event
    loop; one that returns after its timeout counts as timed out.
    """

    def __init__(self, registry: ToolRegistry, max_workers: int = 4) -> None:
        if max_workers <= 0:
            raise ValueError("max_workers must be positive")
        self._registry = registry
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tool")

    async def execute(self, tool_call: ToolCall, context: TurnContext) -> ToolExecutionResult:
        """Validate and run one tool call; every outcome yields exactly one audit record.

        A tool that needs the customer's approval is not run here: the tool loop
        proposes it (``bot.engine.proposals``); asked here, it is not allowed.
        """
        tool = self._registry.find(tool_call.name)
        if tool is None or tool.approval != "none":
            timer = CallTimer(tool_call, server=tool.server if tool is not None else None)
            raise ToolNotAllowedError(
                "the model asked for a tool that is not registered"
                if tool is None
                else "the tool needs the customer's approval",
                timer.record(ToolStatus.REJECTED, "unknown_tool"),
            )
        return await tool.execute(tool_call, context, self)

    async def run_registered(
        self, tool: RegisteredTool[Any, Any], tool_call: ToolCall, context: TurnContext
    ) -> ToolExecutionResult:
        """Validate ``tool_call`` and run ``tool``'s handler (a thread for a blocking one)."""
        return await execute_registered(tool, tool_call, context, self._run_handler)

    async def _run_handler(
        self, tool: RegisteredTool[Any, Any], arguments: BaseModel, context: TurnContext
    ) -> object:
        # The union of handler shapes is settled at registration (takes_context).
        handler: Callable[..., Any] = tool.handler
        call_args = (arguments, context) if tool.takes_context else (arguments,)
        if not tool.is_async and not tool.blocking:
            return _call_on_loop(handler, call_args, tool.timeout_seconds)
        # asyncio.timeout tells our deadline apart from a TimeoutError the handler raises itself.
        deadline = asyncio.timeout(tool.timeout_seconds)
        try:
            async with deadline:
                if tool.is_async:
                    return await handler(*call_args)
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(
                    self._pool, functools.partial(handler, *call_args)
                )
        except TimeoutError as error:
            if deadline.expired():
                raise
            raise RuntimeError("the handler raised TimeoutError itself") from error

    def close(self) -> None:
        """Stop the worker threads (waits for handlers that are still running)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _call_on_loop(
    handler: Callable[..., Any], call_args: tuple[Any, ...], timeout: float
) -> object:
    """Call a non-blocking handler right here; overrunning ``timeout`` is a timeout.

    Nothing can interrupt it, so the deadline is checked when it returns (or raises):
    the outcome is then the same as for a late thread, whose result is never awaited.
    """
    deadline = perf_counter() + timeout
    try:
        result = handler(*call_args)
    except Exception as error:
        if perf_counter() > deadline:
            raise TimeoutError from error
        if isinstance(error, TimeoutError):
            raise RuntimeError("the handler raised TimeoutError itself") from error
        raise
    if perf_counter() > deadline:
        raise TimeoutError
    return result


async def execute_registered(
    tool: RegisteredTool[Any, Any],
    tool_call: ToolCall,
    context: TurnContext,
    run_handler: Callable[
        [RegisteredTool[Any, Any], BaseModel, TurnContext], Coroutine[Any, Any, object]
    ],
) -> ToolExecutionResult:
    """Run an application tool that needs no approval: validate, run, record."""
    timer = CallTimer(tool_call)
    audit = timer.record
    arguments = validated_arguments(tool.arguments_model, tool.name, tool_call, timer)
    try:
        result = await run_handler(tool, arguments, context)
    except TimeoutError as error:
        raise timeout_error(tool.name, tool.timeout_seconds, timer) from error
    except ToolBusinessError as error:
        return ToolExecutionResult(
            content=business_error_content(error),
            audit=audit(ToolStatus.BUSINESS_ERROR, error.code),
        )
    except Exception as error:
        # The original text may hold internals; it stays in the chain for the logs only.
        raise technical_error(tool.name, timer) from error

    if not isinstance(result, BaseModel):
        raise ToolTechnicalError(
            f"{tool.name} returned {type(result).__name__}, not a pydantic model",
            audit(ToolStatus.TECHNICAL_ERROR, "invalid_result_type"),
        )
    record = audit(ToolStatus.SUCCESS, None, tool.category(result) if tool.category else None)
    if tool.result_summary is not None:
        summary = tool.result_summary(result)
        record = dataclasses.replace(
            record, result_count=summary.count, top_result_id=summary.top_id
        )
    return ToolExecutionResult(
        content=tool_content({"ok": True, "data": result.model_dump(mode="json")}),
        audit=record,
    )
