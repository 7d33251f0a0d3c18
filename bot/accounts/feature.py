"""Account linking as one feature: a chat linked to the shop's customer by a shared contact.

On with ``ACCOUNT_LINK_TOOL``: the demo shop's lookup answered in process, or
``<server>:<tool>`` of ``MCP_SERVERS`` (:mod:`bot.accounts.mcp_directory`).
"""

from dataclasses import dataclass
from typing import ClassVar

from bot.accounts.directory import DEMO_LOOKUP_TOOL, CustomerDirectory, DemoCustomerDirectory
from bot.accounts.linking import AccountLinking
from bot.accounts.mcp_directory import McpCustomerDirectory
from bot.core import CoreParts
from bot.mcp.feature import McpFeature
from bot.ops.features import Feature, Features
from bot.ops.startup import StartupError
from bot.settings import Settings


@dataclass(frozen=True, kw_only=True)
class AccountsFeature(Feature):
    """``/link`` and the shared contact: who the customer is in the shop."""

    name: ClassVar[str] = "accounts"

    linking: AccountLinking


def check_link_tool(settings: Settings) -> None:
    """``ACCOUNT_LINK_TOOL`` names the demo lookup or ``<server>:<tool>`` of ``MCP_SERVERS``.

    Checked before anything connects: an unknown lookup stops the start with one line.
    """
    tool = settings.tools.account_link_tool
    if tool is None or tool == DEMO_LOOKUP_TOOL:
        return
    server, colon, remote = tool.partition(":")
    if not colon or not remote:
        raise StartupError(
            f"ACCOUNT_LINK_TOOL={tool}: name the shop's lookup as <server>:<tool> "
            f"(a server of MCP_SERVERS), or {DEMO_LOOKUP_TOOL} for the demo shop"
        )
    if server not in {configured.name for configured in settings.mcp.servers}:
        raise StartupError(f"ACCOUNT_LINK_TOOL={tool}: MCP_SERVERS has no server named {server}")


def link_tools(settings: Settings) -> dict[str | None, frozenset[str]]:
    """The account link lookup, by server: the application's, never offered to the model."""
    tool = settings.tools.account_link_tool
    if tool is None:
        return {}
    if tool == DEMO_LOOKUP_TOOL:
        return {None: frozenset({DEMO_LOOKUP_TOOL})}
    server, _, remote = tool.partition(":")
    return {server: frozenset({remote})}


def build_accounts(core: CoreParts, built: Features) -> AccountsFeature | None:
    """Account linking of ``core``'s settings; ``None`` without ``ACCOUNT_LINK_TOOL``."""
    directory = _customer_directory(core, built.get(McpFeature))
    if directory is None:
        return None
    return AccountsFeature(linking=AccountLinking(chat=core.chat, directory=directory))


def _customer_directory(core: CoreParts, mcp: McpFeature | None) -> CustomerDirectory | None:
    """The shop's customers by phone number for ``ACCOUNT_LINK_TOOL`` (``None`` when unset).

    The demo shop's lookup is answered in process, over the shop data its MCP server
    reads too; ``<server>:<tool>`` calls that tool on the shop's MCP server.
    Checked by :func:`check_link_tool` first.
    """
    tool = core.settings.tools.account_link_tool
    if tool is None:
        return None
    if tool == DEMO_LOOKUP_TOOL:
        return DemoCustomerDirectory(shop_data=core.shop, tool_name=tool)
    server, _, remote = tool.partition(":")
    connection = mcp.servers.connection(server) if mcp is not None else None
    if connection is None:
        raise StartupError(f"ACCOUNT_LINK_TOOL={tool}: MCP_SERVERS has no server named {server}")
    return McpCustomerDirectory(
        connection=connection,
        remote_name=remote,
        tool_name=tool,
        timeout_seconds=connection.settings.timeout_seconds,
    )
