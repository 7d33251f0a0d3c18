"""The handoff state machine's table, its idle rule, and the loop's typed handoff outcome."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest

from bot.engine.tool_loop import BoundedToolLoop
from bot.sessions.handoff_machine import (
    TRANSITIONS,
    HandoffEvent,
    HandoffTransitionError,
    IdleRule,
    step,
)
from bot.sessions.models import ConversationSession, HandoffState
from bot.testing.scripted_client import scripted
from tests.unit.test_tool_loop import CONTEXT, MESSAGES, answer, calls
from tools.execution import ToolExecutor
from tools.human_agent import build_request_human_agent_tool
from tools.registry import ToolRegistry

STATES: tuple[HandoffState, ...] = get_args(HandoffState)
START = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_each_state_and_event_has_at_most_one_row() -> None:
    keys = [(row.source, row.event) for row in TRANSITIONS]
    assert len(keys) == len(set(keys))


def test_every_state_is_reachable_and_every_handoff_can_end() -> None:
    assert {row.target for row in TRANSITIONS} == set(STATES)
    for state in ("waiting", "human"):
        assert step(state, HandoffEvent.STAFF_CLOSES).target == "bot"
        assert step(state, HandoffEvent.GOES_IDLE).target == "bot"


def test_opening_writes_an_opened_entry_and_ending_a_closed_one() -> None:
    for row in TRANSITIONS:
        if row.source == "bot" and row.target != "bot":
            assert "opened" in row.audit, row
            assert row.staff[0] in ("open", "copy_to_customer"), row
        if row.source != "bot" and row.target == "bot":
            assert row.audit == ("closed",), row
            assert row.staff == ("post", "ended"), row


def test_an_event_the_table_does_not_list_is_refused() -> None:
    with pytest.raises(HandoffTransitionError, match="bot on goes_idle"):
        step("bot", HandoffEvent.GOES_IDLE)
    with pytest.raises(HandoffTransitionError):
        step("human", HandoffEvent.BOT_ANSWERS)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def session(state: HandoffState, activity: datetime) -> ConversationSession:
    return ConversationSession(
        conversation_key="tg:1",
        created_at=START,
        updated_at=activity,
        prompt_id="support_chat",
        prompt_version="1",
    ).with_handoff(state, activity)


def test_the_idle_rule_ends_a_quiet_handoff_on_its_clock() -> None:
    clock = Clock()
    rule = IdleRule(idle_seconds=600, clock=clock)
    waiting = session("waiting", START)
    assert rule.state(waiting) == "waiting"
    clock.now = START + timedelta(seconds=599)
    assert not rule.is_idle(waiting)
    clock.now = START + timedelta(seconds=600)
    assert rule.is_idle(waiting)
    assert rule.state(waiting) == "bot"
    assert rule.state(None) == "bot"
    # A conversation the bot answers is never idle, however long it is quiet.
    assert not rule.is_idle(session("bot", START), START + timedelta(days=3))


@pytest.fixture
def handoff_executor() -> Iterator[tuple[ToolRegistry, ToolExecutor]]:
    registry = ToolRegistry()
    registry.register(build_request_human_agent_tool())
    executor = ToolExecutor(registry)
    yield registry, executor
    executor.close()


async def test_the_model_asking_for_a_person_ends_the_turn_with_a_typed_handoff(
    handoff_executor: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = handoff_executor
    client = scripted(
        calls(("request_human_agent", {"reason": "complaint"})), answer("Зову сотрудника.")
    )
    result = await BoundedToolLoop(client, registry, executor, 3, 4).run(MESSAGES, CONTEXT)
    assert result.handoff is not None
    assert result.handoff.reason == "complaint"


async def test_a_rejected_handoff_call_is_no_handoff(
    handoff_executor: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = handoff_executor
    client = scripted(
        calls(("request_human_agent", {"reason": "мне плохо"})), answer("Чем ещё помочь?")
    )
    result = await BoundedToolLoop(client, registry, executor, 3, 4).run(MESSAGES, CONTEXT)
    assert result.handoff is None
