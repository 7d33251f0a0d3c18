"""ToolExecutor: every outcome with its audit record; handlers guarded by validation."""

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tools.execution import (
    ToolArgumentsError,
    ToolExecutionRecord,
    ToolExecutor,
    ToolNotAllowedError,
    ToolTechnicalError,
    ToolTimeoutError,
)
from tools.registry import RegisteredTool, ToolRegistry
from turn import ToolBusinessError, ToolCall, ToolStatus, TurnContext

SECRET = "password=hunter2 at db.internal:5432"


class LookupArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(pattern=r"^\d{4}$")


class LookupResult(BaseModel):
    order_id: str
    status_text: str


class Calls:
    """Counts handler invocations and keeps what they received."""

    def __init__(self) -> None:
        self.count = 0
        self.contexts: list[TurnContext] = []


def make(
    executors: list[ToolExecutor],
    handler: Callable[..., Any],
    timeout: float = 1.0,
    *,
    blocking: bool = True,
) -> ToolExecutor:
    """An executor with one tool, ``lookup``, closed at the end of the test."""
    registry = ToolRegistry()
    registry.register(
        RegisteredTool(
            name="lookup",
            description="Находит заказ.",
            arguments_model=LookupArguments,
            handler=handler,
            timeout_seconds=timeout,
            blocking=blocking,
        )
    )
    executor = ToolExecutor(registry)
    executors.append(executor)
    return executor


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def executors() -> Iterator[list[ToolExecutor]]:
    """Executors created by a test, closed afterwards."""
    created: list[ToolExecutor] = []
    yield created
    for executor in created:
        executor.close()


def call(arguments: str = '{"order_id": "8041"}', name: str = "lookup") -> ToolCall:
    return ToolCall(id="call-1", name=name, arguments=arguments)


CONTEXT = TurnContext(conversation_key="tg:1", chat_id=1, user_id=2, turn_id="t")


def assert_audit(
    record: ToolExecutionRecord, status: ToolStatus, error_code: str | None, name: str
) -> None:
    assert record.call_id == "call-1"
    assert record.tool_name == name
    assert record.status is status
    assert record.error_code == error_code
    assert record.duration_seconds >= 0
    started = datetime.fromisoformat(record.started_at)
    assert started.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - started) < timedelta(minutes=1)


async def test_success_returns_ok_data_json_with_readable_cyrillic(
    executors: list[ToolExecutor], calls: Calls
) -> None:
    def lookup(arguments: LookupArguments) -> LookupResult:
        calls.count += 1
        return LookupResult(order_id=arguments.order_id, status_text="В пути")

    result = await make(executors, lookup).execute(call(), CONTEXT)

    assert json.loads(result.content) == {
        "ok": True,
        "data": {"order_id": "8041", "status_text": "В пути"},
    }
    assert "В пути" in result.content  # not \u-escaped
    assert calls.count == 1
    assert_audit(result.audit, ToolStatus.SUCCESS, None, "lookup")


async def test_business_error_is_a_result_the_model_can_explain(
    executors: list[ToolExecutor],
) -> None:
    def lookup(arguments: LookupArguments) -> LookupResult:
        raise ToolBusinessError("Заказ не найден.", code="order_not_found")

    result = await make(executors, lookup).execute(call(), CONTEXT)

    assert json.loads(result.content) == {
        "ok": False,
        "error": {"code": "order_not_found", "message": "Заказ не найден."},
    }
    assert_audit(result.audit, ToolStatus.BUSINESS_ERROR, "order_not_found", "lookup")


async def test_unknown_tool_is_rejected_without_calling_any_handler(
    executors: list[ToolExecutor], calls: Calls
) -> None:
    def lookup(arguments: LookupArguments) -> LookupResult:
        calls.count += 1
        return LookupResult(order_id="0", status_text="")

    with pytest.raises(ToolNotAllowedError) as raised:
        await make(executors, lookup).execute(call(name="delete_order"), CONTEXT)

    assert calls.count == 0
    assert_audit(raised.value.audit, ToolStatus.REJECTED, "unknown_tool", "delete_order")


@pytest.mark.parametrize(
    "arguments",
    [
        "{not json",
        '{"order_id": "80"}',
        '{"order_id": "8041", "admin": true}',
        "{}",
        '["8041"]',
        "",
    ],
)
async def test_invalid_arguments_are_rejected_without_calling_the_handler(
    executors: list[ToolExecutor], calls: Calls, arguments: str
) -> None:
    def lookup(arguments: LookupArguments) -> LookupResult:
        calls.count += 1
        return LookupResult(order_id="0", status_text="")

    with pytest.raises(ToolArgumentsError) as raised:
        await make(executors, lookup).execute(call(arguments), CONTEXT)

    assert calls.count == 0
    assert_audit(raised.value.audit, ToolStatus.REJECTED, "invalid_arguments", "lookup")


async def test_slow_async_handler_times_out(executors: list[ToolExecutor]) -> None:
    async def lookup(arguments: LookupArguments) -> LookupResult:
        await asyncio.sleep(10)
        return LookupResult(order_id="0", status_text="")

    with pytest.raises(ToolTimeoutError) as raised:
        await make(executors, lookup, timeout=0.05).execute(call(), CONTEXT)

    assert_audit(raised.value.audit, ToolStatus.TIMEOUT, "timeout", "lookup")


async def test_slow_sync_handler_times_out(executors: list[ToolExecutor]) -> None:
    release = threading.Event()

    def lookup(arguments: LookupArguments) -> LookupResult:
        # Bounded wait: the worker thread is released at the end of the test.
        release.wait(timeout=5)
        return LookupResult(order_id="0", status_text="")

    executor = make(executors, lookup, timeout=0.05)
    try:
        with pytest.raises(ToolTimeoutError) as raised:
            await executor.execute(call(), CONTEXT)
    finally:
        release.set()

    assert_audit(raised.value.audit, ToolStatus.TIMEOUT, "timeout", "lookup")


@pytest.mark.parametrize("is_async", [False, True])
async def test_handler_raising_timeout_error_itself_is_a_technical_error(
    executors: list[ToolExecutor], is_async: bool
) -> None:
    def sync_lookup(arguments: LookupArguments) -> LookupResult:
        raise TimeoutError("upstream read timed out")

    async def async_lookup(arguments: LookupArguments) -> LookupResult:
        raise TimeoutError("upstream read timed out")

    handler = async_lookup if is_async else sync_lookup
    with pytest.raises(ToolTechnicalError) as raised:
        await make(executors, handler, timeout=5).execute(call(), CONTEXT)

    assert_audit(raised.value.audit, ToolStatus.TECHNICAL_ERROR, "technical_error", "lookup")


@pytest.mark.parametrize("is_async", [False, True])
async def test_technical_error_hides_the_original_text_but_chains_it(
    executors: list[ToolExecutor], is_async: bool
) -> None:
    def sync_lookup(arguments: LookupArguments) -> LookupResult:
        raise ConnectionError(SECRET)

    async def async_lookup(arguments: LookupArguments) -> LookupResult:
        raise ConnectionError(SECRET)

    handler = async_lookup if is_async else sync_lookup
    with pytest.raises(ToolTechnicalError) as raised:
        await make(executors, handler).execute(call(), CONTEXT)

    assert SECRET not in str(raised.value)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert str(raised.value.__cause__) == SECRET
    assert_audit(raised.value.audit, ToolStatus.TECHNICAL_ERROR, "technical_error", "lookup")


async def test_a_result_that_is_not_a_pydantic_model_is_a_technical_error(
    executors: list[ToolExecutor],
) -> None:
    def lookup(arguments: LookupArguments) -> Any:
        return {"order_id": "8041"}

    with pytest.raises(ToolTechnicalError) as raised:
        await make(executors, lookup).execute(call(), CONTEXT)

    assert_audit(raised.value.audit, ToolStatus.TECHNICAL_ERROR, "invalid_result_type", "lookup")


@pytest.mark.parametrize("is_async", [False, True])
async def test_context_is_passed_to_two_parameter_handlers(
    executors: list[ToolExecutor], calls: Calls, is_async: bool
) -> None:
    def sync_lookup(arguments: LookupArguments, context: TurnContext) -> LookupResult:
        calls.contexts.append(context)
        return LookupResult(order_id=arguments.order_id, status_text="ok")

    async def async_lookup(arguments: LookupArguments, context: TurnContext) -> LookupResult:
        calls.contexts.append(context)
        return LookupResult(order_id=arguments.order_id, status_text="ok")

    handler = async_lookup if is_async else sync_lookup
    await make(executors, handler).execute(call(), CONTEXT)

    assert calls.contexts == [CONTEXT]


async def test_sync_handlers_run_off_the_event_loop_thread(
    executors: list[ToolExecutor], calls: Calls
) -> None:
    threads: list[int] = []

    def lookup(arguments: LookupArguments) -> LookupResult:
        threads.append(threading.get_ident())
        return LookupResult(order_id=arguments.order_id, status_text="ok")

    await make(executors, lookup).execute(call(), CONTEXT)

    assert threads
    assert threads != [threading.get_ident()]


async def test_blocking_sync_handlers_run_in_the_tool_pool(
    executors: list[ToolExecutor],
) -> None:
    threads: list[str] = []

    def lookup(arguments: LookupArguments) -> LookupResult:
        threads.append(threading.current_thread().name)
        return LookupResult(order_id=arguments.order_id, status_text="ok")

    await make(executors, lookup, blocking=True).execute(call(), CONTEXT)

    assert len(threads) == 1
    assert threads[0].startswith("tool")


async def test_non_blocking_sync_handlers_run_on_the_event_loop_thread(
    executors: list[ToolExecutor],
) -> None:
    threads: list[int] = []
    loop_thread = threading.get_ident()

    def lookup(arguments: LookupArguments, context: TurnContext) -> LookupResult:
        threads.append(threading.get_ident())
        return LookupResult(order_id=arguments.order_id, status_text=str(context.user_id))

    result = await make(executors, lookup, blocking=False).execute(call(), CONTEXT)

    assert threads == [loop_thread]
    assert json.loads(result.content) == {
        "ok": True,
        "data": {"order_id": "8041", "status_text": "2"},
    }
    assert_audit(result.audit, ToolStatus.SUCCESS, None, "lookup")


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
async def test_non_blocking_handler_past_its_timeout_times_out(
    executors: list[ToolExecutor], fails: bool
) -> None:
    def lookup(arguments: LookupArguments) -> LookupResult:
        # It cannot be interrupted on the loop: it overruns its 10 ms budget five times.
        time.sleep(0.05)
        if fails:
            raise ToolBusinessError("поздно")
        return LookupResult(order_id="0", status_text="")

    with pytest.raises(ToolTimeoutError) as raised:
        await make(executors, lookup, timeout=0.01, blocking=False).execute(call(), CONTEXT)

    assert_audit(raised.value.audit, ToolStatus.TIMEOUT, "timeout", "lookup")


async def test_non_blocking_handler_errors_map_as_for_the_others(
    executors: list[ToolExecutor],
) -> None:
    def business(arguments: LookupArguments) -> LookupResult:
        raise ToolBusinessError("Заказ не найден.", code="order_not_found")

    def own_timeout(arguments: LookupArguments) -> LookupResult:
        raise TimeoutError(SECRET)

    answered = await make(executors, business, blocking=False).execute(call(), CONTEXT)
    with pytest.raises(ToolTechnicalError) as raised:
        await make(executors, own_timeout, blocking=False).execute(call(), CONTEXT)

    assert_audit(answered.audit, ToolStatus.BUSINESS_ERROR, "order_not_found", "lookup")
    assert_audit(raised.value.audit, ToolStatus.TECHNICAL_ERROR, "technical_error", "lookup")
    assert SECRET not in str(raised.value)


def test_executor_needs_at_least_one_worker() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        ToolExecutor(ToolRegistry(), max_workers=0)
