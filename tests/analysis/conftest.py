"""The Bot the Telegram-side tests send with (as in tests/telegram)."""

from tests.telegram.conftest import bot

__all__ = ["bot"]
