"""A shop's MCP server for the tests: real ``mcp`` SDK server, streamable HTTP or stdio.

Run as a process: ``python -m bot.testing.mcp_server --transport http --port N
--calls FILE [--many 200]`` (or ``--transport stdio``). Every ``tools/call`` it
receives is appended to ``FILE`` (one JSON line, flushed and synced before the tool
runs), so a test counts calls across restarts and crashes of either side.

Its tools cover what a shop's server does: a read tool annotated read-only,
write tools annotated destructive, a tool answering ``isError``, a hanging tool,
a 1 MB result, arguments bound to the customer, and schemas a strict function
schema cannot take as they are (``$ref``, ``format``, a free-form map).
"""

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

PAGE_SIZE = 50
SURROGATE_MARK = "@@SU@@"
"""Sent as the JSON escape of a lone surrogate (``\\ud800``, as long): the SDK cannot
write one itself, a server in another language can."""
BIG_RESULT_CHARS = 1_000_000

_READ = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
_IDEMPOTENT_WRITE = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True
)


def _object(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_ORDER_ID = {"type": "string", "description": "Номер заказа", "pattern": "^[0-9]{3,8}$"}

SHOP_TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="get_order",
        title="Заказ",
        description="Статус заказа по номеру.",
        input_schema=_object({"order_id": _ORDER_ID}, ["order_id"]),
        annotations=_READ,
    ),
    types.Tool(
        name="cancel_order",
        title="Отмена заказа",
        description="Отменяет заказ клиента.",
        input_schema=_object(
            {"order_id": _ORDER_ID, "reason": {"type": "string", "minLength": 1}},
            ["order_id", "reason"],
        ),
        annotations=_WRITE,
    ),
    types.Tool(
        name="refund",
        title="Возврат денег",
        description="Возвращает деньги за заказ; не больше 100 рублей без проверки.",
        input_schema=_object(
            {"order_id": _ORDER_ID, "amount_rub": {"type": "integer", "minimum": 1}},
            ["order_id", "amount_rub"],
        ),
        annotations=_READ,
    ),
    types.Tool(
        name="set_marketing",
        title="Рассылка",
        description="Включает или выключает рассылку (повтор безопасен).",
        input_schema=_object({"enabled": {"type": "boolean"}}, ["enabled"]),
        annotations=_IDEMPOTENT_WRITE,
    ),
    types.Tool(
        name="slow_lookup",
        description="Долгий поиск, который никогда не заканчивается.",
        input_schema=_object({}),
        annotations=_READ,
    ),
    types.Tool(
        name="export_catalogue",
        description="Выгружает весь каталог (очень большой ответ).",
        input_schema=_object({}),
        annotations=_READ,
    ),
    types.Tool(
        name="my_orders",
        title="Мои заказы",
        description="Заказы клиента магазина.",
        input_schema=_object(
            {
                "customer_id": {"type": ["string", "integer"]},
                "telegram_id": {"type": "integer"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            ["customer_id", "telegram_id", "limit"],
        ),
        annotations=_READ,
    ),
    types.Tool(
        name="getDeliverySlots",
        description="Свободные интервалы доставки (имя в camelCase, как у многих магазинов).",
        input_schema=_object({"city": {"type": "string"}}, ["city"]),
        annotations=_READ,
    ),
    types.Tool(
        name="add_tool",
        description="Добавляет инструмент с именем name и сообщает об изменении списка.",
        input_schema=_object({"name": {"type": "string"}}, ["name"]),
        annotations=_READ,
    ),
    types.Tool(
        name="no_arguments",
        description="Инструмент без аргументов.",
        input_schema={"type": "object"},
        annotations=_READ,
    ),
    types.Tool(
        name="search_products",
        description="Поиск товаров с необязательными фильтрами.",
        input_schema=_object(
            {
                "query": {"type": "string"},
                "max_price": {"type": "number"},
                "sort": {"type": "string", "enum": ["price", "rating"]},
            },
            ["query"],
        ),
        annotations=_READ,
    ),
    types.Tool(
        name="create_bundle",
        description="Собирает набор из позиций.",
        input_schema=_object(
            {
                "lines": {
                    "type": "array",
                    "items": _object(
                        {
                            "sku": {"type": "string"},
                            "quantity": {"type": "integer", "minimum": 1},
                            "options": {"type": "array", "items": {"type": "string"}},
                        },
                        ["sku", "quantity"],
                    ),
                }
            },
            ["lines"],
        ),
        annotations=_READ,
    ),
    types.Tool(
        name="ship_to",
        description="Сохраняет адрес (схема с $defs и $ref).",
        input_schema={
            "type": "object",
            "$defs": {
                "address": _object(
                    {"city": {"type": "string"}, "street": {"type": "string"}}, ["city"]
                )
            },
            "properties": {"address": {"$ref": "#/$defs/address"}},
            "required": ["address"],
        },
        annotations=_READ,
    ),
    types.Tool(
        name="report_link",
        description="Сообщает о ссылке (format: uri).",
        input_schema=_object({"url": {"type": "string", "format": "uri"}}, ["url"]),
        annotations=_READ,
    ),
    types.Tool(
        name="open_note",
        title="Заметка",
        description="Заметка к заказу; принимает и поля, которых не объявляет.",
        input_schema={
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "required": ["note"],
            "additionalProperties": True,
        },
        annotations=_READ,
    ),
    types.Tool(
        name="lookup_as_text",
        description="Клиент по телефону; JSON только текстом, без structuredContent.",
        input_schema=_object({"phone": {"type": "string"}}, ["phone"]),
        annotations=_READ,
    ),
    types.Tool(
        name="lookup_long_id",
        description="Клиент по телефону с идентификатором в 200 000 символов.",
        input_schema=_object({"phone": {"type": "string"}}, ["phone"]),
        annotations=_READ,
    ),
    types.Tool(
        name="request_human_agent",
        description="Инструмент магазина с именем встроенного.",
        input_schema=_object({"reason": {"type": "string"}}, ["reason"]),
        annotations=_READ,
    ),
    types.Tool(
        name="get-order",
        description="Второе имя get_order (get-order становится тем же get_order).",
        input_schema=_object({"order_id": _ORDER_ID}, ["order_id"]),
        annotations=_READ,
    ),
    types.Tool(
        name="compose_all_of",
        description="Схема из allOf на верхнем уровне.",
        input_schema={
            "type": "object",
            "allOf": [
                {"properties": {"sku": {"type": "string"}}, "required": ["sku"]},
                {"properties": {"quantity": {"type": "integer", "minimum": 1}}},
            ],
        },
        annotations=_READ,
    ),
    types.Tool(
        name="long_description",
        description="Очень длинное описание. " * 10_000,
        input_schema=_object({}),
        annotations=_READ,
    ),
    types.Tool(
        name="lone_surrogate",
        description="Ответ с половиной суррогатной пары UTF-16.",
        input_schema=_object({}),
        annotations=_READ,
    ),
    types.Tool(
        name="tag_order",
        description="Метки заказа: свободный словарь.",
        input_schema=_object(
            {"order_id": _ORDER_ID, "tags": {"type": "object", "additionalProperties": True}},
            ["order_id", "tags"],
        ),
        annotations=_READ,
    ),
)


def many_tools(count: int) -> list[types.Tool]:
    """``count`` filler tools (``filler_000`` ...), each with a paragraph of description."""
    return [
        types.Tool(
            name=f"filler_{index:03d}",
            description=f"Служебный инструмент номер {index}. " + "Описание. " * 30,
            input_schema=_object({"value": {"type": "string"}}, ["value"]),
            annotations=_READ,
        )
        for index in range(count)
    ]


class ShopServer:
    """The tools' behaviour; every call is appended to ``calls`` before it runs."""

    def __init__(self, calls: Path, many: int) -> None:
        self._calls = calls
        self._tools = [*SHOP_TOOLS, *many_tools(many)]
        # Where "the tool list changed" goes to the clients listening for it.
        self.bus = InMemorySubscriptionBus()

    async def list_tools(
        self, _ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """One page of the tools; a cursor is the next index."""
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE_SIZE
        return types.ListToolsResult(
            tools=self._tools[start:end],
            next_cursor=str(end) if end < len(self._tools) else None,
        )

    def _count(self, name: str, arguments: dict[str, Any]) -> None:
        line = json.dumps({"tool": name, "arguments": arguments, "pid": os.getpid()})
        with self._calls.open("a", encoding="utf-8") as file:
            file.write(line + "\n")
            file.flush()
            os.fsync(file.fileno())

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Run one tool (recorded first)."""
        arguments = params.arguments or {}
        self._count(params.name, arguments)
        if params.name == "add_tool":
            return await self._add_tool(ctx, arguments["name"])
        return await self._run(params.name, arguments)

    async def _add_tool(self, ctx: Any, name: str) -> types.CallToolResult:
        """List one more tool and say so: to listeners (2026) or on the session (2025)."""
        if all(tool.name != name for tool in self._tools):
            self._tools.append(
                types.Tool(
                    name=name,
                    description="Появился после add_tool.",
                    input_schema=_object({}),
                    annotations=_READ,
                )
            )
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()
        return _text("added")

    async def _run(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name == "slow_lookup":
            await anyio.sleep(3600)
        answer = _ANSWERS.get(name)
        if answer is None:
            return _structured({"tool": name, "arguments": arguments})
        return answer(arguments)


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _structured(data: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)


def _refund(arguments: dict[str, Any]) -> types.CallToolResult:
    if arguments["amount_rub"] > 100:
        return _text("Сумма больше 100 рублей: уменьшите сумму.", error=True)
    return _structured({"refunded_rub": arguments["amount_rub"]})


_ANSWERS: dict[str, Callable[[dict[str, Any]], types.CallToolResult]] = {
    "get_order": lambda a: _structured({"order_id": a["order_id"], "status": "в пути"}),
    "cancel_order": lambda a: _text(f"Заказ {a['order_id']} отменён."),
    "refund": _refund,
    "lookup_as_text": lambda _a: _text('{"customer_id": "c-77"}'),
    "lookup_long_id": lambda _a: _structured({"customer_id": "7" * 200_000}),
    "lone_surrogate": lambda _a: _structured({"status": f"в пути {SURROGATE_MARK}"}),
    "export_catalogue": lambda _a: _text("x" * BIG_RESULT_CHARS),
    "my_orders": lambda a: _structured(
        {
            "customer_id": a["customer_id"],
            "telegram_id": a["telegram_id"],
            "orders": ["8042"][: a["limit"]],
        }
    ),
}


def build_server(calls: Path, many: int = 0) -> Server[Any]:
    """The low-level SDK server over :class:`ShopServer`."""
    shop = ShopServer(calls, many)
    return Server(
        "test-shop",
        on_list_tools=shop.list_tools,
        on_call_tool=shop.call_tool,
        on_subscriptions_listen=ListenHandler(shop.bus),
    )


def _with_surrogates(app: Any) -> Any:
    """``app`` whose response bodies carry a lone surrogate's escape where the mark is."""

    async def rewriting(scope: Any, receive: Any, send: Any) -> None:
        async def rewritten(message: Any) -> None:
            if message.get("type") == "http.response.body":
                body = message.get("body", b"").replace(SURROGATE_MARK.encode(), b"\\ud800")
                message = {**message, "body": body}
            await send(message)

        await app(scope, receive, rewritten)

    return rewriting


def _requiring(app: Any, authorization: str) -> Any:
    """``app`` answering 401 to a request without ``Authorization: <authorization>``."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != authorization:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


async def _serve_http(server: Server[Any], port: int, authorization: str | None) -> None:
    import uvicorn  # noqa: PLC0415 - the stdio transport does not need it

    app = _with_surrogates(server.streamable_http_app())
    if authorization is not None:
        app = _requiring(app, authorization)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until killed (HTTP) or until stdin closes (stdio)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--calls", type=Path, required=True)
    parser.add_argument("--many", type=int, default=0)
    parser.add_argument("--authorization", help="the Authorization header every request needs")
    options = parser.parse_args(argv)
    server = build_server(options.calls, options.many)
    if options.transport == "http":
        anyio.run(_serve_http, server, options.port, options.authorization)
    else:
        anyio.run(_serve_stdio, server)


if __name__ == "__main__":
    main(sys.argv[1:])
