"""``/link`` and a shared contact: account linking (:mod:`bot.accounts.linking`).

The dispatcher includes this router only with ``ACCOUNT_LINK_TOOL`` set (:func:`routers`); without
it ``/link`` is an unknown command (the help) and a contact is a message that
is not text, as before linking existed.
"""

import logging

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.filters import Command, Filter
from aiogram.types import Message

from bot import customer_texts
from bot.accounts.feature import AccountsFeature
from bot.accounts.linking import SharedContact
from bot.chat_errors import ChatServiceError
from bot.language.texts import Texts
from bot.ops.features import Features
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobOutcome
from bot.storage.keys import telegram_conversation
from bot.telegram.feature_routers import FeatureRouters
from bot.telegram.filters import CommandLike

logger = logging.getLogger(__name__)


class HasContact(Filter):
    """A message carrying a contact; what ``F.contact`` checks, on the loop."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` shares a contact."""
        return message.contact is not None


async def link_command(
    message: Message, accounts: AccountsFeature, texts: Texts | None = None
) -> Reply:
    """Ask for the customer's own contact with the ``request_contact`` button."""
    return accounts.linking.ask(private_chat=message.chat.type == ChatType.PRIVATE, texts=texts)


async def shared_contact(
    message: Message, job: JobContext, accounts: AccountsFeature, texts: Texts | None = None
) -> JobOutcome:
    """Link the account if the contact is the sender's own (never a number typed as text)."""
    contact = message.contact
    if contact is None:  # HasContact let it through: never, said for the type checker
        return Reply.say(customer_texts.shown(texts, customer_texts.NON_TEXT))
    shared = SharedContact(
        private_chat=message.chat.type == ChatType.PRIVATE,
        sender_id=message.from_user.id if message.from_user else None,
        contact_user_id=contact.user_id,
        phone=contact.phone_number,
    )
    try:
        return await accounts.linking.link(
            telegram_conversation(message.chat.id), job, shared, texts=texts
        )
    except ChatServiceError as error:
        # Not saved: nothing is linked; the customer can share the contact again.
        logger.warning("Account link not saved: %s", error.kind)
        return Reply.say(
            customer_texts.failure_message(error, job.job.turn_id, customer_texts.gettext_of(texts))
        )


def build_router() -> Router:
    """A fresh router with ``/link`` and the contact handler; include before the commands."""
    router = Router(name=__name__)
    router.message.register(link_command, CommandLike(), Command("link"))
    router.message.register(shared_contact, HasContact())
    return router


def routers(features: Features) -> FeatureRouters:
    """With account linking on, ``/link`` before the commands' catch-all and a shared
    contact before "not text"; off, both are handled as before linking existed."""
    if features.get(AccountsFeature) is None:
        return FeatureRouters()
    return FeatureRouters(customer=(build_router(),))
