"""The verdict on a press (pure), and a stored action whose arguments no longer validate."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.actions.buttons import ActionPress
from bot.actions.presses import CardPresses, Press, Verdict, judge
from bot.customer_texts import ACTION_FAILED_TEXT
from bot.sessions.pending import PendingAction, new_action_id
from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.testing.clock import SteppedClockLoop, run_with_stepped_clock
from bot.tryout.demo_shop import RedisDemoShop
from tools.default_registry import build_default_tool_registry
from tools.order_actions import CancelOrderArguments
from tools.registry import ToolRegistry
from tools.shop_backend import Customer
from tools.shop_data import ShopData
from tools.write_tools import ActionResult, WriteTool

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def pending(action_id: str = "a" * 16, arguments: str = "{}") -> PendingAction:
    return PendingAction(
        action_id=action_id,
        tool_name="cancel_order",
        arguments=arguments,
        description="Отменить заказ 8042",
        proposed_at=NOW,
        turn_id="T",
        user_id=7,
    )


def press(action_id: str = "a" * 16, *, presser: int = 7, choice: str = "yes") -> Press:
    return Press(
        action_id=action_id,
        choice="yes" if choice == "yes" else "no",
        presser_id=presser,
        chat_id=7,
        card_message_id=1,
    )


@pytest.mark.parametrize(
    ("current", "pressed", "seconds", "verdict"),
    [
        (pending(), press(), 10, Verdict.CONFIRM),
        (pending(), press(choice="no"), 10, Verdict.DECLINE),
        (pending(), press(), 601, Verdict.EXPIRED),
        (pending(), press(presser=8), 10, Verdict.FOREIGN),
        (pending(), press("b" * 16), 10, Verdict.STALE),
        (None, press(), 10, Verdict.STALE),
    ],
)
def test_a_press_is_judged_against_the_pending_action(
    current: PendingAction | None, pressed: Press, seconds: float, verdict: Verdict
) -> None:
    assert judge(current, pressed, NOW + timedelta(seconds=seconds), 600) is verdict


def test_callback_data_carries_only_the_id_and_the_choice_and_forgeries_are_refused() -> None:
    action_id = new_action_id()
    yes, no = ActionPress.of(action_id, "yes").pack(), ActionPress.of(action_id, "no").pack()
    # The format of the cards sent before the data was typed: they keep working.
    assert (yes, no) == (f"act:{action_id}:y", f"act:{action_id}:n")
    assert (ActionPress.unpack(yes).action_id, ActionPress.unpack(yes).choice) == (action_id, "yes")
    assert ActionPress.unpack(no).choice == "no"
    assert len(no.encode()) <= 64
    forgeries = (
        "",
        "act:short:y",
        f"act:{action_id}:x",
        f"act:{action_id.upper()}:y",
        f"act:{action_id}:y:y",
        f"act:{action_id} :y",
        f"csat:{action_id}:y",
    )
    for forged in forgeries:
        with pytest.raises((TypeError, ValueError)):
            ActionPress.unpack(forged)


async def test_arguments_that_no_longer_validate_fail_kindly(
    redis_client: AsyncRedisClient,
) -> None:
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    shop = RedisDemoShop(redis_client, RedisKeys("judge"), shop_data, clock=lambda: NOW)
    registry = build_default_tool_registry(shop_data, clock=lambda: NOW, shop=shop)

    actions = CardPresses(registry=registry, clock=lambda: NOW)
    result = await actions.settle(
        pending(arguments='{"order_id": "80", "reason": ""}'),
        Verdict.CONFIRM,
        Customer(user_id=7, chat_id=7),
    )
    assert (result.done, result.error_code, result.card_text) == (
        False,
        "invalid_arguments",
        ACTION_FAILED_TEXT,
    )
    order = await shop.order(Customer(user_id=7, chat_id=7), "8042")
    assert order is not None
    assert order.status == "processing"


def test_a_confirmed_write_whose_shop_hangs_ends_at_its_deadline() -> None:
    # The loop's clock is the test's: the shop's hour-long deadline passes when the test says.
    deadline = 3600.0

    async def main(clock: SteppedClockLoop) -> None:
        started = asyncio.Event()
        cut = asyncio.Event()
        asked_after: list[str] = []

        async def hanging(_arguments: object, _customer: Customer, key: str) -> ActionResult:
            started.set()
            try:
                await asyncio.Event().wait()  # a shop that never answers
            except asyncio.CancelledError:
                cut.set()
                raise
            raise AssertionError("unreachable")

        async def applied_nothing(
            _arguments: object, _customer: Customer, key: str
        ) -> ActionResult | None:
            asked_after.append(key)
            return None  # asked afterwards, the shop says nothing was applied under the key

        tool: WriteTool[CancelOrderArguments, None] = WriteTool(
            name="cancel_order",
            description="Отменяет заказ.",
            arguments_model=CancelOrderArguments,
            check=lambda _arguments, _customer: asyncio.sleep(0),
            describe=lambda _arguments, _state: "",
            handler=hanging,
            lookup=applied_nothing,
            declined=lambda _arguments, _customer: "",
            timeout_seconds=deadline,
        )
        registry = ToolRegistry()
        registry.register_write(tool)
        actions = CardPresses(registry=registry, clock=lambda: NOW)

        settling = asyncio.create_task(
            actions.settle(
                pending(arguments='{"order_id": "8042", "reason": "передумал"}'),
                Verdict.CONFIRM,
                Customer(user_id=7, chat_id=7),
            )
        )
        await started.wait()
        # A minute before the deadline the shop is still waited for.
        await clock.spend(deadline - 60)
        assert not settling.done()
        assert not cut.is_set()
        await clock.spend(61)
        result = await settling

        assert cut.is_set()
        assert asked_after == ["a" * 16]
        assert (result.done, result.error_code) == (False, "technical_error")

    run_with_stepped_clock(main)
