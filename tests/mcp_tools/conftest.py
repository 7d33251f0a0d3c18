"""Fixtures of the MCP client tests: a Bot pointed at the fake Bot API (as in tests/telegram)."""

from tests.telegram.conftest import bot

__all__ = ["bot"]
