"""The seed design's names are the public API: each class it names, importable, with its meaning.

The seed (the "registry and execution of tools" chapter) names the registry, the
executor, the bounded loop, the chat service and the prompt. Code written against
it (``except ToolLoopLimitError:``, ``error.audit.tool_name``) must keep working,
and so must code that catches the one base, ``ToolLoopError``.

Where the renovation renamed a class, the seed's name is the same class
(``ToolAuditRecord`` is ``ToolExecutionRecord``, ``ToolExecutionStatus`` is
``ToolStatus``). The seed's module paths were ``app.*``; these are ours.
"""

import dataclasses
import typing
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatReply, ChatService
from bot.engine.summary import ConversationSummaryService
from bot.engine.tool_loop import (
    BoundedToolLoop,
    ToolCallingClient,
    ToolLoopError,
    ToolLoopExecutionError,
    ToolLoopLimitError,
    ToolLoopProtocolError,
    ToolLoopResult,
)
from bot.llm.errors import LLMClientError
from bot.llm.types import LLMResult
from bot.settings import DEMO_SHOP_DATA
from prompts.template import PromptTemplate
from tools.default_registry import build_default_tool_registry
from tools.execution import (
    ToolArgumentsError,
    ToolAuditRecord,
    ToolBusinessError,
    ToolExecutionError,
    ToolExecutionResult,
    ToolExecutionStatus,
    ToolExecutor,
    ToolNotAllowedError,
    ToolTechnicalError,
    ToolTimeoutError,
)
from tools.order_status import GetOrderStatusArguments, OrderStatusResult
from tools.registry import (
    DuplicateToolError,
    RegisteredTool,
    ToolNotRegisteredError,
    ToolRegistry,
    ToolRegistryError,
)
from tools.return_policy import GetReturnPolicyArguments, ReturnPolicyResult
from tools.shop_data import ShopData
from turn import ToolCall, ToolExecutionRecord, ToolStatus, TurnContext, TurnOutcome

AUDIT = ToolAuditRecord(
    call_id="call-1",
    tool_name="get_order_status",
    started_at=datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
    duration_seconds=2.5,
    status=ToolExecutionStatus.TIMEOUT,
    error_code="timeout",
)


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("cls", "base"),
    [
        (ToolRegistryError, RuntimeError),
        (DuplicateToolError, ToolRegistryError),
        (ToolNotRegisteredError, ToolRegistryError),
        (ToolBusinessError, RuntimeError),
        (ToolExecutionError, RuntimeError),
        (ToolNotAllowedError, ToolExecutionError),
        (ToolArgumentsError, ToolExecutionError),
        (ToolTimeoutError, ToolExecutionError),
        (ToolTechnicalError, ToolExecutionError),
        (ToolLoopError, RuntimeError),
        (ToolLoopProtocolError, ToolLoopError),
        (ToolLoopLimitError, ToolLoopError),
        (ToolLoopExecutionError, ToolLoopError),
        (ChatServiceError, RuntimeError),
        (LLMClientError, RuntimeError),
        (GetOrderStatusArguments, BaseModel),
        (OrderStatusResult, BaseModel),
        (GetReturnPolicyArguments, BaseModel),
        (ReturnPolicyResult, BaseModel),
    ],
    ids=lambda value: value.__name__,
)
def test_each_seed_error_and_model_has_its_seed_base(cls: type, base: type) -> None:
    assert issubclass(cls, base)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ToolLoopProtocolError("the model refused to answer"), TurnOutcome.MODEL_ERROR),
        (ToolLoopLimitError("no final answer"), TurnOutcome.LIMIT),
        (ToolLoopExecutionError("get_order_status timed out", AUDIT), TurnOutcome.TOOL_FAILURE),
        (ToolLoopError("model call 1 failed", TurnOutcome.MODEL_UNAVAILABLE), None),
    ],
    ids=["protocol", "limit", "execution", "base"],
)
def test_loop_errors_keep_their_kind_and_are_caught_as_the_base(
    error: ToolLoopError, kind: TurnOutcome | None
) -> None:
    with pytest.raises(ToolLoopError) as raised:
        raise error
    assert raised.value.kind is (kind or TurnOutcome.MODEL_UNAVAILABLE)
    assert str(raised.value) == error.args[0]


def test_the_execution_error_carries_the_failed_executions_record() -> None:
    error = ToolLoopExecutionError("get_order_status timed out", AUDIT)

    assert error.audit is AUDIT
    assert (error.audit.tool_name, error.audit.status, error.audit.duration_seconds) == (
        "get_order_status",
        ToolStatus.TIMEOUT,
        2.5,
    )


def test_renamed_classes_are_the_same_classes_under_the_seed_name() -> None:
    assert ToolAuditRecord is ToolExecutionRecord
    assert ToolExecutionStatus is ToolStatus
    assert {status.value for status in ToolExecutionStatus} == {
        "success",
        "business_error",
        "rejected",
        "timeout",
        "technical_error",
    }
    assert {
        "call_id",
        "tool_name",
        "started_at",
        "duration_seconds",
        "status",
        "error_code",
    } <= field_names(ToolAuditRecord)


async def test_executor_rejects_an_unknown_tool_with_its_audit_record() -> None:
    executor = ToolExecutor(build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA)))
    call = ToolCall(id="call-9", name="delete_everything", arguments="{}")
    context = TurnContext(conversation_key="tg:1", chat_id=1, user_id=1, turn_id="turn")
    try:
        with pytest.raises(ToolNotAllowedError) as raised:
            await executor.execute(call, context)
    finally:
        executor.close()

    assert isinstance(raised.value.audit, ToolAuditRecord)
    assert (raised.value.audit.call_id, raised.value.audit.status) == (
        "call-9",
        ToolExecutionStatus.REJECTED,
    )
    assert field_names(ToolExecutionResult) == {"content", "audit"}


def test_registry_keeps_the_seed_contract() -> None:
    registry = build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))

    assert isinstance(registry, ToolRegistry)
    assert {"get_order_status", "get_return_policy"} <= set(registry.names())
    tool = registry.get("get_return_policy")
    assert isinstance(tool, RegisteredTool)
    assert tool.arguments_model is GetReturnPolicyArguments
    assert [schema["function"]["name"] for schema in registry.api_schemas()] == list(
        registry.names()
    )
    with pytest.raises(ToolNotRegisteredError):
        registry.get("delete_everything")
    with pytest.raises(DuplicateToolError):
        registry.register(tool)


def test_loop_chat_service_and_prompt_keep_their_seed_shape() -> None:
    # The loop gets its client, registry and executor through its constructor.
    assert {"client", "registry", "executor", "max_steps"} <= field_names(BoundedToolLoop)
    assert {
        "text",
        "model",
        "response_ids",
        "model_steps",
        "tool_calls_count",
        "tool_names",
        "audit_records",
    } <= field_names(ToolLoopResult)
    assert typing.get_type_hints(ToolLoopResult)["audit_records"] == tuple[ToolAuditRecord, ...]
    # Any object with generate_with_tools is a client for the loop (a Protocol).
    assert getattr(ToolCallingClient, "_is_protocol", False)
    assert hasattr(ToolCallingClient, "generate_with_tools")
    assert {"text", "model", "response_id", "finish_reason", "tool_calls", "refusal"} <= (
        field_names(LLMResult)
    )
    assert {"id", "name", "arguments"} <= field_names(ToolCall)
    # The chat service runs turns through the loop and answers with a ChatReply.
    assert {"loop", "summaries", "prompt"} <= field_names(ChatService)
    assert {"text", "model", "response_ids", "tool_names"} <= field_names(ChatReply)
    assert isinstance(vars(ChatReply)["tool_calls_count"], property)
    assert callable(ConversationSummaryService)
    assert {"prompt_id", "version", "body", "required_variables"} == field_names(PromptTemplate)
    prompt = PromptTemplate(prompt_id="support_chat", version="1.2.0", body="Отвечай кратко.")
    assert prompt.render() == "Отвечай кратко."
