"""Arbitrary model responses: every turn ends within budget, answered or with a typed error.

Hypothesis writes the model's side of the conversation (any finish reason, any
text or none, refusals, any list of tool calls with any names and arguments,
client failures); the real registry and executor run whatever is asked. The
properties are about the loop and the chat service, so the model is the
in-process scripted client here; each example runs in a fresh event loop.
"""

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bot.chat_errors import ChatServiceError
from bot.engine.tool_loop import BoundedToolLoop, ToolLoopResult
from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from bot.llm.types import LLMResult, Message
from bot.sessions.models import ConversationSession
from bot.settings import DEMO_SHOP_DATA
from bot.testing.chat_harness import ChatHarness
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import scripted
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from turn import ToolCall, ToolLoopError, ToolStatus, TurnContext, TurnOutcome, Usage, new_turn_id

MAX_TOOL_CALLS = 4

VALID_ARGUMENTS = {
    "get_order_status": ['{"order_id": "8041"}', '{"order_id": "5150"}', '{"order_id": "0000"}'],
    "get_return_policy": ['{"product": "наушники"}', '{"product": "кофемашина"}'],
    "search_products": ['{"query": "чайник"}', '{"query": "кофе"}'],
    "get_support_hours": ["{}"],
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
tool_names = st.sampled_from([*VALID_ARGUMENTS, "drop_database", ""]) | st.text(max_size=20)


@st.composite
def tool_calls(draw: st.DrawFn) -> ToolCall:
    name = draw(tool_names)
    arguments = draw(
        st.sampled_from(VALID_ARGUMENTS.get(name, ["{}"]))
        | json_values.map(lambda value: json.dumps(value, ensure_ascii=False))
        | st.text(max_size=40)
    )
    return ToolCall(id=draw(st.text(min_size=1, max_size=12)), name=name, arguments=arguments)


plausible_calls = st.sampled_from(
    [
        ToolCall(id=f"call-{name}", name=name, arguments=args[0])
        for name, args in VALID_ARGUMENTS.items()
    ]
)
results = st.builds(
    LLMResult,
    text=st.one_of(st.text(min_size=1, max_size=300), st.just("Ответ."), st.none(), st.just("  ")),
    refusal=st.one_of(st.none(), st.none(), st.none(), st.text(max_size=30)),
    finish_reason=st.one_of(
        st.sampled_from(["stop", "stop", "tool_calls", "length", "content_filter", None]),
        st.text(max_size=10),
    ),
    tool_calls=st.one_of(
        st.just(()),
        st.lists(plausible_calls, min_size=1, max_size=2).map(tuple),
        st.lists(tool_calls(), max_size=3).map(tuple),
    ),
    model=st.just("prop-model"),
    response_id=st.text(min_size=1, max_size=10),
    usage=st.builds(
        Usage,
        prompt_tokens=st.none() | st.integers(0, 10_000),
        completion_tokens=st.none() | st.integers(0, 10_000),
        total_tokens=st.none() | st.integers(0, 20_000),
    ),
)
failures = st.sampled_from(
    [
        LLMTimeoutError("timeout"),
        LLMRateLimitError("429"),
        LLMUnavailableError("502"),
        LLMRequestError("400"),
        LLMBadResponseError("garbage"),
    ]
)
# Mostly responses, sometimes a failed request; five of them, one per possible model call.
final_answers = st.builds(
    LLMResult,
    text=st.text(min_size=1, max_size=300),
    refusal=st.none(),
    finish_reason=st.just("stop"),
    tool_calls=st.just(()),
    model=st.just("prop-model"),
    response_id=st.just("resp"),
)
tool_requests = st.builds(
    LLMResult,
    text=st.none() | st.text(max_size=20),
    refusal=st.none(),
    finish_reason=st.sampled_from(["tool_calls", "stop"]),
    tool_calls=st.lists(plausible_calls | tool_calls(), min_size=1, max_size=3).map(tuple),
    model=st.just("prop-model"),
    response_id=st.just("resp"),
)
# Wild responses, a well-formed answer, a tool request, or a failed request, in a mix
# that reaches every ending (answer, protocol error, limit, tool failure, model failure).
answers = st.sampled_from([0, 0, 1, 2, 2, 3]).flatmap(
    lambda kind: (results, final_answers, tool_requests, failures)[kind]
)
responses = st.lists(answers, min_size=5, max_size=5)


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    return build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))


@pytest.fixture(scope="module")
def executor(registry: ToolRegistry) -> Iterator[ToolExecutor]:
    pool = ToolExecutor(registry)
    yield pool
    pool.close()


@settings(max_examples=100, deadline=None)
@given(answers=responses, max_steps=st.integers(1, 5))
def test_any_model_behaviour_ends_the_loop_within_budget_with_an_answer_or_a_typed_error(
    registry: ToolRegistry,
    executor: ToolExecutor,
    answers: list[LLMResult | LLMClientError],
    max_steps: int,
):
    client = scripted(*answers)  # a sixth request would break the budget: AssertionError
    loop = BoundedToolLoop(client, registry, executor, max_steps, MAX_TOOL_CALLS)
    messages: list[Message] = [{"role": "user", "content": "Где заказ?"}]
    context = TurnContext(conversation_key="1", chat_id=1, user_id=7, turn_id="T")

    try:
        outcome: ToolLoopResult | ToolLoopError = asyncio.run(loop.run(messages, context))
    except ToolLoopError as error:
        outcome = error

    event(type(outcome).__name__)
    assert 1 <= len(client.requests) <= max_steps
    if len(client.requests) == max_steps:
        assert client.requests[-1][2] == "none"  # the last allowed call forbids tools
    assert all(choice == "auto" for _, _, choice in client.requests[: max_steps - 1])
    if isinstance(outcome, ToolLoopResult):
        assert outcome.text.strip()
        assert outcome.model_steps == len(client.requests)
        assert outcome.tool_calls_count <= MAX_TOOL_CALLS
        # A call of an unregistered tool is answered to the model as rejected, never run.
        assert all(
            record.status == ToolStatus.REJECTED
            for record in outcome.audit_records
            if record.tool_name not in registry.names()
        )
    if len(client.requests) == max_steps:
        assert client.requests[-1][1] == []  # and offers no tools at all
    assert messages == [{"role": "user", "content": "Где заказ?"}]  # the caller's list is intact


# What the chat service tells the customer when the model's request itself failed.
KIND_OF_MODEL_FAILURE = {
    LLMTimeoutError: "model_unavailable",
    LLMRateLimitError: "model_unavailable",
    LLMUnavailableError: "model_unavailable",
    LLMRequestError: "bad_request",
    LLMBadResponseError: "model_error",
}
# What a turn can end in when every model request was answered (badly).
KINDS_OF_BAD_ANSWERS = {"model_error", "tool_failure", "limit"}


async def _one_turn(url: str, answers, max_steps: int) -> None:
    redis = aioredis.Redis.from_url(url)
    client = scripted(*answers)  # a sixth request would break the budget: AssertionError
    harness = ChatHarness(
        redis,
        client,
        prefix="prop",
        TOOL_MAX_STEPS=max_steps,
        TOOL_MAX_CALLS_PER_TURN=MAX_TOOL_CALLS,
        SESSION_LOCK_WAIT_SECONDS=5,
    )
    store = harness.store
    key = uuid.uuid4().hex
    turn_id = new_turn_id()
    try:
        before = ConversationSession.start(key, _epoch(), "p", "1").with_turn(
            "раньше", "ответ раньше", _epoch(), "1"
        )
        await redis.hset(store.keys(key).session, mapping={"v": "1", "d": before.model_dump_json()})
        failure: ChatServiceError | None = None
        outcome: TurnOutcome
        try:
            reply = await harness.ask(key, "Где заказ?", user_id=7, turn_id=turn_id)
        except ChatServiceError as error:
            failure = error
        last_answer = answers[len(client.requests) - 1]
        if failure is not None:
            # The front end shows the incident message with this turn id: the customer hears back.
            assert failure.turn_id == turn_id
            # The kind names what went wrong: the failed request, else the bad answers.
            if isinstance(last_answer, LLMClientError):
                assert failure.kind == KIND_OF_MODEL_FAILURE[type(last_answer)]
            else:
                assert failure.kind in KINDS_OF_BAD_ANSWERS
            expected_messages = before.messages
            outcome = failure.kind
        else:
            assert isinstance(last_answer, LLMResult)
            assert reply.text == (last_answer.text or "").strip() != ""
            expected_messages = (*before.messages, *_pair(reply.text))
            outcome = TurnOutcome.ANSWERED
        stored = ConversationSession.model_validate_json(
            await redis.hget(store.keys(key).session, "d") or b""
        )
        assert [(m.role, m.content) for m in stored.messages] == [
            (m.role, m.content) for m in expected_messages
        ]
        assert await redis.exists(store.keys(key).lease) == 0  # the lease was given back
        turns = [
            fields
            for fields in await harness.audit_entries()
            if fields["turn_id"] == turn_id and fields["type"] == "turn"
        ]
        assert [fields["outcome"] for fields in turns] == [outcome]
        event(outcome)
    finally:
        await harness.close()
        await redis.aclose()


def _pair(answer: str):
    return (
        ConversationSession.start("x", _epoch(), "p", "1")
        .with_turn("Где заказ?", answer, _epoch(), "1")
        .messages
    )


def _epoch() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


# Only session- and module-scoped fixtures: nothing is shared between examples by accident.
@settings(max_examples=60, deadline=None)
@given(answers=responses, max_steps=st.integers(1, 5))
def test_any_model_behaviour_leaves_a_readable_session_and_one_audited_outcome(
    redis_server: RedisServer,
    answers: list[LLMResult | LLMClientError],
    max_steps: int,
):
    """Answered: exactly one new pair; failed: history untouched; always one turn entry."""
    asyncio.run(_one_turn(redis_server.url, answers, max_steps))
