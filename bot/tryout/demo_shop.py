"""The demo shop in Redis: ``bot/tryout/demo_shop.json`` as the seed, each customer's own copy.

An order without an owner behaves as every customer's own, and each customer
changes only their copy (one customer cancelling 8042 does not cancel it for
everyone); an owned order (5150) exists only for its owner. A write reads the
order, applies the shop's rule in Python and stores the result with one
script that compares the order with what was read and keeps the receipt under
the idempotency key: a repeated write answers the first receipt and changes
nothing again.
"""

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime

from redis.exceptions import RedisError

from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.shop import ApplyShopWrite
from tools.shop_backend import (
    CANCELLABLE_STATUSES,
    Customer,
    OrderView,
    ShopRuleError,
    WriteReceipt,
    check_returnable,
)
from tools.shop_data import Order, ShopData

STATE_TTL_SECONDS = 30 * 24 * 3600
"""How long a customer's changed orders and write receipts are kept (the demo's memory)."""

_MAX_RACES = 5


class ShopUnavailableError(RuntimeError):
    """Redis could not be reached, or the order kept changing under the write."""


class RedisDemoShop:
    """The :class:`~tools.shop_backend.ShopBackend` of the demo, over ``redis.asyncio``."""

    def __init__(
        self,
        client: AsyncRedisClient,
        keys: RedisKeys,
        seed: ShopData,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._keys = keys
        self._seed = seed
        self._clock = clock
        self._scripts = Scripts(client)

    async def order(self, customer: Customer, order_id: str) -> OrderView | None:
        """The customer's copy of the order; ``None`` when missing or someone else's."""
        order, _ = await self._read(customer, order_id)
        return order

    async def cancel_order(
        self, customer: Customer, order_id: str, reason: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Cancel an order not yet handed to delivery (else ``not_cancellable``)."""
        change = self._before_delivery(
            {"status": "cancelled", "status_text": "Отменён", "delivery_estimate": None},
            refused="not_cancellable",
        )
        return await self._write(customer, order_id, idempotency_key, change)

    async def request_return(
        self,
        customer: Customer,
        order_id: str,
        items: tuple[str, ...],
        reason: str,
        *,
        idempotency_key: str,
        photos: tuple[str, ...] = (),
    ) -> WriteReceipt:
        """Open a return for delivered items within their return period, with ``photos``."""

        def change(order: OrderView) -> WriteReceipt:
            check_returnable(order, items, self._seed, self._clock().date())
            return_id = return_number(order.order_id, idempotency_key)
            return WriteReceipt(
                order=self._updated(
                    order,
                    {
                        "status": "return_requested",
                        "status_text": f"Оформлен возврат {return_id}",
                        "return_id": return_id,
                        "return_items": items,
                        "return_photos": photos,
                    },
                ),
                return_id=return_id,
            )

        return await self._write(customer, order_id, idempotency_key, change)

    async def change_delivery_address(
        self, customer: Customer, order_id: str, address: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Send an order not yet handed to delivery to ``address``."""
        change = self._before_delivery(
            {"delivery_address": address}, refused="address_not_changeable"
        )
        return await self._write(customer, order_id, idempotency_key, change)

    async def receipt(self, customer: Customer, idempotency_key: str) -> WriteReceipt | None:
        """The receipt stored with the write under ``idempotency_key``; ``None``: not applied.

        The receipt is stored by the same script that changes the order, so it
        exists exactly when the change was made.
        """
        return await self._receipt(self._keys.shop_done(customer.key, idempotency_key))

    def _before_delivery(
        self, update: dict[str, object], *, refused: str
    ) -> Callable[[OrderView], WriteReceipt]:
        """The change: ``update`` to an order not yet handed to delivery, else rule ``refused``."""

        def change(order: OrderView) -> WriteReceipt:
            if order.status not in CANCELLABLE_STATUSES:
                raise ShopRuleError(refused)
            return WriteReceipt(order=self._updated(order, update))

        return change

    async def _read(self, customer: Customer, order_id: str) -> tuple[OrderView | None, str]:
        """The order and its stored JSON ('' while it is still the seed's)."""
        seed = self._seed.find_order(order_id)
        if seed is None or (
            seed.owner_user_id is not None and seed.owner_user_id != customer.user_id
        ):
            return None, ""
        try:
            raw = await self._client.hget(self._keys.shop_orders(customer.key), order_id)
        except RedisError as error:
            raise ShopUnavailableError("the shop's storage is unreachable") from error
        if not raw:
            return _seed_view(seed), ""
        stored = text_of(raw)
        return OrderView.model_validate_json(stored), stored

    async def _write(
        self,
        customer: Customer,
        order_id: str,
        idempotency_key: str,
        change: Callable[[OrderView], WriteReceipt],
    ) -> WriteReceipt:
        orders = self._keys.shop_orders(customer.key)
        receipt_key = self._keys.shop_done(customer.key, idempotency_key)
        for _ in range(_MAX_RACES):
            order, stored = await self._read(customer, order_id)
            try:
                if order is None:
                    raise ShopRuleError("order_not_found")
                receipt = change(order)
            except ShopRuleError:
                # A repeat of an applied write finds the order changed by itself: the
                # first receipt answers (the script answers it too when the rule holds).
                done = await self._receipt(receipt_key)
                if done is not None:
                    return done
                raise
            try:
                applied, raw = await self._scripts.run(
                    ApplyShopWrite(
                        orders=orders,
                        receipt_key=receipt_key,
                        order_id=order_id,
                        read=stored,
                        new_order=receipt.order.model_dump_json(),
                        receipt=_dump_receipt(receipt),
                        ttl=STATE_TTL_SECONDS,
                    )
                )
            except RedisError as error:
                raise ShopUnavailableError("the shop's storage is unreachable") from error
            if int(applied) == 1:
                return _load_receipt(raw)
        raise ShopUnavailableError("the order kept changing under the write")

    async def _receipt(self, key: str) -> WriteReceipt | None:
        try:
            raw = await self._client.get(key)
        except RedisError as error:
            raise ShopUnavailableError("the shop's storage is unreachable") from error
        return _load_receipt(raw) if raw else None

    def _updated(self, order: OrderView, update: dict[str, object]) -> OrderView:
        """``order`` with ``update`` applied, stamped with the time of the change."""
        return order.model_copy(
            update={**update, "updated_at": self._clock().isoformat(timespec="seconds")}
        )


def return_number(order_id: str, idempotency_key: str) -> str:
    """The number of a return request the customer can quote, e.g. ``R8043-7F2A``."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:4].upper()
    return f"R{order_id}-{digest}"


def _seed_view(order: Order) -> OrderView:
    return OrderView.model_validate(order.model_dump(exclude={"owner_user_id"}))


def _dump_receipt(receipt: WriteReceipt) -> str:
    return json.dumps(
        {"order": receipt.order.model_dump(mode="json"), "return_id": receipt.return_id},
        ensure_ascii=False,
    )


def _load_receipt(raw: bytes | str) -> WriteReceipt:
    data = json.loads(raw)
    return WriteReceipt(
        order=OrderView.model_validate(data["order"]), return_id=data.get("return_id")
    )
