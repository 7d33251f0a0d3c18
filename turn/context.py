"""Who a turn is for."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnContext:
    """Identity of one turn, built by the front end (Telegram, console), never by the model.

    ``conversation_key`` names the stored session; ``chat_id`` and ``user_id`` are
    what tools that need to know *who* asks (order ownership) read, never their
    model-written arguments; ``turn_id`` is the incident code.
    """

    conversation_key: str
    chat_id: int | str
    user_id: int | None
    turn_id: str
    # The shop's own customer id, once the customer linked their account (a shared contact).
    shop_customer_id: str | None = None
    # Telegram's file ids of the photos the customer sent in this conversation, oldest
    # first (never the images): a return may carry them as evidence of damage.
    photos: tuple[str, ...] = ()
    # The conversation's language (a LANGUAGES code) decided for this message; ``None``:
    # the front end does not decide one (the default language's prompt).
    language: str | None = None
