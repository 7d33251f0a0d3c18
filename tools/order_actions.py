"""The demo write tools: cancel an order, start a return, change the delivery address.

Every text the customer reads about an action (the card, its outcome) is
rendered here from the validated arguments and the shop's state, never taken
from the model.
"""

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tools.shop_backend import (
    CANCELLABLE_STATUSES,
    RETURNABLE_STATUSES,
    Customer,
    OrderView,
    ShopBackend,
    ShopRuleError,
    check_returnable,
)
from tools.store import ShopStore
from tools.write_tools import ActionResult, WriteTool
from turn import ToolBusinessError

CANCEL_ORDER_TOOL_NAME = "cancel_order"
REQUEST_RETURN_TOOL_NAME = "request_return"
CHANGE_DELIVERY_ADDRESS_TOOL_NAME = "change_delivery_address"

_ORDER_ID = Field(
    pattern=r"^\d{4}$",
    description="Номер заказа: ровно четыре цифры без других символов, например 8042.",
)


class CancelOrderArguments(BaseModel):
    """Arguments the model writes for ``cancel_order``."""

    model_config = ConfigDict(extra="forbid")

    order_id: str = _ORDER_ID
    reason: str = Field(
        min_length=1, max_length=500, description="Причина отмены словами клиента, кратко."
    )


class RequestReturnArguments(BaseModel):
    """Arguments the model writes for ``request_return``."""

    model_config = ConfigDict(extra="forbid")

    order_id: str = _ORDER_ID
    items: list[str] = Field(
        min_length=1,
        max_length=10,
        description="Товары заказа, которые клиент возвращает, как они названы в заказе.",
    )
    reason: str = Field(
        min_length=1, max_length=500, description="Причина возврата словами клиента, кратко."
    )


class ChangeDeliveryAddressArguments(BaseModel):
    """Arguments the model writes for ``change_delivery_address``."""

    model_config = ConfigDict(extra="forbid")

    order_id: str = _ORDER_ID
    address: str = Field(
        min_length=5, max_length=300, description="Новый адрес доставки полностью."
    )


def _not_found(order_id: str) -> ToolBusinessError:
    return ToolBusinessError(f"Заказ {order_id} не найден.", code="order_not_found")


async def _order(shop: ShopBackend, customer: Customer, order_id: str) -> OrderView:
    order = await shop.order(customer, order_id)
    if order is None:
        raise _not_found(order_id)
    return order


_RULE_TEXT = {
    "order_not_found": "заказ не найден",
    "not_cancellable": "заказ уже передан в доставку или закрыт",
    "address_not_changeable": "заказ уже передан в доставку или закрыт",
    "not_returnable": "заказ ещё не доставлен или уже закрыт",
    "return_exists": "по заказу уже оформлен возврат",
    "item_not_in_order": "такого товара нет в заказе",
    "return_period_over": "срок возврата истёк",
}


def rule_text(code: str) -> str:
    """The customer's words for a shop rule that refused a change."""
    return _RULE_TEXT.get(code, "магазин не принял изменение")


def _refused(prefix: str, error: ShopRuleError) -> ActionResult:
    text = f"{prefix}: {rule_text(error.code)}."
    return ActionResult(done=False, card_text=text, message=text, error_code=error.code)


def build_cancel_order_tool(shop: ShopBackend) -> WriteTool[CancelOrderArguments, OrderView]:
    """``cancel_order`` over ``shop``: orders not yet handed to delivery."""

    async def check(arguments: CancelOrderArguments, customer: Customer) -> OrderView:
        order = await _order(shop, customer, arguments.order_id)
        if order.status not in CANCELLABLE_STATUSES:
            raise ToolBusinessError(
                f"Заказ {order.order_id} нельзя отменить: {order.status_text}.",
                code="not_cancellable",
            )
        return order

    def describe(arguments: CancelOrderArguments, order: OrderView) -> str:
        return (
            f"Отменить заказ {order.order_id}: {', '.join(order.items)}. "
            "Деньги вернутся на карту в течение 5 дней."
        )

    async def handler(
        arguments: CancelOrderArguments, customer: Customer, idempotency_key: str
    ) -> ActionResult:
        try:
            receipt = await shop.cancel_order(
                customer, arguments.order_id, arguments.reason, idempotency_key=idempotency_key
            )
        except ShopRuleError as error:
            return _refused("Отмена не выполнена", error)
        order_id = receipt.order.order_id
        return ActionResult(
            done=True,
            card_text=f"✅ Заказ {order_id} отменён",
            message=f"Заказ {order_id} отменён. Деньги вернутся на карту в течение 5 дней.",
        )

    return WriteTool(
        name=CANCEL_ORDER_TOOL_NAME,
        description=(
            "Предлагает клиенту отменить его заказ, который ещё не передан в доставку. "
            "Ничего не меняет сразу: клиент подтверждает кнопкой."
        ),
        arguments_model=CancelOrderArguments,
        check=check,
        describe=describe,
        handler=handler,
        declined=lambda _arguments: "Отмена не выполнена: вы отказались",
    )


def build_request_return_tool(
    shop: ShopBackend, store: ShopStore, clock: Callable[[], datetime]
) -> WriteTool[RequestReturnArguments, OrderView]:
    """``request_return`` over ``shop``: delivered items within their return period."""

    async def check(arguments: RequestReturnArguments, customer: Customer) -> OrderView:
        order = await _order(shop, customer, arguments.order_id)
        if order.status not in RETURNABLE_STATUSES:
            raise ToolBusinessError(
                f"Возврат по заказу {order.order_id} сейчас невозможен: {order.status_text}.",
                code="not_returnable",
            )
        try:
            check_returnable(order, tuple(arguments.items), store, clock().date())
        except ShopRuleError as error:
            raise ToolBusinessError(
                f"Возврат по заказу {order.order_id} невозможен: {rule_text(error.code)}.",
                code=error.code,
            ) from error
        return order

    def describe(arguments: RequestReturnArguments, order: OrderView) -> str:
        return (
            f"Оформить возврат из заказа {order.order_id}: {', '.join(arguments.items)}. "
            "Вы получите номер заявки на возврат."
        )

    async def handler(
        arguments: RequestReturnArguments, customer: Customer, idempotency_key: str
    ) -> ActionResult:
        try:
            receipt = await shop.request_return(
                customer,
                arguments.order_id,
                tuple(arguments.items),
                arguments.reason,
                idempotency_key=idempotency_key,
            )
        except ShopRuleError as error:
            return _refused("Возврат не оформлен", error)
        order_id = receipt.order.order_id
        return ActionResult(
            done=True,
            card_text=f"✅ Возврат по заказу {order_id} оформлен: заявка {receipt.return_id}",
            message=(
                f"Заявка на возврат {receipt.return_id} оформлена "
                f"({', '.join(arguments.items)}, заказ {order_id}). "
                "Назовите этот номер, когда будете сдавать товар."
            ),
        )

    return WriteTool(
        name=REQUEST_RETURN_TOOL_NAME,
        description=(
            "Предлагает клиенту оформить возврат товаров из доставленного заказа в пределах "
            "срока возврата. Ничего не меняет сразу: клиент подтверждает кнопкой."
        ),
        arguments_model=RequestReturnArguments,
        check=check,
        describe=describe,
        handler=handler,
        declined=lambda _arguments: "Возврат не оформлен: вы отказались",
    )


def build_change_delivery_address_tool(
    shop: ShopBackend,
) -> WriteTool[ChangeDeliveryAddressArguments, OrderView]:
    """``change_delivery_address`` over ``shop``: orders not yet handed to delivery."""

    async def check(arguments: ChangeDeliveryAddressArguments, customer: Customer) -> OrderView:
        order = await _order(shop, customer, arguments.order_id)
        if order.status not in CANCELLABLE_STATUSES:
            raise ToolBusinessError(
                f"Адрес доставки заказа {order.order_id} изменить нельзя: {order.status_text}.",
                code="address_not_changeable",
            )
        return order

    def describe(arguments: ChangeDeliveryAddressArguments, order: OrderView) -> str:
        return f"Изменить адрес доставки заказа {order.order_id} на: {arguments.address}"

    async def handler(
        arguments: ChangeDeliveryAddressArguments, customer: Customer, idempotency_key: str
    ) -> ActionResult:
        try:
            receipt = await shop.change_delivery_address(
                customer, arguments.order_id, arguments.address, idempotency_key=idempotency_key
            )
        except ShopRuleError as error:
            return _refused("Адрес не изменён", error)
        order_id = receipt.order.order_id
        return ActionResult(
            done=True,
            card_text=f"✅ Адрес доставки заказа {order_id} изменён",
            message=f"Заказ {order_id} доставим по адресу: {receipt.order.delivery_address}",
        )

    return WriteTool(
        name=CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
        description=(
            "Предлагает клиенту изменить адрес доставки заказа, который ещё не передан в "
            "доставку. Ничего не меняет сразу: клиент подтверждает кнопкой."
        ),
        arguments_model=ChangeDeliveryAddressArguments,
        check=check,
        describe=describe,
        handler=handler,
        declined=lambda _arguments: "Адрес не изменён: вы отказались",
    )
