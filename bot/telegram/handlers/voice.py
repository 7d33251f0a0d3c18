"""A voice message (``voice``, ``audio``, ``video_note``): transcribed, then a turn like a text.

The transcript is the customer's message for the turn, marked in the history as
recognised speech (``SPEECH_MARK``). A message too long, too large, unreadable,
a transcription that failed, or a transcript over ``MESSAGE_MAX_CHARS``: a short
kind request to write instead, and no turn at all (nothing in the history,
nothing half-done).
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
from bot.telegram.handlers.chat import TYPING_DELAY_SECONDS, Turns, run_turn
from bot.telegram.typing_indicator import TypingIndicator
from bot.telegram.voice import VoiceRefusal

_REFUSALS = {
    VoiceRefusal.OFFLINE: customer_texts.VOICE_OFFLINE,
    VoiceRefusal.TOO_LONG: customer_texts.VOICE_TOO_LONG,
    VoiceRefusal.TOO_LARGE: customer_texts.VOICE_TOO_LARGE,
    VoiceRefusal.UNREADABLE: customer_texts.VOICE_NOT_HEARD,
    VoiceRefusal.TRANSCRIPTION_FAILED: customer_texts.VOICE_NOT_HEARD,
    VoiceRefusal.TRANSCRIPT_TOO_LONG: customer_texts.VOICE_TRANSCRIPT_TOO_LONG,
}


class HasRecording(Filter):
    """A voice message, an audio file or a video note."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` carries a recording."""
        return (
            message.voice is not None or message.audio is not None or message.video_note is not None
        )


async def voice_message(
    message: Message,
    bot: Bot,
    job: JobContext,
    turns: Turns,
    *,
    language: str | None = None,
    texts: Texts | None = None,
) -> JobOutcome:
    """Transcribe, then answer as a text; or ask kindly to write instead."""
    handoff = turns.handoff
    async with TypingIndicator(bot, message.chat.id, delay=TYPING_DELAY_SECONDS):
        heard = await turns.media.voice.hear_for_turn(bot, message)
    if isinstance(heard, VoiceRefusal):
        text = customer_texts.shown(texts, _REFUSALS[heard])
        if handoff is not None and handoff.service.state(job) == "waiting":
            # Staff following a waiting chat hear the voice message themselves.
            copy = StaffAction(kind="copy_to_topic", message_id=message.message_id)
            return Reply.of(SendText(text=text) if text else None, relay(copy))
        return Reply.say(text)
    return await run_turn(
        message,
        bot,
        job,
        turns,
        text=heard.text,
        turn_input=heard.turn_input,
        language=language,
        texts=texts,
    )


def build_router() -> Router:
    """A fresh router with the voice handler; include it before the catch-all."""
    router = Router(name=__name__)
    router.message.register(voice_message, HasRecording())
    return router
