"""A shop's MCP servers as one feature (``MCP_SERVERS``): their sessions, closed at the end.

Opened by :func:`open_mcp` before the model client: their tools join the registry
(the offline demo model learns the tools registered by then).
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from bot.mcp.servers import McpServers, McpSetupError, tool_definition_tokens
from bot.ops.features import Feature
from bot.ops.startup import StartupError
from bot.settings import Settings
from tools.registry import ToolRegistry
from tools.write_tools import Localize, as_written

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class McpFeature(Feature):
    """The shop's MCP servers: one session each, their tools in the registry."""

    name: ClassVar[str] = "mcp"

    servers: McpServers

    async def aclose(self) -> None:
        """Close every server's session."""
        await self.servers.aclose()


async def open_mcp(
    settings: Settings,
    registry: ToolRegistry,
    environ: Mapping[str, str],
    localize: Localize = as_written,
    *,
    hidden: Mapping[str | None, frozenset[str]] | None = None,
) -> McpFeature | None:
    """The servers of ``MCP_SERVERS`` (``None`` when empty), their tools in ``registry``."""
    if not settings.mcp.servers:
        return None
    servers = await open_mcp_servers(settings, registry, environ, localize, hidden=hidden)
    return McpFeature(servers=servers)


async def open_mcp_servers(
    settings: Settings,
    registry: ToolRegistry,
    environ: Mapping[str, str],
    localize: Localize = as_written,
    *,
    hidden: Mapping[str | None, frozenset[str]] | None = None,
) -> McpServers:
    """Connect ``MCP_SERVERS`` and offer their tools in ``registry`` (down ones retry later).

    ``hidden``: the tools of each server that are the application's, never offered to
    the model (the account link lookup). One warning line when the tool definitions
    exceed ``MCP_TOOLS_TOKEN_WARNING`` tokens.
    """
    try:
        servers = McpServers(
            settings=settings.mcp,
            registry=registry,
            environ=environ,
            localize=localize,
            hidden=dict(hidden or {}),
        )
    except McpSetupError as error:
        raise StartupError(str(error)) from error
    await servers.start()
    tokens = tool_definition_tokens(registry)
    limit = settings.mcp.tools_token_warning
    if limit and tokens > limit:
        logger.warning(
            "Tool definitions take about %d tokens of every model request (%d tools), more "
            "than MCP_TOOLS_TOKEN_WARNING=%d: narrow the servers' tools allowlists",
            tokens,
            len(registry.names()),
            limit,
        )
    return servers
