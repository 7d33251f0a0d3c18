"""Who may write to customers from the staff chat: current members, asked of Telegram briefly.

A public supergroup may let non-members write, so every staff topic message is
checked with ``getChatMember``. A burst of messages (a staff member answering,
or someone flooding a topic) asks once per user per ``ttl_seconds``: the answer
is kept in process, for a few seconds, for a bounded number of users. A removed
member may still be relayed for at most that long.
"""

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from aiogram import Bot
from aiogram.enums import ChatMemberStatus
from aiogram.exceptions import TelegramAPIError

logger = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30.0
DEFAULT_MAX_ENTRIES = 1024

_MEMBERS = frozenset(
    {ChatMemberStatus.CREATOR, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.MEMBER}
)


class MembershipError(Exception):
    """Telegram could not say whether the user is a member (nothing is cached then)."""


class StaffMembership:
    """``getChatMember`` answers, kept ``ttl_seconds`` per (chat, user), oldest evicted first."""

    def __init__(
        self,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_seconds
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[tuple[int, int], tuple[bool, float]] = OrderedDict()

    async def is_member(self, bot: Bot, chat_id: int, user_id: int) -> bool:
        """Whether ``user_id`` is a member of ``chat_id``; raises :class:`MembershipError`."""
        key = (chat_id, user_id)
        now = self._clock()
        cached = self._entries.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        try:
            member = await bot.get_chat_member(chat_id=chat_id, user_id=user_id)
        except TelegramAPIError as error:
            raise MembershipError(type(error).__name__) from error
        answer = member.status in _MEMBERS or (
            member.status == ChatMemberStatus.RESTRICTED
            and bool(getattr(member, "is_member", False))
        )
        self._entries[key] = (answer, now + self._ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return answer

    async def admits(self, bot: Bot, chat_id: int, user_id: int, what: str) -> bool:
        """Whether ``user_id`` may act in ``chat_id``; ``what`` (a message, a press) is
        logged as dropped when not, or when Telegram cannot tell (never an error)."""
        try:
            member = await self.is_member(bot, chat_id, user_id)
        except MembershipError as error:
            logger.warning("Membership check failed (%s); %s dropped", error, what)
            return False
        if not member:
            logger.warning("%s from a non-member; dropped", what)
        return member
