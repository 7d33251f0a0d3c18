"""get_order_status: where an order is and what state it is in."""

from tools.registry import RegisteredTool, ToolArguments, ToolHandler
from tools.shop_backend import Customer, ShopBackend, order_id_argument
from tools.shop_data import OrderDetails, ShopData
from turn import ToolBusinessError, TurnContext

GET_ORDER_STATUS_TOOL_NAME = "get_order_status"


class GetOrderStatusArguments(ToolArguments):
    """Arguments the model writes."""

    order_id: str = order_id_argument(example="8041")


class OrderStatusResult(OrderDetails):
    """What the model may tell the customer about the order."""


class CurrentOrderStatusResult(OrderStatusResult):
    """The order as a shop backend keeps it: with the changes the customer asked for."""

    delivery_address: str | None
    return_id: str | None


def build_order_status_tool(
    shop_data: ShopData, backend: ShopBackend | None = None
) -> RegisteredTool[GetOrderStatusArguments, OrderStatusResult]:
    """The order status tool over ``backend`` (its current state) or, without one, ``shop_data``."""
    handler: ToolHandler[GetOrderStatusArguments, OrderStatusResult] = (
        _shop_data_lookup(shop_data) if backend is None else _backend_lookup(backend)
    )
    return RegisteredTool(
        name=GET_ORDER_STATUS_TOOL_NAME,
        description=(
            "Возвращает актуальный статус заказа по его четырёхзначному номеру. "
            "Используй для вопросов о статусе, доставке или местонахождении заказа."
        ),
        arguments_model=GetOrderStatusArguments,
        handler=handler,
        # Reads the in-memory shop data: cheaper on the event loop than in a thread.
        # The backend's lookup is async and runs on the loop anyway.
        blocking=False,
    )


def _shop_data_lookup(
    shop_data: ShopData,
) -> ToolHandler[GetOrderStatusArguments, OrderStatusResult]:
    def get_order_status(
        arguments: GetOrderStatusArguments, context: TurnContext
    ) -> OrderStatusResult:
        order = shop_data.find_order(arguments.order_id)
        # An order owned by somebody else answers exactly like a missing one,
        # so the tool never confirms that an order number exists.
        if order is None or (
            order.owner_user_id is not None and order.owner_user_id != context.user_id
        ):
            raise _order_not_found(arguments.order_id)
        # Only the declared fields: never the owner.
        return OrderStatusResult.model_validate(order, from_attributes=True)

    return get_order_status


def _backend_lookup(
    backend: ShopBackend,
) -> ToolHandler[GetOrderStatusArguments, OrderStatusResult]:
    async def get_order_status(
        arguments: GetOrderStatusArguments, context: TurnContext
    ) -> OrderStatusResult:
        order = await backend.order(Customer.of(context), arguments.order_id)
        if order is None:
            raise _order_not_found(arguments.order_id)
        return CurrentOrderStatusResult.model_validate(order, from_attributes=True)

    return get_order_status


def _order_not_found(order_id: str) -> ToolBusinessError:
    """The one answer for a missing order and for somebody else's."""
    return ToolBusinessError(f"Заказ {order_id} не найден.", code="order_not_found")
