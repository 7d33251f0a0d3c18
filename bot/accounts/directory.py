"""Finding the shop's customer by phone number: the seam account linking looks through.

``ACCOUNT_LINK_TOOL`` names the shop's lookup tool. The demo shop's
(``find_customer_by_phone``) is answered here, in process, by
:class:`DemoCustomerDirectory` over the same shop data the demo shop's MCP server
reads (``python -m bot shop-mcp`` serves the same lookup as a tool). A shop
connected over MCP names ``<server>:<tool>``:
:class:`~bot.accounts.mcp_directory.McpCustomerDirectory` calls that tool on the
server's session (``bot/app.py``, ``_customer_directory``, picks it).
"""

from dataclasses import dataclass
from typing import Protocol

from tools.shop_data import ShopData

DEMO_LOOKUP_TOOL = "find_customer_by_phone"
"""The demo shop's lookup: the name its MCP server gives the tool, answered here in process."""


class CustomerDirectoryError(RuntimeError):
    """The shop could not be asked (unreachable, timed out, an answer that makes no sense)."""


CUSTOMER_ID_MAX_CHARS = 128
"""A linked customer id at most: it is stored with the link and bound into the shop's calls."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShopAccount:
    """The shop's customer a phone number belongs to."""

    customer_id: str


class CustomerDirectory(Protocol):
    """The shop's customers by phone number (a number Telegram proved is the sender's)."""

    @property
    def tool_name(self) -> str:
        """The lookup's name, as ``ACCOUNT_LINK_TOOL`` gives it (for the audit)."""
        ...

    async def find_by_phone(self, phone: str) -> ShopAccount | None:
        """The customer with this number, ``None`` when the shop has none.

        Raises :class:`CustomerDirectoryError` when the shop cannot answer.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoCustomerDirectory:
    """The demo shop's customers (``customers`` of the shop data file), looked up in memory."""

    shop_data: ShopData
    tool_name: str = DEMO_LOOKUP_TOOL

    async def find_by_phone(self, phone: str) -> ShopAccount | None:
        """The demo customer whose number has the same digits, if any."""
        found = self.shop_data.find_customer_by_phone(phone)
        return ShopAccount(customer_id=found.customer_id) if found is not None else None
