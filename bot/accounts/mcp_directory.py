"""The shop's customers by phone number through a lookup tool on the shop's own MCP server.

``ACCOUNT_LINK_TOOL=<server>:<tool>`` names it (``shop:find_customer_by_phone``).
The bot calls it itself, never the model, on the server's one session; the tool
need not be in the server's ``tools`` allowlist (it is not offered to the model).
The tool takes ``{"phone": "+7..."}`` (a number Telegram proved is the sender's) and
answers ``customer_id`` in its structured content; an ``isError`` result naming
``customer_not_found`` is no customer; any other failure is
:class:`~bot.accounts.directory.CustomerDirectoryError`.
"""

import json
from dataclasses import dataclass, field

from bot.accounts.directory import CUSTOMER_ID_MAX_CHARS, CustomerDirectoryError, ShopAccount
from bot.mcp.connection import McpConnection
from tools.mcp.tool import McpCallError

NOT_FOUND = "customer_not_found"
"""The code of the lookup's ``isError`` answer for a number the shop does not know."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpCustomerDirectory:
    """Looks a phone number up with ``remote_name`` on ``connection`` (a read, safe to retry)."""

    connection: McpConnection = field(repr=False)
    remote_name: str
    tool_name: str
    timeout_seconds: float = 10.0

    async def find_by_phone(self, phone: str) -> ShopAccount | None:
        """The shop's customer with this number; ``None`` when the shop has none."""
        try:
            outcome = await self.connection.call(
                self.remote_name, {"phone": phone}, self.timeout_seconds, True
            )
        except (McpCallError, TimeoutError, OSError) as error:
            raise CustomerDirectoryError(
                f"{self.tool_name}: the shop could not be asked ({type(error).__name__})"
            ) from error
        structured = _answer(outcome.structured, outcome.text)
        if outcome.is_error:
            error_field = structured.get("error")
            code = error_field.get("code") if isinstance(error_field, dict) else None
            if code == NOT_FOUND or outcome.text.startswith(NOT_FOUND):
                return None
            raise CustomerDirectoryError(f"{self.tool_name}: the shop refused the lookup")
        customer_id = structured.get("customer_id")
        if not isinstance(customer_id, str | int) or not str(customer_id).strip():
            raise CustomerDirectoryError(f"{self.tool_name}: the answer names no customer_id")
        if len(str(customer_id)) > CUSTOMER_ID_MAX_CHARS:
            # Bound into every later call of the shop's tools: an id this long is no id.
            raise CustomerDirectoryError(
                f"{self.tool_name}: the answer's customer_id is longer than "
                f"{CUSTOMER_ID_MAX_CHARS} characters"
            )
        return ShopAccount(customer_id=str(customer_id))


def _answer(structured: object, text: str) -> dict[str, object]:
    """The lookup's answer: its structured content, or its text when that is a JSON object.

    A server written without an output schema sends the JSON as text only.
    """
    if isinstance(structured, dict):
        return structured
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
