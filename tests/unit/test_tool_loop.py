"""BoundedToolLoop with an in-process scripted model and a real registry and executor."""

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
    LLMUnreachableError,
)
from bot.llm.types import LLMResult, Message, ToolChoice
from bot.testing.scripted_client import ScriptedClient, scripted
from tools.execution import ToolExecutionRecord, ToolExecutor
from tools.registry import RegisteredTool, ToolRegistry
from turn import (
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

CONTEXT = TurnContext(conversation_key="tg:10", chat_id=10, user_id=20, turn_id="turn")
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Вопрос клиента"},
]


class TextArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class TextResult(BaseModel):
    text: str


class ToolLog:
    """What the tools actually ran, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []


def answer(
    text: str | None,
    *,
    finish_reason: str | None = "stop",
    refusal: str | None = None,
    usage: int | None = 10,
) -> LLMResult:
    """A model answer without tool calls."""
    return LLMResult(
        text=text,
        refusal=refusal,
        finish_reason=finish_reason,
        tool_calls=(),
        model="scripted",
        response_id=f"resp-{uuid.uuid4().hex[:8]}",
        usage=Usage(
            prompt_tokens=usage,
            completion_tokens=usage,
            total_tokens=None if usage is None else 2 * usage,
        ),
    )


def calls(
    *specs: tuple[str, dict[str, Any]],
    finish_reason: str | None = "tool_calls",
    usage: int | None = 10,
) -> LLMResult:
    """A model answer asking for each ``(name, arguments)`` call."""
    return LLMResult(
        text=None,
        refusal=None,
        finish_reason=finish_reason,
        tool_calls=tuple(
            ToolCall(id=f"call-{uuid.uuid4().hex[:8]}", name=name, arguments=json.dumps(args))
            for name, args in specs
        ),
        model="scripted",
        response_id=f"resp-{uuid.uuid4().hex[:8]}",
        usage=Usage(
            prompt_tokens=usage,
            completion_tokens=usage,
            total_tokens=None if usage is None else 2 * usage,
        ),
    )


class Observed:
    """A ToolLoopObserver that keeps every event in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, object]] = []

    def on_model_response(self, step: int, result: LLMResult) -> None:
        self.events.append(("model", step, result.response_id))

    def on_tool_executed(self, step: int, record: ToolExecutionRecord) -> None:
        self.events.append(("tool", step, record))


@pytest.fixture
def log() -> ToolLog:
    return ToolLog()


@pytest.fixture
def registry(log: ToolLog) -> ToolRegistry:
    """Two working tools that log their calls, and one that always breaks."""

    def echo(arguments: TextArguments) -> TextResult:
        log.calls.append(("echo", arguments.text))
        return TextResult(text=arguments.text)

    async def shout(arguments: TextArguments) -> TextResult:
        log.calls.append(("shout", arguments.text))
        return TextResult(text=arguments.text.upper())

    def broken(arguments: TextArguments) -> TextResult:
        log.calls.append(("broken", arguments.text))
        raise RuntimeError("database is down")

    registry = ToolRegistry()
    for name, handler in (("echo", echo), ("shout", shout), ("broken", broken)):
        registry.register(
            RegisteredTool(
                name=name,
                description=f"Инструмент {name}.",
                arguments_model=TextArguments,
                handler=handler,
            )
        )
    return registry


@pytest.fixture
def executor(registry: ToolRegistry) -> Iterator[ToolExecutor]:
    executor = ToolExecutor(registry)
    yield executor
    executor.close()


def make_loop(
    client: ScriptedClient,
    registry: ToolRegistry,
    executor: ToolExecutor,
    max_steps: int = 3,
    max_tool_calls: int = 4,
) -> BoundedToolLoop:
    return BoundedToolLoop(client, registry, executor, max_steps, max_tool_calls)


def tool_choices(client: ScriptedClient) -> list[ToolChoice]:
    return [choice for _, _, choice in client.requests]


async def test_direct_answer_makes_one_model_call_and_no_tool_call(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    final = answer("  Здравствуйте!  ")
    client = scripted(final)

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert result.text == "Здравствуйте!"
    assert result.model == "scripted"
    assert result.model_steps == 1
    assert result.response_ids == (final.response_id,)
    assert result.tool_calls_count == 0
    assert result.tool_names == ()
    assert result.audit_records == ()
    assert result.usage == Usage(prompt_tokens=10, completion_tokens=10, total_tokens=20)
    assert log.calls == []
    assert client.requests[0][1] == registry.api_schemas()


async def test_one_tool_call_then_an_answer(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    ask = calls(("echo", {"text": "заказ 8041"}))
    client = scripted(ask, answer("Готово"))

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert result.text == "Готово"
    assert log.calls == [("echo", "заказ 8041")]
    assert result.model_steps == 2
    assert result.tool_calls_count == 1
    assert result.tool_names == ("echo",)
    assert [r.status for r in result.audit_records] == [ToolStatus.SUCCESS]
    assert result.audit_records[0].call_id == ask.tool_calls[0].id

    second_request = client.requests[1][0]
    assert second_request[: len(MESSAGES)] == MESSAGES
    assistant, tool = second_request[len(MESSAGES) :]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"] == [
        {
            "id": ask.tool_calls[0].id,
            "type": "function",
            "function": {"name": "echo", "arguments": ask.tool_calls[0].arguments},
        }
    ]
    assert tool["role"] == "tool"
    assert tool["tool_call_id"] == ask.tool_calls[0].id
    assert json.loads(tool["content"]) == {"ok": True, "data": {"text": "заказ 8041"}}


async def test_two_tools_in_sequence_use_three_steps(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    first, second, final = (
        calls(("echo", {"text": "a"})),
        calls(("shout", {"text": "b"})),
        answer("Итог"),
    )
    client = scripted(first, second, final)

    result = await make_loop(client, registry, executor, max_steps=3).run(MESSAGES, CONTEXT)

    assert result.text == "Итог"
    assert log.calls == [("echo", "a"), ("shout", "b")]
    assert result.model_steps == 3
    assert result.response_ids == (first.response_id, second.response_id, final.response_id)
    assert result.tool_calls_count == 2
    assert result.tool_names == ("echo", "shout")
    assert [r.call_id for r in result.audit_records] == [
        first.tool_calls[0].id,
        second.tool_calls[0].id,
    ]
    assert result.usage == Usage(prompt_tokens=30, completion_tokens=30, total_tokens=60)
    # The third request carries both exchanges, in order.
    roles = [m["role"] for m in client.requests[2][0]]
    assert roles == ["developer", "user", "assistant", "tool", "assistant", "tool"]


@pytest.mark.parametrize("max_steps", [1, 2, 3, 4, 5])
async def test_only_the_last_allowed_step_forbids_tools(
    registry: ToolRegistry, executor: ToolExecutor, max_steps: int
) -> None:
    steps = [calls(("echo", {"text": str(i)})) for i in range(max_steps - 1)]
    client = scripted(*steps, answer("Ответ"))

    await make_loop(client, registry, executor, max_steps=max_steps).run(MESSAGES, CONTEXT)

    assert tool_choices(client) == ["auto"] * (max_steps - 1) + ["none"]
    # A server that ignores tool_choice cannot call a tool it was never offered.
    assert [tools for _, tools, _ in client.requests] == [registry.api_schemas()] * (
        max_steps - 1
    ) + [[]]


async def test_tool_call_on_the_last_step_is_a_limit_error_and_is_not_executed(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    client = scripted(
        calls(("echo", {"text": "first"})),
        calls(("echo", {"text": "on the last step"})),
        answer("never requested"),
    )

    with pytest.raises(ToolLoopLimitError) as raised:
        await make_loop(client, registry, executor, max_steps=2).run(MESSAGES, CONTEXT)

    assert raised.value.kind is TurnOutcome.LIMIT

    assert len(client.requests) == 2  # no model request beyond max_steps
    assert log.calls == [("echo", "first")]


async def test_several_calls_in_one_step_run_in_order_and_are_each_audited(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    batch = calls(("shout", {"text": "1"}), ("echo", {"text": "2"}), ("shout", {"text": "3"}))
    observed = Observed()
    client = scripted(batch, answer("Все три"))

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT, observed)

    assert log.calls == [("shout", "1"), ("echo", "2"), ("shout", "3")]
    ids = [call.id for call in batch.tool_calls]
    assert [r.call_id for r in result.audit_records] == ids
    assert result.tool_names == ("shout", "echo", "shout")
    assert result.tool_calls_count == 3
    assert [e[2].call_id for e in observed.events if isinstance(e[2], ToolExecutionRecord)] == ids
    sent = client.requests[1][0][len(MESSAGES) :]
    assert [m["role"] for m in sent] == ["assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in sent[1:]] == ids
    assert [json.loads(m["content"])["data"]["text"] for m in sent[1:]] == ["1", "2", "3"]


async def test_tool_call_cap_stops_a_batch_before_executing_it(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    client = scripted(calls(*[("echo", {"text": str(i)}) for i in range(3)]), answer("x"))

    with pytest.raises(ToolLoopLimitError) as raised:
        await make_loop(client, registry, executor, max_tool_calls=2).run(MESSAGES, CONTEXT)

    assert raised.value.kind is TurnOutcome.LIMIT

    assert log.calls == []
    assert len(client.requests) == 1


async def test_tool_call_cap_counts_calls_across_steps(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    client = scripted(
        calls(("echo", {"text": "1"}), ("echo", {"text": "2"})),
        calls(("echo", {"text": "3"})),
        answer("x"),
    )

    with pytest.raises(ToolLoopLimitError) as raised:
        await make_loop(client, registry, executor, max_steps=5, max_tool_calls=2).run(
            MESSAGES, CONTEXT
        )

    assert raised.value.kind is TurnOutcome.LIMIT

    assert log.calls == [("echo", "1"), ("echo", "2")]


@pytest.mark.parametrize(
    "bad",
    [
        answer(None, refusal="I can't help with that."),
        answer("", finish_reason="stop"),
        answer(None, finish_reason="stop"),
        answer("   \n\t", finish_reason="stop"),
        answer("Обрезанный отв", finish_reason="length"),
        answer("…", finish_reason="content_filter"),
        answer("Ответ", finish_reason=None),
        calls(("echo", {"text": "x"}), finish_reason="length"),
    ],
    ids=[
        "refusal",
        "empty",
        "none-text",
        "whitespace",
        "length",
        "content_filter",
        "no-finish-reason",
        "tool-call-cut-by-length",
    ],
)
async def test_answers_outside_the_protocol_are_protocol_errors(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog, bad: LLMResult
) -> None:
    client = scripted(bad)

    with pytest.raises(ToolLoopProtocolError) as raised:
        await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert raised.value.kind is TurnOutcome.MODEL_ERROR

    assert log.calls == []


async def test_a_refusal_wins_over_any_text_beside_it(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    client = scripted(answer("Вот ответ", refusal="I can't help with that."))

    with pytest.raises(ToolLoopProtocolError, match="refused") as raised:
        await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert raised.value.kind is TurnOutcome.MODEL_ERROR


async def test_stop_with_tool_calls_still_runs_the_calls(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    """Some compatible servers report finish_reason 'stop' together with tool calls."""
    client = scripted(calls(("echo", {"text": "x"}), finish_reason="stop"), answer("ok"))

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert result.text == "ok"
    assert log.calls == [("echo", "x")]


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (LLMRateLimitError("429"), TurnOutcome.MODEL_UNAVAILABLE),
        (LLMTimeoutError("slow"), TurnOutcome.MODEL_UNAVAILABLE),
        (LLMUnavailableError("502"), TurnOutcome.MODEL_UNAVAILABLE),
        (LLMRequestError("400"), TurnOutcome.BAD_REQUEST),
        (LLMConfigurationError("404"), TurnOutcome.MODEL_MISCONFIGURED),
        (LLMUnreachableError("refused"), TurnOutcome.MODEL_UNREACHABLE),
        (LLMBadResponseError("garbage"), TurnOutcome.MODEL_ERROR),
    ],
    ids=[
        "rate-limit",
        "timeout",
        "unavailable",
        "bad-request",
        "misconfigured",
        "unreachable",
        "bad-response",
    ],
)
async def test_model_failure_becomes_a_loop_error_of_its_kind_with_the_cause_chained(
    registry: ToolRegistry, executor: ToolExecutor, failure: LLMClientError, kind: TurnOutcome
) -> None:
    client = scripted(calls(("echo", {"text": "x"})), failure)

    with pytest.raises(ToolLoopError) as raised:
        await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert raised.value.kind is kind
    # The seed raises the base class itself for a failed model call, not a subclass.
    assert type(raised.value) is ToolLoopError
    assert raised.value.__cause__ is failure


async def test_technical_failure_ends_the_turn_with_its_audit_record(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    ask = calls(("broken", {"text": "x"}), ("echo", {"text": "after"}))
    observed = Observed()
    client = scripted(ask, answer("never requested"))

    with pytest.raises(ToolLoopExecutionError) as raised:
        await make_loop(client, registry, executor).run(MESSAGES, CONTEXT, observed)

    assert raised.value.kind is TurnOutcome.TOOL_FAILURE
    tool_events = [event for event in observed.events if event[0] == "tool"]
    assert len(tool_events) == 1
    assert observed.events[-1] == tool_events[0]
    _, step, audit = tool_events[0]
    assert step == 1
    assert isinstance(audit, ToolExecutionRecord)
    assert (audit.call_id, audit.tool_name) == (ask.tool_calls[0].id, "broken")
    assert (audit.status, audit.error_code) == (ToolStatus.TECHNICAL_ERROR, "technical_error")
    assert ("echo", "after") not in log.calls
    assert len(client.requests) == 1
    # The application sees the failed execution on the error itself, as the seed design has it.
    assert raised.value.audit is audit
    assert raised.value.audit.duration_seconds >= 0


def tool_message(request: list[Message], call_id: str) -> dict[str, Any]:
    content = next(m["content"] for m in request if m.get("tool_call_id") == call_id)
    decoded: dict[str, Any] = json.loads(str(content))
    return decoded


RejectionCase = tuple[str, str, str, tuple[str, ...]]


@pytest.mark.parametrize(
    "case",
    [
        ("delete_order", '{"text": "secret-value"}', "unknown_tool", ("echo", "shout")),
        ("echo", '{"txt": "secret-value"}', "invalid_arguments", ("text", "txt")),
        ("echo", '{"text": "secret-value"', "invalid_arguments", ("JSON",)),
        ("echo", '{"text": 12345}', "invalid_arguments", ("text", "string")),
    ],
    ids=["unknown-tool", "wrong-field", "not-json", "wrong-type"],
)
async def test_a_rejected_call_is_answered_to_the_model_which_then_corrects_itself(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog, case: RejectionCase
) -> None:
    name, arguments, code, mentioned = case
    bad = LLMResult(
        text=None,
        refusal=None,
        finish_reason="tool_calls",
        tool_calls=(ToolCall(id="call-bad", name=name, arguments=arguments),),
        model="scripted",
        response_id="resp-bad",
        usage=Usage(prompt_tokens=10, completion_tokens=10, total_tokens=20),
    )
    observed = Observed()
    client = scripted(bad, calls(("echo", {"text": "fixed"})), answer("Готово"))

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT, observed)

    assert result.text == "Готово"
    assert log.calls == [("echo", "fixed")]  # the handler never ran for the rejected call
    rejected = result.audit_records[0]
    assert (rejected.call_id, rejected.status, rejected.error_code) == (
        "call-bad",
        ToolStatus.REJECTED,
        code,
    )
    assert observed.events[1] == ("tool", 1, rejected)
    reply = tool_message(client.requests[1][0], "call-bad")
    assert reply["ok"] is False
    assert reply["error"]["code"] == code
    for word in mentioned:
        assert word in reply["error"]["message"]
    assert "secret-value" not in reply["error"]["message"]
    assert "12345" not in reply["error"]["message"]


async def test_a_rejected_call_does_not_stop_the_rest_of_its_batch(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    batch = calls(("echo", {"txt": "x"}), ("shout", {"text": "ok"}))
    client = scripted(batch, answer("Готово"))

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert log.calls == [("shout", "ok")]
    assert [r.status for r in result.audit_records] == [
        ToolStatus.REJECTED,
        ToolStatus.SUCCESS,
    ]
    sent = client.requests[1][0][len(MESSAGES) :]
    assert [m["role"] for m in sent] == ["assistant", "tool", "tool"]


async def test_repeated_rejections_end_at_the_step_budget_with_the_limit_outcome(
    registry: ToolRegistry, executor: ToolExecutor, log: ToolLog
) -> None:
    client = scripted(
        calls(("echo", {"txt": "1"})),
        calls(("echo", {"txt": "2"})),
        calls(("echo", {"txt": "3"})),  # a server ignoring that no tools were offered
    )

    with pytest.raises(ToolLoopLimitError) as raised:
        await make_loop(client, registry, executor, max_steps=3).run(MESSAGES, CONTEXT)

    assert raised.value.kind is TurnOutcome.LIMIT

    assert log.calls == []
    assert len(client.requests) == 3
    assert client.requests[2][1] == []


@pytest.mark.parametrize("missing_at", [0, 1])
async def test_token_sums_are_unknown_when_one_step_lacks_usage(
    registry: ToolRegistry, executor: ToolExecutor, missing_at: int
) -> None:
    steps = [calls(("echo", {"text": "x"})), answer("ok")]
    steps[missing_at] = (
        calls(("echo", {"text": "x"}), usage=None) if missing_at == 0 else answer("ok", usage=None)
    )
    client = scripted(*steps)

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT)

    assert result.usage == Usage(prompt_tokens=None, completion_tokens=None, total_tokens=None)


async def test_input_messages_are_not_mutated(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    messages = copy.deepcopy(MESSAGES)
    client = scripted(calls(("echo", {"text": "x"})), answer("ok"))

    await make_loop(client, registry, executor).run(messages, CONTEXT)

    assert messages == MESSAGES


async def test_observer_sees_every_model_response_and_tool_audit_in_order(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    first, second, final = (
        calls(("echo", {"text": "1"}), ("shout", {"text": "2"})),
        calls(("echo", {"text": "3"})),
        answer("ok"),
    )
    observed = Observed()
    client = scripted(first, second, final)

    result = await make_loop(client, registry, executor).run(MESSAGES, CONTEXT, observed)

    records = result.audit_records
    assert observed.events == [
        ("model", 1, first.response_id),
        ("tool", 1, records[0]),
        ("tool", 1, records[1]),
        ("model", 2, second.response_id),
        ("tool", 2, records[2]),
        ("model", 3, final.response_id),
    ]


@pytest.mark.parametrize(("max_steps", "max_tool_calls"), [(0, 4), (6, 4), (3, 0)])
def test_loop_limits_are_validated(
    registry: ToolRegistry, executor: ToolExecutor, max_steps: int, max_tool_calls: int
) -> None:
    with pytest.raises(ValueError, match="must be"):
        make_loop(scripted(), registry, executor, max_steps, max_tool_calls)
