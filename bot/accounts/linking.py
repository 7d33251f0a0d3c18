"""Account linking inside a worker's job: ask for the customer's own contact, then link it.

Telegram proves a shared contact is the sender's own number only one way: the
contact message's ``contact.user_id`` is the sender's id (what the
``request_contact`` button sends). Any other contact (forwarded, picked from
the address book) is refused, and a number typed as text is never looked up:
it is an ordinary message for the model. A contact that is the sender's own is
looked up in the shop (:class:`~bot.accounts.directory.CustomerDirectory`);
the shop's customer id is saved in the session with the job's pop and the
reply in one commit, and the reply removes the keyboard. Each outcome is
audited as a ``type=link`` entry, without the number.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot import customer_texts
from bot.accounts.directory import CustomerDirectory, CustomerDirectoryError
from bot.audit.links import LinkAuditEntry, LinkEvent
from bot.engine.chat_service import ChatService
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import ReplyKeyboardKind, SendText
from bot.queue.job_results import JobContext, JobDone, JobOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedContact:
    """A contact message as the handler read it (the number never leaves this step)."""

    private_chat: bool
    sender_id: int | None
    contact_user_id: int | None
    phone: str

    @property
    def own(self) -> bool:
        """Whether Telegram says the contact is the sender's own."""
        return self.sender_id is not None and self.contact_user_id == self.sender_id


def shop_customer_id(job: JobContext) -> str | None:
    """The shop's customer id the chat's session keeps (``None`` until linked)."""
    session = job.session
    return session.shop_customer_id if session is not None else None


def link_request(text: str = customer_texts.LINK_NEEDED, texts: Texts | None = None) -> Reply:
    """``text`` with the «share my number» button: for a step that needs the customer's id.

    A tool whose bound ``customer_id`` is missing (no account linked yet) ends
    its turn with this instead of calling the shop. Both in ``texts``' language.
    """
    return Reply.of(
        SendText(
            text=customer_texts.shown(texts, text),
            keyboard="contact",
            language=texts.language if texts is not None else None,
        )
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountLinking:
    """``/link`` and shared contacts, for the handlers of a worker's job."""

    chat: ChatService
    directory: CustomerDirectory
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def ask(self, *, private_chat: bool, texts: Texts | None = None) -> Reply:
        """``/link``: the request for the customer's own contact, with the button."""
        if not private_chat:
            return Reply.say(customer_texts.shown(texts, customer_texts.LINK_PRIVATE_ONLY))
        return link_request(customer_texts.LINK_ASK, texts)

    async def link(
        self,
        conversation_key: str,
        job: JobContext,
        contact: SharedContact,
        *,
        texts: Texts | None = None,
    ) -> JobOutcome:
        """Link the chat to the shop's customer of ``contact``, if it is the sender's own.

        Raises :class:`~bot.chat_errors.ChatServiceError` when the session
        cannot be saved (nothing is linked then).
        """
        if not contact.private_chat:
            return Reply.say(customer_texts.shown(texts, customer_texts.LINK_PRIVATE_ONLY))
        # The button again where the customer may try again (a contact shared without
        # /link had none); removed where sharing the number again changes nothing.
        if not contact.own:
            return self._reply(
                job, "not_own_contact", customer_texts.LINK_NOT_OWN, "contact", texts
            )
        try:
            account = await self.directory.find_by_phone(contact.phone)
        except CustomerDirectoryError:
            return self._reply(
                job, "unavailable", customer_texts.LINK_UNAVAILABLE, "contact", texts
            )
        if account is None:
            return self._reply(job, "not_found", customer_texts.LINK_NOT_FOUND, "remove", texts)
        entry = Reply.of(
            SendText(text=customer_texts.shown(texts, customer_texts.LINK_DONE), keyboard="remove"),
            audit=(self._entry(job, "linked").to_fields(),),
        )
        customer_id = account.customer_id
        now = self.clock()
        done: JobDone = await self.chat.commit_without_turn(
            conversation_key,
            job,
            lambda session: session.with_shop_customer(customer_id, now),
            entry,
        )
        return done

    def _reply(
        self,
        job: JobContext,
        event: LinkEvent,
        text: str,
        keyboard: ReplyKeyboardKind,
        texts: Texts | None,
    ) -> Reply:
        """Nothing linked: ``text`` with the button (or its removal), and the audit entry."""
        return Reply.of(
            SendText(
                text=customer_texts.shown(texts, text),
                keyboard=keyboard,
                language=texts.language if texts is not None else None,
            ),
            audit=(self._entry(job, event).to_fields(),),
        )

    def _entry(self, job: JobContext, event: LinkEvent) -> LinkAuditEntry:
        return LinkAuditEntry(
            chat_id=str(job.job.chat_id),
            turn_id=job.job.turn_id,
            event=event,
            tool=self.directory.tool_name,
        )
