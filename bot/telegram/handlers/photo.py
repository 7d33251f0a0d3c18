"""A photo, or an image file, with its caption: a turn whose message shows the image.

With ``VISION=on`` the image goes to the model as an image part of the
customer's message (this request only; the history keeps a marker and the
file id). Without vision the bot says it cannot look at photos, and offers a
person where a staff group is configured. An album is one message
(:mod:`bot.telegram.albums`).
"""

from aiogram import Bot, Router
from aiogram.filters import Filter
from aiogram.types import Message

from bot import customer_texts
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import SendText, relay
from bot.queue.job_results import JobContext, JobOutcome
from bot.queue.staff_actions import StaffAction
from bot.storage.keys import telegram_conversation
from bot.telegram.filters import question_text
from bot.telegram.handlers.chat import Turns, run_turn
from bot.telegram.photos import AlbumImages, PhotoRefusal, is_image
from turn import TurnInput


class HasImage(Filter):
    """A photo, or a document that is an image."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` carries an image."""
        return is_image(message)


async def photo_message(
    message: Message,
    bot: Bot,
    job: JobContext,
    turns: Turns,
    *,
    language: str | None = None,
    texts: Texts | None = None,
) -> JobOutcome:
    """Answer the photo (an album: all its photos at once) with the model's eyes, or say why not.

    An album's other photos, answered with its first, are popped without a word;
    one queued after its album's turn is kept in the history, without a word too.
    """
    media, handoff = turns.media, turns.handoff
    photos = media.photos
    album = await media.albums.gather(bot, message, job)
    waiting = handoff is not None and handoff.service.state(job) == "waiting"
    copy = StaffAction(kind="copy_to_topic", message_id=message.message_id)
    if album is None:
        # Answered with its album; staff following a waiting chat still see every photo.
        return Reply.of(relay(copy) if waiting else None)
    # Telegram puts an album's caption on one of its photos, or several on several:
    # every one is the customer's words, in the album's order.
    username = (await bot.me()).username
    captions = (
        question_text(item, username, caption=True)
        for item in sorted(album.messages, key=lambda item: item.message_id)
    )
    text = "\n".join(caption for caption in captions if caption)
    if photos.caption_refused(text):
        # Said before any download; the turn would refuse it as too long anyway.
        return Reply.of(
            SendText(text=customer_texts.shown(texts, customer_texts.PHOTO_CAPTION_TOO_LONG)),
            relay(copy) if waiting else None,
        )
    if album.late:
        # The album had its answer: a second one would answer one message twice.
        file_id = photos.file_id_for_history(message) if photos.vision else None
        if file_id is None:
            # Without vision (or too large) the album's one line said it already.
            return Reply.of(relay(copy) if waiting else None)
        return await turns.chat.keep_photo(
            telegram_conversation(message.chat.id),
            job,
            text,
            file_id,
            staff=(copy,) if waiting else (),
        )
    seen = await photos.look_all(bot, album.messages)
    if not seen.images:
        text = customer_texts.shown(texts, _refusal_text(seen.refusal, staff=handoff is not None))
        # Staff following a waiting chat see the photo themselves.
        return Reply.of(SendText(text=text) if text else None, relay(copy) if waiting else None)
    return await run_turn(
        message,
        bot,
        job,
        turns,
        text=text,
        turn_input=TurnInput(kind="photo", images=seen.images, images_note=_note(seen, texts)),
        language=language,
        texts=texts,
    )


def _note(seen: AlbumImages, texts: Texts | None) -> str:
    """What the model reads after the images when the turn's total left some out or smaller."""
    notes = []
    if seen.left_out:
        shown = len(seen.images)
        sent = shown + seen.left_out
        notes.append(
            customer_texts.shown(texts, customer_texts.IMAGES_LEFT_OUT).format(
                shown=shown, sent=sent
            )
        )
    if seen.reduced:
        notes.append(
            customer_texts.shown(texts, customer_texts.IMAGES_REDUCED).format(reduced=seen.reduced)
        )
    return " ".join(notes)


def _refusal_text(refusal: PhotoRefusal, *, staff: bool) -> str:
    if refusal is PhotoRefusal.TOO_LARGE:
        return customer_texts.PHOTO_TOO_LARGE
    if refusal is PhotoRefusal.UNREADABLE:
        return customer_texts.PHOTO_NOT_SEEN
    return customer_texts.PHOTO_OPERATOR if staff else customer_texts.PHOTO


def build_router() -> Router:
    """A fresh router with the photo handler; include it before the catch-all."""
    router = Router(name=__name__)
    router.message.register(photo_message, HasImage())
    return router
