"""The demo write tools: cancel an order, start a return, change the delivery address.

Every text the customer reads about an action (the card, its outcome) is
rendered here from the validated arguments and the shop's state, never taken
from the model.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from pydantic import Field

from tools.registry import ToolArguments
from tools.shop_backend import (
    CANCELLABLE_STATUSES,
    RETURNABLE_STATUSES,
    Customer,
    OrderView,
    ShopBackend,
    ShopRuleError,
    WriteReceipt,
    check_returnable,
    order_id_argument,
)
from tools.shop_data import ShopData
from tools.write_tools import N_, ActionResult, Localize, WriteTool, as_written, card_value
from turn import ToolBusinessError

CANCEL_ORDER_TOOL_NAME = "cancel_order"
REQUEST_RETURN_TOOL_NAME = "request_return"
CHANGE_DELIVERY_ADDRESS_TOOL_NAME = "change_delivery_address"


class _OrderArguments(ToolArguments):
    """What every order action's arguments hold: the order it changes."""

    order_id: str = order_id_argument(example="8042")


class CancelOrderArguments(_OrderArguments):
    """Arguments the model writes for ``cancel_order``."""

    reason: str = Field(
        min_length=1, max_length=500, description="Причина отмены словами клиента, кратко."
    )


class RequestReturnArguments(_OrderArguments):
    """Arguments the model writes for ``request_return``."""

    items: list[str] = Field(
        min_length=1,
        max_length=10,
        description="Товары заказа, которые клиент возвращает, как они названы в заказе.",
    )
    reason: str = Field(
        min_length=1, max_length=500, description="Причина возврата словами клиента, кратко."
    )


class ChangeDeliveryAddressArguments(_OrderArguments):
    """Arguments the model writes for ``change_delivery_address``."""

    address: str = Field(
        min_length=5, max_length=300, description="Новый адрес доставки полностью."
    )


_RULE_TEXT = {
    "order_not_found": N_("заказ не найден"),
    "not_cancellable": N_("заказ уже передан в доставку или закрыт"),
    "address_not_changeable": N_("заказ уже передан в доставку или закрыт"),
    "not_returnable": N_("заказ ещё не доставлен или уже закрыт"),
    "return_exists": N_("по заказу уже оформлен возврат"),
    "item_not_in_order": N_("такого товара нет в заказе"),
    "item_quantity_exceeded": N_("в заказе меньше таких товаров"),
    "return_period_over": N_("срок возврата истёк"),
}
_DECLINED = N_("вы отказались")
_NOT_FOUND = N_("Заказ {order_id} не найден.")

Translate = Callable[[str], str]
"""One customer's catalog: a text of this module in their language."""


def rule_text(code: str) -> str:
    """The customer's words for a shop rule that refused a change."""
    return _RULE_TEXT.get(code, N_("магазин не принял изменение"))


_ArgumentsT = TypeVar("_ArgumentsT", bound=_OrderArguments)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedOrder:
    """What an order action's check found: the order now, and whom the action is for."""

    order: OrderView
    customer: Customer


def photos_note(count: int, tr: Translate = str) -> str:
    """The card's words for the photos a return carries (none: nothing)."""
    return " " + tr(N_("Фото к заявке: {count}.")).format(count=count) if count else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _OrderChange(Generic[_ArgumentsT]):
    """One order action: which orders it applies to, what it does and what it says."""

    name: str
    description: str
    arguments_model: type[_ArgumentsT]
    statuses: frozenset[str]
    """The order statuses the change is allowed in."""
    not_allowed: str
    """Why another status refuses it, with ``{order_id}``; the status follows."""
    not_allowed_code: str
    not_done: str
    """The outcome's first words when the shop refuses or the customer declines."""
    describe: Callable[[_ArgumentsT, OrderView, Customer, Translate], str]
    """The card's text from the arguments, the order and the customer (their photos)."""
    change: Callable[[_ArgumentsT, Customer, str], Awaitable[WriteReceipt]]
    """Ask the shop for the change with the idempotency key."""
    done: Callable[[_ArgumentsT, WriteReceipt, Translate], tuple[str, str]]
    """The card's text and the customer's message once it is done."""
    also_check: Callable[[_ArgumentsT, OrderView, Translate], None] = (
        lambda _arguments, _order, _tr: None
    )
    """A further rule (raises :class:`ToolBusinessError`)."""


def _write_tool(
    shop: ShopBackend, action: _OrderChange[_ArgumentsT], localize: Localize
) -> WriteTool[_ArgumentsT, CheckedOrder]:
    def tr_of(customer: Customer) -> Translate:
        return lambda message: localize(customer.language, message)

    async def check(arguments: _ArgumentsT, customer: Customer) -> CheckedOrder:
        # In the customer's language: a model that retells it (the offline one) says it so.
        tr = tr_of(customer)
        order = await shop.order(customer, arguments.order_id)
        if order is None:
            raise ToolBusinessError(
                tr(_NOT_FOUND).format(order_id=arguments.order_id), code="order_not_found"
            )
        if order.status not in action.statuses:
            refusal = tr(action.not_allowed).format(order_id=order.order_id)
            raise ToolBusinessError(
                f"{refusal}: {order.status_text}.", code=action.not_allowed_code
            )
        action.also_check(arguments, order, tr)
        return CheckedOrder(order=order, customer=customer)

    async def handler(
        arguments: _ArgumentsT, customer: Customer, idempotency_key: str
    ) -> ActionResult:
        try:
            receipt = await action.change(arguments, customer, idempotency_key)
        except ShopRuleError as error:
            tr = tr_of(customer)
            text = f"{tr(action.not_done)}: {tr(rule_text(error.code))}."
            return ActionResult.not_done(error.code, text)
        card_text, message = action.done(arguments, receipt, tr_of(customer))
        return ActionResult(done=True, card_text=card_text, message=message)

    async def lookup(
        arguments: _ArgumentsT, customer: Customer, idempotency_key: str
    ) -> ActionResult | None:
        receipt = await shop.receipt(customer, idempotency_key)
        if receipt is None:
            return None
        card_text, message = action.done(arguments, receipt, tr_of(customer))
        return ActionResult(done=True, card_text=card_text, message=message)

    def declined(_arguments: _ArgumentsT, customer: Customer) -> str:
        tr = tr_of(customer)
        return f"{tr(action.not_done)}: {tr(_DECLINED)}"

    return WriteTool(
        name=action.name,
        description=action.description,
        arguments_model=action.arguments_model,
        check=check,
        describe=lambda arguments, checked: action.describe(
            arguments, checked.order, checked.customer, tr_of(checked.customer)
        ),
        handler=handler,
        lookup=lookup,
        declined=declined,
    )


def build_cancel_order_tool(
    shop: ShopBackend, localize: Localize = as_written
) -> WriteTool[CancelOrderArguments, CheckedOrder]:
    """``cancel_order`` over ``shop``: orders not yet handed to delivery."""

    def done(
        arguments: CancelOrderArguments, receipt: WriteReceipt, tr: Translate
    ) -> tuple[str, str]:
        order_id = receipt.order.order_id
        return (
            tr(N_("✅ Заказ {order_id} отменён")).format(order_id=order_id),
            tr(N_("Заказ {order_id} отменён. Деньги вернутся на карту в течение 5 дней.")).format(
                order_id=order_id
            ),
        )

    return _write_tool(
        shop,
        _OrderChange(
            name=CANCEL_ORDER_TOOL_NAME,
            description=(
                "Предлагает клиенту отменить его заказ, который ещё не передан в доставку. "
                "Ничего не меняет сразу: клиент подтверждает кнопкой."
            ),
            arguments_model=CancelOrderArguments,
            statuses=CANCELLABLE_STATUSES,
            not_allowed=N_("Заказ {order_id} нельзя отменить"),
            not_allowed_code="not_cancellable",
            not_done=N_("Отмена не выполнена"),
            describe=lambda arguments, order, _customer, tr: tr(
                N_("Отменить заказ {order_id}: {items}. Деньги вернутся на карту в течение 5 дней.")
            ).format(order_id=order.order_id, items=", ".join(order.items)),
            change=lambda arguments, customer, key: shop.cancel_order(
                customer, arguments.order_id, arguments.reason, idempotency_key=key
            ),
            done=done,
        ),
        localize,
    )


def build_request_return_tool(
    shop: ShopBackend,
    shop_data: ShopData,
    clock: Callable[[], datetime],
    localize: Localize = as_written,
) -> WriteTool[RequestReturnArguments, CheckedOrder]:
    """``request_return`` over ``shop``: delivered items within their return period."""

    def items_returnable(
        arguments: RequestReturnArguments, order: OrderView, tr: Translate
    ) -> None:
        try:
            check_returnable(order, tuple(arguments.items), shop_data, clock().date())
        except ShopRuleError as error:
            refusal = tr(N_("Возврат по заказу {order_id} невозможен")).format(
                order_id=order.order_id
            )
            raise ToolBusinessError(
                f"{refusal}: {tr(rule_text(error.code))}.", code=error.code
            ) from error

    def done(
        arguments: RequestReturnArguments, receipt: WriteReceipt, tr: Translate
    ) -> tuple[str, str]:
        order_id = receipt.order.order_id
        photos = len(receipt.order.return_photos)
        card = tr(N_("✅ Возврат по заказу {order_id} оформлен: заявка {return_id}")).format(
            order_id=order_id, return_id=receipt.return_id
        )
        if photos:
            card += tr(N_(", фото: {count}")).format(count=photos)
        message = tr(
            N_(
                "Заявка на возврат {return_id} оформлена ({items}, заказ {order_id}). "
                "Назовите этот номер, когда будете сдавать товар."
            )
        ).format(return_id=receipt.return_id, items=", ".join(arguments.items), order_id=order_id)
        return card, message

    return _write_tool(
        shop,
        _OrderChange(
            name=REQUEST_RETURN_TOOL_NAME,
            description=(
                "Предлагает клиенту оформить возврат товаров из доставленного заказа в пределах "
                "срока возврата. Ничего не меняет сразу: клиент подтверждает кнопкой."
            ),
            arguments_model=RequestReturnArguments,
            statuses=RETURNABLE_STATUSES,
            not_allowed=N_("Возврат по заказу {order_id} сейчас невозможен"),
            not_allowed_code="not_returnable",
            not_done=N_("Возврат не оформлен"),
            also_check=items_returnable,
            describe=lambda arguments, order, customer, tr: (
                tr(N_("Оформить возврат из заказа {order_id}: {items}.")).format(
                    order_id=order.order_id, items=", ".join(arguments.items)
                )
                + photos_note(len(customer.photos), tr)
                + " "
                + tr(N_("Вы получите номер заявки на возврат."))
            ),
            change=lambda arguments, customer, key: shop.request_return(
                customer,
                arguments.order_id,
                tuple(arguments.items),
                arguments.reason,
                idempotency_key=key,
                photos=customer.photos,
            ),
            done=done,
        ),
        localize,
    )


def build_change_delivery_address_tool(
    shop: ShopBackend, localize: Localize = as_written
) -> WriteTool[ChangeDeliveryAddressArguments, CheckedOrder]:
    """``change_delivery_address`` over ``shop``: orders not yet handed to delivery."""

    def done(
        arguments: ChangeDeliveryAddressArguments, receipt: WriteReceipt, tr: Translate
    ) -> tuple[str, str]:
        order = receipt.order
        address = card_value(order.delivery_address or arguments.address)
        return (
            tr(N_("✅ Адрес доставки заказа {order_id} изменён")).format(order_id=order.order_id),
            tr(N_("Заказ {order_id} доставим по адресу: {address}")).format(
                order_id=order.order_id, address=address
            ),
        )

    return _write_tool(
        shop,
        _OrderChange(
            name=CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
            description=(
                "Предлагает клиенту изменить адрес доставки заказа, который ещё не передан в "
                "доставку. Ничего не меняет сразу: клиент подтверждает кнопкой."
            ),
            arguments_model=ChangeDeliveryAddressArguments,
            statuses=CANCELLABLE_STATUSES,
            not_allowed=N_("Адрес доставки заказа {order_id} изменить нельзя"),
            not_allowed_code="address_not_changeable",
            not_done=N_("Адрес не изменён"),
            describe=lambda arguments, order, _customer, tr: tr(
                N_("Изменить адрес доставки заказа {order_id} на: {address}")
            ).format(order_id=order.order_id, address=card_value(arguments.address)),
            change=lambda arguments, customer, key: shop.change_delivery_address(
                customer, arguments.order_id, arguments.address, idempotency_key=key
            ),
            done=done,
        ),
        localize,
    )
