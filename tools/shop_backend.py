"""The shop behind the order tools: a small Protocol a shop implements for reads and writes.

Every operation takes the customer's identity as the application knows it
(:class:`Customer`, built from the turn's context), never from the model's
arguments. Writes take an idempotency key: the same key applied twice changes
the order once and answers the first outcome again; ``ShopBackend.receipt``
tells whether a write under a key was applied (a process that died after the
write and before recording its outcome asks it, instead of guessing).
"""

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from pydantic import ConfigDict, Field

from tools.shop_data import ORDER_ID_PATTERN, OrderDetails, ShopData
from turn import TurnContext

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Customer:
    """Who an operation is for: the Telegram user id, or the chat for front ends without one."""

    user_id: int | None
    chat_id: int | str
    # The photos the customer sent in the conversation (file ids), for a return to carry.
    photos: tuple[str, ...] = ()
    # The conversation's language (a LANGUAGES code): what a card and an outcome are told in.
    language: str | None = None

    @classmethod
    def of(cls, context: TurnContext) -> "Customer":
        """The customer of a turn (the front end filled the context, not the model)."""
        return cls(
            user_id=context.user_id,
            chat_id=context.chat_id,
            photos=context.photos,
            language=context.language,
        )

    @property
    def key(self) -> str:
        """A stable name for per-customer state: ``u<user id>`` or ``c<chat>``."""
        if self.user_id is not None:
            return f"u{self.user_id}"
        return "c" + _KEY_UNSAFE.sub("_", str(self.chat_id))[:64]


def order_id_argument(example: str) -> Any:
    """The ``order_id`` argument of an order tool: four digits, said so to the model."""
    return Field(
        pattern=ORDER_ID_PATTERN,
        description=f"Номер заказа: ровно четыре цифры без других символов, например {example}.",
    )


class OrderView(OrderDetails):
    """One order as this customer sees it now (pydantic: it crosses the Redis boundary)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    delivery_address: str | None = None
    return_id: str | None = None
    return_items: tuple[str, ...] = ()
    # Telegram's file ids of the photos sent with the return (damage claims).
    return_photos: tuple[str, ...] = ()


class ShopRuleError(RuntimeError):
    """The order's current state does not allow the change (``code`` says which rule)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteReceipt:
    """What a write did: the order after it and, for a return, the request's number."""

    order: OrderView
    return_id: str | None = None


CANCELLABLE_STATUSES = frozenset({"new", "processing"})
"""Orders not yet handed to delivery: they can be cancelled or sent elsewhere."""

RETURNABLE_STATUSES = frozenset({"delivered"})


def check_returnable(order: OrderView, items: tuple[str, ...], shop: ShopData, today: date) -> None:
    """Raise :class:`ShopRuleError` unless ``items`` of ``order`` may be returned ``today``."""
    if order.return_id is not None:
        raise ShopRuleError("return_exists")
    if order.status not in RETURNABLE_STATUSES:
        raise ShopRuleError("not_returnable")
    if not items or any(item not in order.items for item in items):
        raise ShopRuleError("item_not_in_order")
    # An item named twice is two pieces: never more of one than the order holds.
    held = Counter(order.items)
    if any(count > held[item] for item, count in Counter(items).items()):
        raise ShopRuleError("item_quantity_exceeded")
    delivered = datetime.fromisoformat(order.updated_at).date()
    for item in items:
        policy = shop.find_return_policy(item)
        if policy is None or today > delivered + timedelta(days=policy.return_days):
            raise ShopRuleError("return_period_over")


class ShopBackend(Protocol):
    """The order operations the tools use; a shop plugs in its own by implementing this."""

    async def order(self, customer: Customer, order_id: str) -> OrderView | None:
        """The order if this customer may see it, else ``None`` (missing and foreign alike)."""
        ...

    async def cancel_order(
        self, customer: Customer, order_id: str, reason: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Cancel the order; raises :class:`ShopRuleError` when its state forbids it."""
        ...

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
        """Open a return request for ``items`` with ``photos`` (file ids) attached.

        Raises :class:`ShopRuleError` when not allowed.
        """
        ...

    async def change_delivery_address(
        self, customer: Customer, order_id: str, address: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Deliver the order to ``address``; raises :class:`ShopRuleError` when not allowed."""
        ...

    async def receipt(self, customer: Customer, idempotency_key: str) -> WriteReceipt | None:
        """The receipt of the write applied under ``idempotency_key``; ``None``: none was."""
        ...
