"""Every shop MCP server of ``MCP_SERVERS``: their connections, their tools in the registry.

Built and opened by the composition root (``bot/app.py``), closed by it in
reverse order. A server down at start-up does not stop the bot: its tools are
not offered until it answers (the connection is retried in the background) and
``/healthz`` names it as degraded.
"""

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import mcp_types
from pydantic import SecretStr

from bot.llm.tokens import estimate_text_tokens
from bot.mcp.connection import McpConnection
from bot.settings import McpServerSettings, McpSettings, header_value_problem
from tools.mcp.schema import ArgumentsSchema, McpSchemaError
from tools.mcp.tool import McpTool
from tools.registry import ToolRegistry, validate_tool_name
from tools.write_tools import Localize, as_written

logger = logging.getLogger(__name__)


class McpSetupError(RuntimeError):
    """``MCP_SERVERS`` cannot be used as configured; ``str()`` is one line for the operator."""


def resolve_headers(server: McpServerSettings, environ: Mapping[str, str]) -> dict[str, SecretStr]:
    """The server's secret headers read from the environment variables it names.

    The entry points check them with the settings (exit 2); this is the same check
    for an application built in process.
    """
    headers: dict[str, SecretStr] = {}
    for header, variable in server.headers_from_env.items():
        value = environ.get(variable)
        if not value:
            raise McpSetupError(
                f"MCP server {server.name}: header {header} needs the environment variable "
                f"{variable}, which is not set"
            )
        problem = header_value_problem(value)
        if problem is not None:
            raise McpSetupError(
                f"MCP server {server.name}: header {header}: the value of {variable} {problem}"
            )
        headers[header] = SecretStr(value)
    return headers


def exposed_name(remote: str) -> str:
    """The name the model sees for a server's tool: ``getOrder``, ``get-order`` are ``get_order``.

    The registry's names are ``[a-z][a-z0-9_]{0,63}``; a shop's server may spell its
    tools otherwise. The call still goes to the server under its own name.
    """
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", remote).lower()
    snake = re.sub(r"[^a-z0-9_]+", "_", snake).strip("_")
    if not snake or not snake[0].isalpha():
        snake = f"tool_{snake}"
    return snake[:64]


DESCRIPTION_MAX_CHARS = 1024
"""A server's tool description at most (every model request carries it)."""


def build_tools(
    server: McpServerSettings,
    listed: Sequence[mcp_types.Tool],
    connection: McpConnection,
    *,
    result_max_chars: int,
    localize: Localize = as_written,
    hidden: frozenset[str] = frozenset(),
) -> list[McpTool]:
    """The tools of ``listed`` that ``server``'s allowlist lets through, as registry tools.

    ``hidden``: the server's tools the application keeps for itself (the account link
    lookup), never offered to the model, allowlisted or not. Every bound argument
    name of the server is refused from the model for every tool; it is filled where
    the tool declares it. A second tool whose name maps to an exposed name already
    taken is left out (a warning names both).
    """
    allowed = set(server.tools) if server.tools is not None else None
    tools: list[McpTool] = []
    exposed: dict[str, str] = {}
    for tool in listed:
        if tool.name in hidden or (allowed is not None and tool.name not in allowed):
            continue
        properties = tool.input_schema.get("properties") or {}
        # Only the arguments this tool has are filled; every bound name is refused.
        bound = {
            name: source for name, source in server.bound_arguments.items() if name in properties
        }
        name = exposed_name(tool.name)
        if name in exposed:
            logger.warning(
                "MCP server %s: tool %s left out: its name %s is %s's already",
                server.name,
                tool.name,
                name,
                exposed[name],
            )
            continue
        try:
            validate_tool_name(name)
            schema = ArgumentsSchema.build(tool.input_schema, server.bound_arguments)
        except (ValueError, McpSchemaError) as error:
            logger.warning("MCP server %s: tool %s left out: %s", server.name, tool.name, error)
            continue
        exposed[name] = tool.name
        if server.bound_arguments and tool.input_schema.get("additionalProperties", False):
            logger.warning(
                "MCP server %s: tool %s accepts properties it does not declare beside the bound "
                "arguments (%s): the model cannot send them, but check the tool does not read "
                "a customer's identity from elsewhere",
                server.name,
                tool.name,
                ",".join(sorted(server.bound_arguments)),
            )
        annotations = tool.annotations or mcp_types.ToolAnnotations()
        trusted = server.trust_annotations
        title = tool.title or annotations.title or tool.name
        description = (tool.description or title).strip()
        if len(description) > DESCRIPTION_MAX_CHARS:
            logger.warning(
                "MCP server %s: tool %s's description is cut to %d characters (it had %d)",
                server.name,
                tool.name,
                DESCRIPTION_MAX_CHARS,
                len(description),
            )
            description = description[:DESCRIPTION_MAX_CHARS]
        tools.append(
            McpTool(
                name=name,
                server=server.name,
                remote_name=tool.name,
                title=title,
                description=description,
                schema=schema,
                call=connection.call,
                needs_card=not (trusted and annotations.read_only_hint is True),
                idempotent=trusted and annotations.idempotent_hint is True,
                read_only=annotations.read_only_hint is True,
                timeout_seconds=server.timeout_seconds,
                bound=bound,
                card_template=server.card_templates.get(tool.name),
                result_max_chars=result_max_chars,
                labels={
                    name: str(spec["title"])
                    for name, spec in properties.items()
                    if isinstance(spec, dict) and isinstance(spec.get("title"), str)
                },
                localize=localize,
            )
        )
    return tools


@dataclass
class McpServers:
    """The connections of ``MCP_SERVERS`` and the registry their tools are offered in."""

    settings: McpSettings
    registry: ToolRegistry
    environ: Mapping[str, str]
    connections: list[McpConnection] = field(default_factory=list)
    # The customer's texts of the shop's tools (cards, outcomes) in their language.
    localize: Localize = as_written
    # The tools the application keeps for itself, by server (``None``: every server).
    hidden: Mapping[str | None, frozenset[str]] = field(default_factory=dict)
    # Per server, the allowlisted tools its last listing lacked (warned once per change).
    _unlisted: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for server in self.settings.servers:
            headers = resolve_headers(server, self.environ)
            self.connections.append(McpConnection(server, headers=headers, on_tools=self._listed))

    def _listed(self, server_name: str, listed: list[mcp_types.Tool]) -> None:
        connection = next(c for c in self.connections if c.name == server_name)
        self._warn_unlisted(connection.settings, listed)
        tools = build_tools(
            connection.settings,
            listed,
            connection,
            result_max_chars=self.settings.result_max_chars,
            localize=self.localize,
            hidden=self.hidden.get(server_name, frozenset()) | self.hidden.get(None, frozenset()),
        )
        left_out = self.registry.set_mcp_tools(server_name, tools)
        if left_out:
            logger.warning(
                "MCP server %s: tools left out, their names are taken: %s",
                server_name,
                ",".join(left_out),
            )

    def _warn_unlisted(self, server: McpServerSettings, listed: list[mcp_types.Tool]) -> None:
        """One warning naming the allowlisted tools the server does not list (once per change)."""
        names = {tool.name for tool in listed}
        missing = tuple(name for name in server.tools or () if name not in names)
        if missing and missing != self._unlisted.get(server.name):
            logger.warning(
                "MCP server %s does not list %s, named in its tools allowlist: "
                "check the spelling (the server's own names) or the server's version",
                server.name,
                ", ".join(missing),
            )
        self._unlisted[server.name] = missing

    async def start(self) -> None:
        """Connect every server; wait for each up to ``MCP_CONNECT_TIMEOUT_SECONDS``.

        A server that refuses is not waited for; one that does not answer in time
        is left to the background retries too.
        """
        for connection in self.connections:
            connection.start()
        waits = [connection.first_attempt_done.wait() for connection in self.connections]
        if waits:
            try:
                async with asyncio.timeout(self.settings.connect_timeout_seconds):
                    await asyncio.gather(*waits)
            except TimeoutError:
                pass
        for connection in self.connections:
            if connection.up:
                continue
            if connection.credentials_rejected:
                logger.warning(
                    "MCP server %s %s; its tools are not offered, the bot starts without "
                    "them and asks again with growing pauses (at most every %.0f s)",
                    connection.name,
                    connection.down_reason,
                    connection.longest_pause_seconds,
                )
                continue
            logger.warning(
                "MCP server %s is down at start-up (%s): its tools are not offered, "
                "the bot starts without them and keeps retrying",
                connection.name,
                connection.down_reason,
            )

    def connection(self, server_name: str) -> McpConnection | None:
        """The session of server ``server_name`` (``None`` when MCP_SERVERS has none)."""
        return next((c for c in self.connections if c.name == server_name), None)

    def degraded(self) -> tuple[str, ...]:
        """The servers without an open session now (for ``/healthz``)."""
        return tuple(c.name for c in self.connections if not c.up)

    def down_reasons(self) -> dict[str, str]:
        """Why each server of :meth:`degraded` is down, one line each (secrets masked)."""
        return {c.name: c.down_reason or "not connected" for c in self.connections if not c.up}

    async def aclose(self) -> None:
        """Close the sessions in reverse order of opening."""
        for connection in reversed(self.connections):
            await connection.aclose()


def tool_definition_tokens(registry: ToolRegistry) -> int:
    """The estimated tokens of the tool definitions every model request carries."""
    return sum(
        estimate_text_tokens(json.dumps(schema, ensure_ascii=False))
        for schema in registry.api_schemas()
    )
