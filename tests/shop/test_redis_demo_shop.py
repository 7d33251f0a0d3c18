"""Contract of the demo shop in Redis: per-customer copies, rules, idempotent writes."""

import asyncio
from datetime import UTC, datetime

import pytest

from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.tryout.demo_shop import RedisDemoShop
from tools.shop_backend import Customer, ShopRuleError
from tools.shop_data import ShopData

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ALICE = Customer(user_id=1001, chat_id=1001)
BOB = Customer(user_id=1002, chat_id=1002)
OWNER = Customer(user_id=100500, chat_id=100500)


@pytest.fixture
def shop(redis_client: AsyncRedisClient) -> RedisDemoShop:
    return RedisDemoShop(
        redis_client, RedisKeys("shoptest"), ShopData.load(DEMO_SHOP_DATA), clock=lambda: NOW
    )


async def test_reads_see_the_seed_and_owned_orders_only_for_their_owner(
    shop: RedisDemoShop,
) -> None:
    order = await shop.order(ALICE, "8042")
    assert order is not None
    assert order.status == "processing"
    assert order.items == ("наушники", "чехол для наушников")
    assert await shop.order(ALICE, "5150") is None
    assert await shop.order(ALICE, "9999") is None
    owned = await shop.order(OWNER, "5150")
    assert owned is not None
    assert owned.status == "ready_for_pickup"


async def test_cancel_changes_only_this_customers_copy(shop: RedisDemoShop) -> None:
    receipt = await shop.cancel_order(ALICE, "8042", "передумал", idempotency_key="a1")

    assert receipt.order.status == "cancelled"
    after = await shop.order(ALICE, "8042")
    assert after is not None
    assert after.status == "cancelled"
    other = await shop.order(BOB, "8042")
    assert other is not None
    assert other.status == "processing"


async def test_the_same_key_twice_changes_once_and_answers_the_first_receipt(
    shop: RedisDemoShop,
) -> None:
    first = await shop.change_delivery_address(
        ALICE, "8042", "Москва, ул. Ленина, 1", idempotency_key="k1"
    )
    again = await shop.change_delivery_address(
        ALICE, "8042", "Москва, ул. Ленина, 1", idempotency_key="k1"
    )
    assert again == first
    cancel = await shop.cancel_order(ALICE, "8042", "", idempotency_key="k2")
    # A repeat of the first key after a later change still answers its own receipt.
    assert await shop.change_delivery_address(ALICE, "8042", "x", idempotency_key="k1") == first
    assert (await shop.order(ALICE, "8042")) == cancel.order


async def test_concurrent_repeats_of_one_key_apply_once(shop: RedisDemoShop) -> None:
    receipts = await asyncio.gather(
        *(
            shop.request_return(ALICE, "8043", ("клавиатура",), "", idempotency_key="r")
            for _ in range(8)
        )
    )
    assert len({r.return_id for r in receipts}) == 1
    with pytest.raises(ShopRuleError) as error:
        await shop.request_return(ALICE, "8043", ("клавиатура",), "", idempotency_key="r2")
    assert error.value.code == "return_exists"


@pytest.mark.parametrize(
    ("operation", "order_id", "code"),
    [
        ("cancel", "8041", "not_cancellable"),
        ("cancel", "8043", "not_cancellable"),
        ("address", "8041", "address_not_changeable"),
        ("return", "8042", "not_returnable"),
        ("return", "5150", "order_not_found"),
    ],
)
async def test_rules_refuse_without_changing_anything(
    shop: RedisDemoShop, redis_client: AsyncRedisClient, operation: str, order_id: str, code: str
) -> None:
    before = await shop.order(ALICE, order_id)
    calls = {
        "cancel": lambda: shop.cancel_order(ALICE, order_id, "", idempotency_key="x"),
        "address": lambda: shop.change_delivery_address(
            ALICE, order_id, "адрес", idempotency_key="x"
        ),
        "return": lambda: shop.request_return(
            ALICE, order_id, ("наушники",), "", idempotency_key="x"
        ),
    }
    with pytest.raises(ShopRuleError) as error:
        await calls[operation]()
    assert error.value.code == code
    assert await shop.order(ALICE, order_id) == before
    assert await redis_client.get(RedisKeys("shoptest").shop_done(ALICE.key, "x")) is None


async def test_return_period_and_items_are_checked(redis_client: AsyncRedisClient) -> None:
    late = RedisDemoShop(
        redis_client,
        RedisKeys("shoptest"),
        ShopData.load(DEMO_SHOP_DATA),
        clock=lambda: datetime(2026, 12, 13, tzinfo=UTC),
    )
    with pytest.raises(ShopRuleError) as error:
        await late.request_return(ALICE, "8043", ("клавиатура",), "", idempotency_key="late")
    assert error.value.code == "return_period_over"
    with pytest.raises(ShopRuleError) as wrong:
        await late.request_return(ALICE, "8043", ("чайник",), "", idempotency_key="w")
    assert wrong.value.code == "item_not_in_order"


async def test_a_return_of_more_pieces_than_the_order_holds_is_refused(
    shop: RedisDemoShop, redis_client: AsyncRedisClient
) -> None:
    # 8043 holds one keyboard: ten of them (or two) cannot be returned, and nothing changes.
    before = await shop.order(ALICE, "8043")
    for count in (10, 2):
        with pytest.raises(ShopRuleError) as error:
            await shop.request_return(
                ALICE, "8043", ("клавиатура",) * count, "", idempotency_key=f"q{count}"
            )
        assert error.value.code == "item_quantity_exceeded"
    assert await shop.order(ALICE, "8043") == before
    assert await redis_client.get(RedisKeys("shoptest").shop_done(ALICE.key, "q10")) is None
    receipt = await shop.request_return(ALICE, "8043", ("клавиатура",), "", idempotency_key="q1")
    assert receipt.order.return_items == ("клавиатура",)


async def test_a_write_is_looked_up_by_its_idempotency_key(shop: RedisDemoShop) -> None:
    assert await shop.receipt(ALICE, "look") is None
    with pytest.raises(ShopRuleError):
        await shop.cancel_order(ALICE, "8041", "", idempotency_key="refused")
    # A refused write left no receipt; an applied one answers its own, for its customer only.
    assert await shop.receipt(ALICE, "refused") is None
    done = await shop.cancel_order(ALICE, "8042", "", idempotency_key="look")
    assert await shop.receipt(ALICE, "look") == done
    assert await shop.receipt(BOB, "look") is None
