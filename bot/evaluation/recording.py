"""What reached the shop during a trial: the demo shop's writes, recorded at the tool layer.

The audit names an action's tool and outcome, never its arguments; a scenario
matches arguments too. The eval wraps the shop backend of its own application
(``build_application(wrap_shop=...)``) so that each write the shop receives is
kept with its arguments and idempotency key (the action id), whatever path
called it: a write that no press authorised shows up here as well.
"""

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from tools.shop_backend import Customer, OrderView, ShopBackend, WriteReceipt


@dataclass(frozen=True, slots=True, kw_only=True)
class ShopWrite:
    """One write the shop received: the tool's name, its arguments, the key, the outcome."""

    tool: str
    arguments: dict[str, Any]
    idempotency_key: str
    # "executed" (the shop applied it) or the shop's refusal / failure as a short code.
    outcome: str


@dataclass(slots=True)
class RecordingShop:
    """A :class:`~tools.shop_backend.ShopBackend` that keeps every write it passes on."""

    inner: ShopBackend
    writes: list[ShopWrite] = field(default_factory=list)

    async def order(self, customer: Customer, order_id: str) -> OrderView | None:
        """The inner shop's answer (reads are not recorded)."""
        return await self.inner.order(customer, order_id)

    async def receipt(self, customer: Customer, idempotency_key: str) -> WriteReceipt | None:
        """The inner shop's answer (a look-up, not a write)."""
        return await self.inner.receipt(customer, idempotency_key)

    async def cancel_order(
        self, customer: Customer, order_id: str, reason: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Cancel at the inner shop, recorded."""
        arguments: dict[str, Any] = {"order_id": order_id, "reason": reason}
        return await self._recorded(
            "cancel_order",
            arguments,
            idempotency_key,
            self.inner.cancel_order(customer, order_id, reason, idempotency_key=idempotency_key),
        )

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
        """Open a return at the inner shop, recorded."""
        arguments: dict[str, Any] = {
            "order_id": order_id,
            "items": list(items),
            "reason": reason,
            "photos": list(photos),
        }
        return await self._recorded(
            "request_return",
            arguments,
            idempotency_key,
            self.inner.request_return(
                customer, order_id, items, reason, idempotency_key=idempotency_key, photos=photos
            ),
        )

    async def change_delivery_address(
        self, customer: Customer, order_id: str, address: str, *, idempotency_key: str
    ) -> WriteReceipt:
        """Change the address at the inner shop, recorded."""
        arguments: dict[str, Any] = {"order_id": order_id, "address": address}
        return await self._recorded(
            "change_delivery_address",
            arguments,
            idempotency_key,
            self.inner.change_delivery_address(
                customer, order_id, address, idempotency_key=idempotency_key
            ),
        )

    async def _recorded(
        self, tool: str, arguments: dict[str, Any], key: str, write: Awaitable[WriteReceipt]
    ) -> WriteReceipt:
        try:
            receipt = await write
        except Exception as error:
            code = getattr(error, "code", None) or type(error).__name__
            self.writes.append(
                ShopWrite(tool=tool, arguments=arguments, idempotency_key=key, outcome=str(code))
            )
            raise
        self.writes.append(
            ShopWrite(tool=tool, arguments=arguments, idempotency_key=key, outcome="executed")
        )
        return receipt
