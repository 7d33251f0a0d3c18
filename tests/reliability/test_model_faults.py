"""Model-server faults through the chat service, over HTTP with the real OpenAI SDK.

Every fault ends in an answer or in a :class:`ChatServiceError` of the right kind;
a failed turn leaves the stored history exactly as it was, and the audit stream
holds the turn's entry with the matching outcome.
"""

import json
from dataclasses import dataclass

import pytest

from bot.chat_errors import ChatServiceError
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    empty_choices,
    error,
    hang,
    json_answer,
    rate_limited,
    raw_body,
    refusal_answer,
    text_answer,
    tool_call_answer,
    tool_calls_answer,
)
from tests.support.corpus import RECORDED_COMPLETIONS, load_corpus, requires
from turn import TurnOutcome, new_turn_id

BEFORE = [("user", "было до"), ("assistant", "Ответ до сбоя.")]

FAST_RETRY = {"retry-after-ms": "10"}
"""Keeps the SDK's back-off between retries short (it honours retry-after-ms)."""


async def _history_with_one_good_turn(engine, server: ScriptedOpenAIServer) -> None:
    server.script(text_answer("Ответ до сбоя."))
    await engine.ask("c1", "было до")
    assert await engine.history("c1") == BEFORE


async def test_429_with_retry_after_is_retried_and_the_turn_is_answered(make_engine, openai_server):
    engine = make_engine(max_retries=2)
    openai_server.script(rate_limited(0.01), text_answer("Ответ после паузы."))
    turn_id = new_turn_id()

    reply = await engine.ask("c1", "Где заказ?", turn_id=turn_id)

    assert reply.text == "Ответ после паузы."
    assert len(openai_server.requests) == 2
    assert await engine.history("c1") == [("user", "Где заказ?"), ("assistant", reply.text)]
    assert (await engine.turn_entry(turn_id))["outcome"] == "answered"


async def test_500_then_success_is_answered_after_one_retry(make_engine, openai_server):
    engine = make_engine(max_retries=1)
    openai_server.script(error(500, headers=FAST_RETRY), text_answer("Ответ."))
    reply = await engine.ask("c1", "вопрос")
    assert reply.text == "Ответ."
    assert len(openai_server.requests) == 2


@dataclass(frozen=True)
class Fault:
    """What the model server does, the client's retry budget, and what must come of it."""

    steps: list[Reply]
    expected: TurnOutcome
    requests: int = 1
    max_retries: int = 0
    timeout_seconds: float = 5.0


FAULTS = {
    "429-persistent": Fault(
        [rate_limited(0.01)] * 2, TurnOutcome.MODEL_UNAVAILABLE, 2, max_retries=1
    ),
    "500-persistent": Fault(
        [error(500, headers=FAST_RETRY)] * 2, TurnOutcome.MODEL_UNAVAILABLE, 2, max_retries=1
    ),
    "503": Fault([error(503, headers=FAST_RETRY)], TurnOutcome.MODEL_UNAVAILABLE),
    "hung-timeout": Fault([hang(30.0)], TurnOutcome.MODEL_UNAVAILABLE, timeout_seconds=0.3),
    "400-not-retried": Fault(
        [error(400, "context too long", error_type="invalid_request_error")],
        TurnOutcome.BAD_REQUEST,
        max_retries=2,
    ),
    "not-json": Fault([raw_body("{not json")], TurnOutcome.MODEL_ERROR),
    "no-choices-key": Fault(
        [json_answer({"id": "x", "object": "chat.completion"})], TurnOutcome.MODEL_ERROR
    ),
    "empty-choices": Fault([empty_choices()], TurnOutcome.MODEL_ERROR),
    "null-content": Fault([text_answer(None)], TurnOutcome.MODEL_ERROR),
    "finish-length": Fault([text_answer("обрыв", finish_reason="length")], TurnOutcome.MODEL_ERROR),
    "refusal": Fault([refusal_answer()], TurnOutcome.MODEL_ERROR),
    # A model that keeps repeating a rejected call is told why each time, then hits the budget.
    "tool-args-invalid-json-every-step": Fault(
        [tool_call_answer("get_order_status", '{"order_id": "80')] * 3, TurnOutcome.LIMIT, 3
    ),
    "unknown-tool-every-step": Fault(
        [tool_call_answer("drop_database", {})] * 3, TurnOutcome.LIMIT, 3
    ),
    "tools-until-the-last-step": Fault(
        [tool_call_answer("get_support_hours", {})] * 3, TurnOutcome.LIMIT, 3
    ),
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
async def test_a_model_fault_gives_its_typed_error_and_no_half_turn(
    make_engine, openai_server: ScriptedOpenAIServer, fault: Fault
):
    engine = make_engine(max_retries=fault.max_retries, timeout_seconds=fault.timeout_seconds)
    await _history_with_one_good_turn(engine, openai_server)
    before_requests = len(openai_server.requests)
    openai_server.script(*fault.steps)
    turn_id = new_turn_id()

    with pytest.raises(ChatServiceError) as raised:
        await engine.ask("c1", "Где мой заказ 8041?", turn_id=turn_id)

    assert type(raised.value) is ChatServiceError
    assert raised.value.kind == fault.expected
    assert raised.value.turn_id == turn_id
    assert len(openai_server.requests) - before_requests == fault.requests
    assert openai_server.unscripted == []
    assert await engine.history("c1") == BEFORE
    assert (await engine.turn_entry(turn_id))["outcome"] == fault.expected


@pytest.mark.parametrize(
    ("call", "error_code"),
    [
        (("get_order_status", '{"order_id": '), "invalid_arguments"),
        (("get_order_status", {"order_id": "8041", "admin": True}), "invalid_arguments"),
        (("transfer_money", {"amount": 1}), "unknown_tool"),
    ],
)
async def test_a_rejected_tool_call_is_audited_as_rejected_and_the_turn_recovers(
    make_engine, openai_server, call, error_code
):
    engine = make_engine()
    openai_server.script(tool_calls_answer([call]), text_answer("Уточните номер заказа."))
    turn_id = new_turn_id()
    reply = await engine.ask("c1", "вопрос", turn_id=turn_id)
    assert reply.text == "Уточните номер заказа."
    assert (await engine.turn_entry(turn_id))["outcome"] == "answered"
    rejection = json.loads(openai_server.requests[1].messages[-1]["content"])
    assert (rejection["ok"], rejection["error"]["code"]) == (False, error_code)
    tool_entries = [
        e for e in await engine.audit_entries() if e["type"] == "tool" and e["turn_id"] == turn_id
    ]
    assert [(e["tool_name"], e["status"], e["error_code"]) for e in tool_entries] == [
        (call[0], "rejected", error_code)
    ]


async def test_a_two_tool_turn_over_http_answers_and_audits_both_tools(make_engine, openai_server):
    engine = make_engine()
    openai_server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        tool_call_answer("get_support_hours", {}),
        text_answer("Заказ в пути, поддержка работает до 20:00."),
    )
    turn_id = new_turn_id()
    reply = await engine.ask("c1", "Где заказ 8041 и когда вы работаете?", turn_id=turn_id)
    assert reply.tool_names == ("get_order_status", "get_support_hours")
    # The tool results went back to the model as the documented envelope.
    tool_messages = [m for m in openai_server.requests[2].messages if m["role"] == "tool"]
    assert [json.loads(m["content"])["ok"] for m in tool_messages] == [True, True]
    entry = await engine.turn_entry(turn_id)
    assert (entry["outcome"], entry["tool_names"]) == (
        "answered",
        "get_order_status,get_support_hours",
    )


def _recorded_completions() -> list[dict[str, object]]:
    return load_corpus(RECORDED_COMPLETIONS)


@requires(RECORDED_COMPLETIONS)
async def test_recorded_real_completions_end_in_an_answer_or_a_typed_error(
    make_engine, openai_server
):
    """14 bodies recorded from the live API (openai-python's tests) as the model's first answer."""
    engine = make_engine()
    openai_server.responder = lambda body: text_answer("Запасной ответ.")
    outcomes = []
    for index, body in enumerate(_recorded_completions()):
        key = f"rec{index}"
        openai_server.script(json_answer(body))
        turn_id = new_turn_id()
        try:
            reply = await engine.ask(key, "Какая погода?", turn_id=turn_id)
        except ChatServiceError as failure:
            outcomes.append(failure.kind)
            assert await engine.history(key) == []
        else:
            outcomes.append(TurnOutcome.ANSWERED)
            assert await engine.history(key) == [
                ("user", "Какая погода?"),
                ("assistant", reply.text),
            ]
        assert (await engine.turn_entry(turn_id))["outcome"] == outcomes[-1]
    # The corpus holds plain answers, a refusal, a cut-off answer and foreign tool calls;
    # a foreign call is answered to the model as an unknown tool, and its next answer used.
    assert {"answered", "model_error"} <= set(outcomes)
    tool_entries = [e for e in await engine.audit_entries() if e["type"] == "tool"]
    assert tool_entries
    assert {(e["status"], e["error_code"]) for e in tool_entries} == {("rejected", "unknown_tool")}
