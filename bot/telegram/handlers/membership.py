"""``my_chat_member``: the customer blocked or unblocked the bot (or a group removed it)."""

import logging

from aiogram import Router
from aiogram.enums import ChatMemberStatus
from aiogram.types import ChatMemberUpdated

from bot.ops.log_context import chat_label
from bot.storage.blocked_chats import BlockedChats

logger = logging.getLogger(__name__)

_GONE = frozenset({ChatMemberStatus.KICKED, ChatMemberStatus.LEFT})


async def membership_changed(event: ChatMemberUpdated, blocked_chats: BlockedChats) -> None:
    """Set the chat's blocked flag when the bot was blocked or removed, clear it when back."""
    chat_id = event.chat.id
    if event.new_chat_member.status in _GONE:
        await blocked_chats.block(chat_id)
        logger.info("%s blocked or removed the bot: no more sends to it", chat_label(chat_id))
    else:
        await blocked_chats.unblock(chat_id)
        logger.info("%s has the bot again", chat_label(chat_id))


def build_router() -> Router:
    """A fresh router with the ``my_chat_member`` handler."""
    router = Router(name=__name__)
    router.my_chat_member.register(membership_changed)
    return router
