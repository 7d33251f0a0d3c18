"""get_order_status: where an order is and what state it is in."""

from pydantic import BaseModel, ConfigDict, Field

from tools.registry import RegisteredTool
from tools.shop_backend import Customer, ShopBackend
from tools.store import ShopStore
from turn import ToolBusinessError, TurnContext

GET_ORDER_STATUS_TOOL_NAME = "get_order_status"


class GetOrderStatusArguments(BaseModel):
    """Arguments the model writes."""

    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(
        pattern=r"^\d{4}$",
        description="Номер заказа: ровно четыре цифры без других символов, например 8041.",
    )


class OrderStatusResult(BaseModel):
    """What the model may tell the customer about the order."""

    order_id: str
    status: str
    status_text: str
    updated_at: str
    delivery_estimate: str | None
    items: list[str]


class CurrentOrderStatusResult(OrderStatusResult):
    """The order as a shop backend keeps it: with the changes the customer asked for."""

    delivery_address: str | None
    return_id: str | None


def build_order_status_tool(
    store: ShopStore, backend: ShopBackend | None = None
) -> RegisteredTool[GetOrderStatusArguments, OrderStatusResult]:
    """The order status tool over ``backend`` (its current state) or, without one, ``store``."""
    if backend is not None:
        return _backend_order_status_tool(backend)

    def get_order_status(
        arguments: GetOrderStatusArguments, context: TurnContext
    ) -> OrderStatusResult:
        order = store.find_order(arguments.order_id)
        # An order owned by somebody else answers exactly like a missing one,
        # so the tool never confirms that an order number exists.
        if order is None or (
            order.owner_user_id is not None and order.owner_user_id != context.user_id
        ):
            raise _order_not_found(arguments.order_id)
        # Only the declared fields: never the owner.
        return OrderStatusResult.model_validate(order, from_attributes=True)

    return RegisteredTool(
        name=GET_ORDER_STATUS_TOOL_NAME,
        description=_DESCRIPTION,
        arguments_model=GetOrderStatusArguments,
        handler=get_order_status,
        # Reads the in-memory shop store: cheaper on the event loop than in a thread.
        blocking=False,
    )


def _order_not_found(order_id: str) -> ToolBusinessError:
    """The one answer for a missing order and for somebody else's."""
    return ToolBusinessError(f"Заказ {order_id} не найден.", code="order_not_found")


_DESCRIPTION = (
    "Возвращает актуальный статус заказа по его четырёхзначному номеру. "
    "Используй для вопросов о статусе, доставке или местонахождении заказа."
)


def _backend_order_status_tool(
    backend: ShopBackend,
) -> RegisteredTool[GetOrderStatusArguments, OrderStatusResult]:
    async def get_order_status(
        arguments: GetOrderStatusArguments, context: TurnContext
    ) -> OrderStatusResult:
        order = await backend.order(Customer.of(context), arguments.order_id)
        if order is None:
            raise _order_not_found(arguments.order_id)
        return CurrentOrderStatusResult.model_validate(order, from_attributes=True)

    return RegisteredTool(
        name=GET_ORDER_STATUS_TOOL_NAME,
        description=_DESCRIPTION,
        arguments_model=GetOrderStatusArguments,
        handler=get_order_status,
    )
