"""The start-up check of ``STAFF_CHAT_ID``: a forum supergroup where the bot manages topics.

Without it a wrong group is found only at the first handoff: the customer is
told a person was called while ``createForumTopic`` fails with 400 and no
staff member ever sees the request.
"""

from aiogram import Bot
from aiogram.enums import ChatType
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
)
from aiogram.types import ChatMemberAdministrator, ChatMemberOwner

NOT_A_FORUM = (
    "STAFF_CHAT_ID is not a forum supergroup: turn Topics on in the staff group's settings"
)
NO_TOPIC_RIGHTS = (
    "the bot cannot manage topics in the STAFF_CHAT_ID group: make it an administrator "
    "with the Manage topics right"
)


async def staff_chat_problem(bot: Bot, staff_chat_id: int) -> str | None:
    """Why handoff cannot work in ``staff_chat_id`` (one line for the operator), else ``None``."""
    method = "getChat"
    try:
        chat = await bot.get_chat(chat_id=staff_chat_id)
        if chat.type != ChatType.SUPERGROUP or not chat.is_forum:
            return NOT_A_FORUM
        method = "getChatMember"
        member = await bot.get_chat_member(chat_id=staff_chat_id, user_id=bot.id)
    except ClientDecodeError as error:
        # An answer aiogram cannot read (not JSON, or not the Bot API's shape): a proxy
        # or server in between, or a Bot API newer than this aiogram. One line, no trace.
        return (
            f"the STAFF_CHAT_ID group could not be checked: the Bot API's answer to {method} "
            f"could not be read ({type(error.original).__name__})"
        )
    except (TelegramBadRequest, TelegramForbiddenError) as error:
        reason = " ".join(error.message.split())[:200]
        return f"the bot cannot see the STAFF_CHAT_ID group ({reason}): add the bot to it"
    except TelegramAPIError as error:
        return f"the STAFF_CHAT_ID group could not be checked: {type(error).__name__}"
    manages_topics = isinstance(member, ChatMemberOwner) or (
        isinstance(member, ChatMemberAdministrator) and member.can_manage_topics
    )
    return None if manages_topics else NO_TOPIC_RIGHTS
