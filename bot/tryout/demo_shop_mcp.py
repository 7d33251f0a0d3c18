"""The demo shop as an MCP server: its tools over the Model Context Protocol.

``python -m bot shop-mcp`` (or ``python -m bot.tryout.demo_shop_mcp``) serves the
demo shop's tools over streamable HTTP at ``http://HOST:PORT/mcp``, or over
stdin/stdout with ``--stdio``, written with the official ``mcp`` SDK's
:class:`~mcp.server.mcpserver.MCPServer`. It reads the same settings as the
bot (``REDIS_URL``, ``REDIS_KEY_PREFIX``, ``TOOL_DATA_PATH``,
``SUPPORT_TIMEZONE``) and changes the same demo orders in Redis
(:class:`~bot.tryout.demo_shop.RedisDemoShop`): it is what a shop's own server
looks like to the bot, on the demo's data.

Every answer is the built-in tool's own (the same handlers run here). What
differs is who the customer is: a tool about the customer's orders takes
``customer_id`` as an argument, which the bot fills itself
(``"bound_arguments": {"customer_id": "shop_customer_id"}`` in
``MCP_SERVERS``), so the model never chooses whose orders it sees. A digit-only
``customer_id`` is the demo's customer of that number, the same person the
built-in tools know by that Telegram user id; ``find_customer_by_phone`` finds
the id of a shared contact's number (account linking).

A write derives its idempotency key from the customer and the arguments that
decide the change (never the free-text reason): the same call repeated
answers the first receipt and changes nothing again, which is why the write
tools say ``idempotentHint: true``. A refusal (a shop rule, an unknown order or
customer, an unreachable shop) is a result with ``isError: true``, a short
``code: message`` text and ``{"error": {"code", "message"}}`` as its
structured content.
"""

import argparse
import hashlib
import inspect
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings
from redis.exceptions import RedisError

from bot.accounts.directory import DEMO_LOOKUP_TOOL
from bot.ops import event_loop
from bot.ops.startup import configure_logging
from bot.settings import (
    SETTINGS_SECTIONS,
    RedisSettings,
    ToolSettings,
    describe_settings_error,
)
from bot.storage.connection import async_client, describe_target
from bot.storage.keys import RedisKeys
from bot.tryout.demo_shop import RedisDemoShop, ShopUnavailableError
from tools.order_actions import (
    CANCEL_ORDER_TOOL_NAME,
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
    REQUEST_RETURN_TOOL_NAME,
    CancelOrderArguments,
    ChangeDeliveryAddressArguments,
    RequestReturnArguments,
    build_cancel_order_tool,
    build_change_delivery_address_tool,
    build_request_return_tool,
)
from tools.order_status import (
    GET_ORDER_STATUS_TOOL_NAME,
    CurrentOrderStatusResult,
    GetOrderStatusArguments,
    build_order_status_tool,
)
from tools.product_search import (
    SEARCH_PRODUCTS_TOOL_NAME,
    SearchProductsArguments,
    SearchProductsResult,
    build_product_search_tool,
)
from tools.registry import RegisteredTool
from tools.return_policy import (
    GET_RETURN_POLICY_TOOL_NAME,
    GetReturnPolicyArguments,
    ReturnPolicyResult,
    build_return_policy_tool,
)
from tools.shop_backend import Customer, OrderView
from tools.shop_data import CUSTOMER_ID_PATTERN, ShopData
from tools.support_hours import (
    GET_SUPPORT_HOURS_TOOL_NAME,
    GetSupportHoursArguments,
    SupportHoursResult,
    build_support_hours_tool,
)
from tools.write_tools import WriteTool
from turn import ToolBusinessError, TurnContext

logger = logging.getLogger(__name__)

FIND_CUSTOMER_BY_PHONE_TOOL_NAME = DEMO_LOOKUP_TOOL
SERVER_NAME = "demo-shop"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


def _log_level(value: object) -> LogLevel:
    """``LOG_LEVEL`` as validated by its section (anything else: INFO)."""
    if value == "DEBUG":
        return "DEBUG"
    if value == "WARNING":
        return "WARNING"
    if value == "ERROR":
        return "ERROR"
    return "INFO"


_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# The key is derived from the arguments: a repeated call answers the first receipt.
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

CustomerIdArgument = Annotated[
    str,
    Field(
        pattern=CUSTOMER_ID_PATTERN,
        description=(
            "Идентификатор клиента магазина. Подставляет приложение по привязанному "
            "аккаунту клиента, не модель."
        ),
    ),
]


def argument(model: type[BaseModel], name: str) -> FieldInfo:
    """Argument ``name`` exactly as the built-in tool's arguments model declares it.

    A tool's parameter is ``Annotated[<type>, argument(Model, "name")]``: its rules and
    its words for the model come from the one model, so the server cannot drift from it.
    """
    return model.model_fields[name]


class CustomerFound(BaseModel):
    """The shop's customer a phone number belongs to."""

    model_config = ConfigDict(frozen=True)

    customer_id: str
    name: str


class OrderChanged(BaseModel):
    """A write that was done: the customer's message and the order as it is now."""

    model_config = ConfigDict(frozen=True)

    done: Literal[True] = True
    message: str
    order: OrderView


ResultT = TypeVar("ResultT", bound=BaseModel)


def error_result(code: str, message: str) -> CallToolResult:
    """A refusal as the model and the bot read it: ``isError`` with its code and words."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def _ok(result: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json())],
        structured_content=result.model_dump(mode="json"),
    )


_UNAVAILABLE = ("shop_unavailable", "Магазин временно недоступен, попробуйте позже.")


class DemoShopServer(MCPServer[Any]):
    """The SDK's server whose argument errors are refusals like the others: code and message.

    The SDK answers arguments that fail the schema with its own long text (the
    rejected values quoted); here they are ``invalid_arguments`` naming the
    fields and the rules they broke, never the values.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The tool's result; arguments that fail validation as an ``isError`` result."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if not isinstance(error.__cause__, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
                for problem in error.__cause__.errors(include_input=False, include_url=False)
            )
            return error_result("invalid_arguments", problems)


def customer_of(customer_id: str) -> Customer:
    """The demo shop's customer of a bound ``customer_id``.

    A number is the customer the built-in tools know by that Telegram user id;
    anything else is the one they know by that chat id (the console's
    conversation id). Either way both see the same orders and the same changes.
    """
    if customer_id.isdigit():
        return Customer(user_id=int(customer_id), chat_id=int(customer_id))
    return Customer(user_id=None, chat_id=customer_id)


def _context(customer: Customer) -> TurnContext:
    return TurnContext(
        conversation_key=f"mcp:{customer.key}",
        chat_id=customer.chat_id,
        user_id=customer.user_id,
        turn_id="mcp",
    )


async def _run_read(
    tool: RegisteredTool[Any, ResultT], arguments: BaseModel, customer: Customer | None = None
) -> CallToolResult:
    """The built-in read tool's handler, its business refusals as ``isError`` results.

    A tool that reads the customer (its handler takes the turn's context) gets
    one built from ``customer``, the bound ``customer_id``.
    """
    handler: Callable[..., Any] = tool.handler
    try:
        if customer is not None:
            outcome = handler(arguments, _context(customer))
        else:
            outcome = handler(arguments)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except ToolBusinessError as error:
        return error_result(error.code, str(error))
    except (ShopUnavailableError, RedisError):
        logger.warning("Tool %s: the shop's storage is unreachable", tool.name)
        return error_result(*_UNAVAILABLE)
    return _ok(outcome)


def idempotency_key(tool: str, customer: Customer, *parts: str) -> str:
    """The key of one change: the tool, the customer and what decides the change."""
    material = "\x1f".join((tool, customer.key, *parts))
    return "mcp-" + hashlib.sha256(material.encode()).hexdigest()[:32]


async def _run_write(
    shop: RedisDemoShop,
    tool: WriteTool[Any, Any],
    arguments: Any,
    customer: Customer,
    key: str,
) -> CallToolResult:
    """The built-in write tool's handler (its rules and texts) under ``key``."""
    try:
        outcome = await tool.handler(arguments, customer, key)
        order = await shop.order(customer, arguments.order_id) if outcome.done else None
    except (ShopUnavailableError, RedisError):
        logger.warning("Tool %s: the shop's storage is unreachable", tool.name)
        return error_result(*_UNAVAILABLE)
    if not outcome.done or order is None:
        return error_result(outcome.error_code or "not_done", outcome.message)
    return _ok(OrderChanged(message=outcome.message, order=order))


def build_demo_shop_server(
    shop: RedisDemoShop,
    shop_data: ShopData,
    *,
    timezone: str | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    log_level: LogLevel = "INFO",
) -> DemoShopServer:
    """An MCP server with the demo shop's tools over ``shop`` (orders) and ``shop_data``."""
    server = DemoShopServer(
        SERVER_NAME,
        title="Демо-магазин",
        instructions=(
            "Инструменты демо-магазина: заказы клиента, возвраты, каталог и часы поддержки. "
            "customer_id подставляет приложение."
        ),
        version="1.0.0",
        # The HTTP server's own lines (uvicorn) follow LOG_LEVEL too.
        log_level=log_level,
    )
    order_status = build_order_status_tool(shop_data, shop)
    return_policy = build_return_policy_tool(shop_data)
    product_search = build_product_search_tool(shop_data)
    support_hours = build_support_hours_tool(shop_data, timezone=timezone, clock=clock)
    cancel = build_cancel_order_tool(shop)
    return_tool = build_request_return_tool(shop, shop_data, clock)
    change_address = build_change_delivery_address_tool(shop)

    @server.tool(
        name=GET_ORDER_STATUS_TOOL_NAME,
        title="Статус заказа",
        description=order_status.description,
        annotations=_READ,
    )
    async def get_order_status(
        customer_id: CustomerIdArgument,
        order_id: Annotated[str, argument(GetOrderStatusArguments, "order_id")],
    ) -> Annotated[CallToolResult, CurrentOrderStatusResult]:
        arguments = GetOrderStatusArguments(order_id=order_id)
        return await _run_read(order_status, arguments, customer_of(customer_id))

    @server.tool(
        name=GET_RETURN_POLICY_TOOL_NAME,
        title="Условия возврата товара",
        description=return_policy.description,
        annotations=_READ,
    )
    async def get_return_policy(
        product: Annotated[str, argument(GetReturnPolicyArguments, "product")],
    ) -> Annotated[CallToolResult, ReturnPolicyResult]:
        return await _run_read(return_policy, GetReturnPolicyArguments(product=product))

    @server.tool(
        name=SEARCH_PRODUCTS_TOOL_NAME,
        title="Поиск товаров в каталоге",
        description=product_search.description,
        annotations=_READ,
    )
    async def search_products(
        query: Annotated[str, argument(SearchProductsArguments, "query")],
    ) -> Annotated[CallToolResult, SearchProductsResult]:
        return await _run_read(product_search, SearchProductsArguments(query=query))

    @server.tool(
        name=GET_SUPPORT_HOURS_TOOL_NAME,
        title="Часы работы поддержки",
        description=support_hours.description,
        annotations=_READ,
    )
    async def get_support_hours() -> Annotated[CallToolResult, SupportHoursResult]:
        return await _run_read(support_hours, GetSupportHoursArguments())

    @server.tool(
        name=FIND_CUSTOMER_BY_PHONE_TOOL_NAME,
        title="Поиск клиента по номеру телефона",
        description=(
            "Находит клиента магазина по номеру телефона из контакта, которым клиент "
            "поделился сам. Вызывает приложение при привязке аккаунта, не модель."
        ),
        annotations=_READ,
    )
    async def find_customer_by_phone(
        phone: Annotated[
            str,
            Field(
                min_length=5,
                max_length=32,
                description="Номер телефона в международном формате, например +79161234567.",
            ),
        ],
    ) -> Annotated[CallToolResult, CustomerFound]:
        found = shop_data.find_customer_by_phone(phone)
        if found is None:
            return error_result("customer_not_found", "Клиент с таким номером не найден.")
        return _ok(CustomerFound(customer_id=found.customer_id, name=found.name))

    @server.tool(
        name=CANCEL_ORDER_TOOL_NAME,
        title="Отмена заказа",
        description=(
            "Отменяет заказ клиента, который ещё не передан в доставку. "
            "Повторный вызов для того же заказа ничего не меняет и отвечает тем же."
        ),
        annotations=_WRITE,
    )
    async def cancel_order(
        customer_id: CustomerIdArgument,
        order_id: Annotated[str, argument(CancelOrderArguments, "order_id")],
        reason: Annotated[str, argument(CancelOrderArguments, "reason")],
    ) -> Annotated[CallToolResult, OrderChanged]:
        customer = customer_of(customer_id)
        arguments = CancelOrderArguments(order_id=order_id, reason=reason)
        key = idempotency_key(CANCEL_ORDER_TOOL_NAME, customer, order_id)
        return await _run_write(shop, cancel, arguments, customer, key)

    @server.tool(
        name=REQUEST_RETURN_TOOL_NAME,
        title="Оформление возврата",
        description=(
            "Оформляет возврат товаров из доставленного заказа в пределах срока возврата "
            "и отвечает номером заявки. Повторный вызов с теми же товарами отвечает той же заявкой."
        ),
        annotations=_WRITE,
    )
    async def request_return(
        customer_id: CustomerIdArgument,
        order_id: Annotated[str, argument(RequestReturnArguments, "order_id")],
        items: Annotated[list[str], argument(RequestReturnArguments, "items")],
        reason: Annotated[str, argument(RequestReturnArguments, "reason")],
    ) -> Annotated[CallToolResult, OrderChanged]:
        customer = customer_of(customer_id)
        arguments = RequestReturnArguments(order_id=order_id, items=items, reason=reason)
        key = idempotency_key(REQUEST_RETURN_TOOL_NAME, customer, order_id, *sorted(set(items)))
        return await _run_write(shop, return_tool, arguments, customer, key)

    @server.tool(
        name=CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
        title="Смена адреса доставки",
        description=(
            "Меняет адрес доставки заказа, который ещё не передан в доставку. "
            "Повторный вызов с тем же адресом ничего не меняет."
        ),
        annotations=_WRITE,
    )
    async def change_delivery_address(
        customer_id: CustomerIdArgument,
        order_id: Annotated[str, argument(ChangeDeliveryAddressArguments, "order_id")],
        address: Annotated[str, argument(ChangeDeliveryAddressArguments, "address")],
    ) -> Annotated[CallToolResult, OrderChanged]:
        customer = customer_of(customer_id)
        arguments = ChangeDeliveryAddressArguments(order_id=order_id, address=address)
        key = idempotency_key(CHANGE_DELIVERY_ADDRESS_TOOL_NAME, customer, order_id, address)
        return await _run_write(shop, change_address, arguments, customer, key)

    return server


@dataclass(frozen=True, slots=True, kw_only=True)
class ShopServerSettings:
    """The bot's settings this server reads: Redis, the shop's data, logging."""

    redis: RedisSettings
    tools: ToolSettings
    log_level: LogLevel
    log_format: str


def load_server_settings(env_file: str | None = ".env") -> ShopServerSettings | None:
    """Only the sections the server needs (no Telegram token, no model key); ``None`` on errors.

    Every problem is printed, one line each, naming the variable (never its value).
    """
    sections: dict[str, BaseSettings] = {}
    problems: list[str] = []
    for name in ("redis", "tools", "log"):
        try:
            sections[name] = SETTINGS_SECTIONS[name](_env_file=env_file)
        except ValidationError as error:
            problems.extend(describe_settings_error(error))
    for line in problems:
        print(f"configuration error: {line}", file=sys.stderr)
    if problems:
        return None
    redis, tools, log = sections["redis"], sections["tools"], sections["log"]
    assert isinstance(redis, RedisSettings)  # noqa: S101 - narrows the type for mypy
    assert isinstance(tools, ToolSettings)  # noqa: S101 - narrows the type for mypy
    return ShopServerSettings(
        redis=redis,
        tools=tools,
        log_level=_log_level(getattr(log, "level", "INFO")),
        log_format=str(getattr(log, "format", "text")),
    )


async def serve(
    settings: ShopServerSettings, *, transport: Literal["http", "stdio"], host: str, port: int
) -> int:
    """Connect to the demo shop's Redis and serve until stopped; 1 when Redis is unreachable."""
    try:
        shop_data = ShopData.load(settings.tools.data_path)
    except (OSError, ValueError) as error:
        print(
            f"error: TOOL_DATA_PATH {settings.tools.data_path} is not a usable shop data file "
            f"({type(error).__name__})",
            file=sys.stderr,
        )
        return 1
    redis = async_client(settings.redis)
    try:
        try:
            await redis.ping()
        except (RedisError, OSError) as error:
            print(
                f"error: Redis is unreachable at {describe_target(settings.redis)} "
                f"({type(error).__name__})",
                file=sys.stderr,
            )
            return 1
        shop = RedisDemoShop(redis, RedisKeys(settings.redis.key_prefix), shop_data)
        server = build_demo_shop_server(
            shop, shop_data, timezone=settings.tools.support_timezone, log_level=settings.log_level
        )
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            logger.info("Demo shop MCP server on http://%s:%d%s", host, port, MCP_PATH)
            await server.run_streamable_http_async(
                host=host, port=port, streamable_http_path=MCP_PATH
            )
    finally:
        await redis.aclose()
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command line of ``shop-mcp``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (HTTP)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (HTTP)")
    parser.add_argument(
        "--stdio", action="store_true", help="talk MCP over stdin/stdout instead of HTTP"
    )


def run(parsed: argparse.Namespace) -> int:
    """Run the server the parsed command line asks for: exit 2 on bad settings, 1 without Redis."""
    settings = load_server_settings()
    if settings is None:
        return 2
    # Logs go to stderr: with --stdio, stdout carries the protocol.
    configure_logging(settings.log_level, settings.log_format)
    transport: Literal["http", "stdio"] = "stdio" if parsed.stdio else "http"
    # uvicorn shuts down gracefully on SIGTERM, then raises it again for the handler
    # that was there before: this one makes a requested stop exit with 0.
    signal.signal(signal.SIGTERM, _stopped)
    try:
        return event_loop.run(
            serve(settings, transport=transport, host=parsed.host, port=parsed.port)
        )
    except KeyboardInterrupt:
        return 130


def _stopped(_signal: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bot.tryout.demo_shop_mcp [--host H] [--port P] [--stdio]``."""
    parser = argparse.ArgumentParser(
        prog="python -m bot shop-mcp", description="the demo shop as an MCP server"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
