"""The four support tools against the shipped demo shop data, through the real executor."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tools.default_registry import build_default_tool_registry
from tools.execution import ToolArgumentsError, ToolExecutor
from tools.human_agent import build_request_human_agent_tool
from tools.product_search import MAX_RESULTS
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from tools.support_hours import closed_note
from turn import ToolCall, ToolStatus, TurnContext

OWNER = 100500


async def run(
    executor: ToolExecutor, name: str, arguments: dict[str, Any], user_id: int | None = 7
) -> tuple[dict[str, Any], ToolStatus, str | None]:
    result = await executor.execute(
        ToolCall(id="call-1", name=name, arguments=json.dumps(arguments, ensure_ascii=False)),
        TurnContext(conversation_key="tg:1", chat_id=1, user_id=user_id, turn_id="t"),
    )
    return json.loads(result.content), result.audit.status, result.audit.error_code


async def test_order_8041_is_found(default_executor: ToolExecutor) -> None:
    payload, status, _ = await run(default_executor, "get_order_status", {"order_id": "8041"})

    assert status is ToolStatus.SUCCESS
    assert payload == {
        "ok": True,
        "data": {
            "order_id": "8041",
            "status": "in_transit",
            "status_text": "Передан в службу доставки",
            "updated_at": "2026-12-01T10:15:00+03:00",
            "delivery_estimate": "2026-12-05",
            "items": ["кофемашина"],
        },
    }


async def test_unknown_order_is_a_business_error(default_executor: ToolExecutor) -> None:
    payload, status, code = await run(default_executor, "get_order_status", {"order_id": "9999"})

    assert (status, code) == (ToolStatus.BUSINESS_ERROR, "order_not_found")
    assert payload["ok"] is False
    assert payload["error"]["code"] == "order_not_found"
    assert "9999" in payload["error"]["message"]


async def test_owned_order_is_visible_to_its_owner(default_executor: ToolExecutor) -> None:
    payload, status, _ = await run(
        default_executor, "get_order_status", {"order_id": "5150"}, user_id=OWNER
    )

    assert status is ToolStatus.SUCCESS
    assert payload["data"]["status"] == "ready_for_pickup"


@pytest.mark.parametrize("user_id", [7, OWNER + 1, None])
async def test_owned_order_looks_exactly_like_a_missing_one_to_anyone_else(
    default_executor: ToolExecutor, user_id: int | None
) -> None:
    """No existence leak: the content differs from an unknown order's only by the number."""
    hidden = await default_executor.execute(
        ToolCall(id="c", name="get_order_status", arguments='{"order_id": "5150"}'),
        TurnContext(conversation_key="tg:1", chat_id=1, user_id=user_id, turn_id="t"),
    )
    missing = await default_executor.execute(
        ToolCall(id="c", name="get_order_status", arguments='{"order_id": "9999"}'),
        TurnContext(conversation_key="tg:1", chat_id=1, user_id=user_id, turn_id="t"),
    )

    assert hidden.content.replace("5150", "NNNN") == missing.content.replace("9999", "NNNN")
    assert (hidden.audit.status, hidden.audit.error_code) == (
        missing.audit.status,
        missing.audit.error_code,
    )


@pytest.mark.parametrize("product", ["кофемашина", "Кофемашина", "  КОФЕМАШИНА  ", "кофе машина"])
async def test_return_policy_normalises_case_and_spaces(
    default_executor: ToolExecutor, product: str
) -> None:
    payload, status, _ = await run(default_executor, "get_return_policy", {"product": product})

    assert status is ToolStatus.SUCCESS
    if product == "кофе машина":
        # Spaces are collapsed, not removed: a different name is a different product.
        assert payload["data"]["found"] is False
        return
    assert payload["data"] == {
        "product": "кофемашина",
        "found": True,
        "return_days": 14,
        "conditions": "Товар должен сохранить комплектность и не иметь следов использования.",
    }


async def test_return_policy_of_an_unknown_product_is_found_false(
    default_executor: ToolExecutor,
) -> None:
    payload, status, _ = await run(default_executor, "get_return_policy", {"product": "Телевизор"})

    assert status is ToolStatus.SUCCESS
    assert payload["data"]["found"] is False
    assert payload["data"]["return_days"] is None
    assert payload["data"]["product"] == "телевизор"


@pytest.mark.parametrize(
    ("query", "expected_skus"),
    [
        ("кофемашина", {"CM-100", "CM-300"}),
        ("наушников", {"HP-20", "HP-70"}),
        ("чайники", {"KT-15"}),
        ("KeyForge", {"KB-87"}),
    ],
)
async def test_product_search_finds_by_name_or_category(
    default_executor: ToolExecutor, query: str, expected_skus: set[str]
) -> None:
    payload, status, _ = await run(default_executor, "search_products", {"query": query})

    assert status is ToolStatus.SUCCESS
    assert {item["sku"] for item in payload["data"]["items"]} == expected_skus
    assert payload["data"]["total_found"] == len(expected_skus)


async def test_product_search_with_no_match_is_empty(default_executor: ToolExecutor) -> None:
    payload, _, _ = await run(default_executor, "search_products", {"query": "телевизор"})

    assert payload["data"] == {"query": "телевизор", "items": [], "total_found": 0}


async def test_product_search_caps_the_number_of_results(shop_data: ShopData) -> None:
    many = shop_data.model_copy(
        update={
            "products": tuple(
                shop_data.products[0].model_copy(update={"sku": f"CM-{i}"}) for i in range(12)
            )
        }
    )
    executor = ToolExecutor(build_default_tool_registry(many))
    try:
        payload, _, _ = await run(executor, "search_products", {"query": "кофемашина"})
    finally:
        executor.close()

    assert len(payload["data"]["items"]) == MAX_RESULTS
    assert payload["data"]["total_found"] == 12


@pytest.mark.parametrize(
    ("utc_now", "zone", "open_now", "local_time"),
    [
        # Wednesday 12:00 in Moscow (UTC+3): inside 09:00-21:00.
        (datetime(2026, 12, 2, 9, 0, tzinfo=UTC), None, True, "2026-12-02 12:00"),
        # Sunday noon in Moscow: closed all day.
        (datetime(2026, 12, 6, 9, 0, tzinfo=UTC), None, False, "2026-12-06 12:00"),
        # Wednesday 08:59 in Moscow: a minute before opening.
        (datetime(2026, 12, 2, 5, 59, tzinfo=UTC), None, False, "2026-12-02 08:59"),
        # Wednesday 09:00 in Moscow: the opening minute counts as open.
        (datetime(2026, 12, 2, 6, 0, tzinfo=UTC), None, True, "2026-12-02 09:00"),
        # Wednesday 21:00 in Moscow: the closing minute is already closed.
        (datetime(2026, 12, 2, 18, 0, tzinfo=UTC), None, False, "2026-12-02 21:00"),
        # Same instant as the first case, but the hours read in Vladivostok (UTC+10): 19:00.
        (datetime(2026, 12, 2, 9, 0, tzinfo=UTC), "Asia/Vladivostok", True, "2026-12-02 19:00"),
        # Vladivostok 22:00 on a weekday: after closing.
        (datetime(2026, 12, 2, 12, 0, tzinfo=UTC), "Asia/Vladivostok", False, "2026-12-02 22:00"),
    ],
    ids=[
        "weekday-open",
        "sunday",
        "before-opening",
        "at-opening",
        "at-closing",
        "other-zone",
        "after-closing",
    ],
)
async def test_support_hours_use_the_injected_clock_and_zone(
    shop_data: ShopData, utc_now: datetime, zone: str | None, open_now: bool, local_time: str
) -> None:
    executor = ToolExecutor(
        build_default_tool_registry(shop_data, timezone=zone, clock=lambda: utc_now)
    )
    try:
        payload, status, _ = await run(executor, "get_support_hours", {})
    finally:
        executor.close()

    data = payload["data"]
    assert status is ToolStatus.SUCCESS
    assert data["open_now"] is open_now
    assert data["local_time"] == local_time
    assert data["timezone"] == (zone or "Europe/Moscow")
    assert data["schedule"][0] == {"day": "понедельник", "opens": "09:00", "closes": "21:00"}
    assert data["schedule"][6] == {"day": "воскресенье", "opens": None, "closes": None}


async def test_support_hours_refuse_any_argument(default_executor: ToolExecutor) -> None:
    with pytest.raises(ToolArgumentsError):
        await default_executor.execute(
            ToolCall(id="c", name="get_support_hours", arguments='{"day": "mon"}'),
            TurnContext(conversation_key="tg:1", chat_id=1, user_id=1, turn_id="t"),
        )


def test_the_four_support_tools_run_on_the_event_loop(shop_data: ShopData) -> None:
    """They only read the in-memory shop_data: no thread hop (``blocking=False``)."""
    registry = build_default_tool_registry(shop_data)

    assert {name: registry.get(name).blocking for name in registry.names()} == {
        "get_order_status": False,
        "get_return_policy": False,
        "search_products": False,
        "get_support_hours": False,
    }


def test_the_closed_note_names_the_hours_only_when_support_is_closed(shop_data: ShopData) -> None:
    hours = shop_data.support_hours
    assert closed_note(hours, datetime(2026, 12, 2, 9, 0, tzinfo=UTC)) is None
    note = closed_note(hours, datetime(2026, 12, 2, 18, 0, tzinfo=UTC))
    assert note is not None
    assert "Europe/Moscow" in note
    assert "понедельник 09:00–21:00" in note
    assert "воскресенье" not in note
    assert closed_note(hours, datetime(2026, 12, 2, 12, 0, tzinfo=UTC), "Asia/Vladivostok")


async def test_request_human_agent_returns_its_reason_category_for_the_audit() -> None:
    registry = ToolRegistry()
    registry.register(build_request_human_agent_tool())
    executor = ToolExecutor(registry)
    call = ToolCall(id="c1", name="request_human_agent", arguments='{"reason": "complaint"}')
    result = await executor.execute(
        call, TurnContext(conversation_key="t", chat_id=1, user_id=1, turn_id="T")
    )
    assert result.audit.category == "complaint"
    assert json.loads(result.content)["data"]["requested"] is True
    free_text = ToolCall(id="c2", name="request_human_agent", arguments='{"reason": "мне плохо"}')
    with pytest.raises(ToolArgumentsError):
        await executor.execute(
            free_text, TurnContext(conversation_key="t", chat_id=1, user_id=1, turn_id="T")
        )
    executor.close()
