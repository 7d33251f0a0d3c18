"""Voice messages end to end: the fake Bot API serves the file, the scripted server transcribes.

The real aiogram Bot downloads the file (``getFile``, then the file URL) from the
fake Bot API; the real ``AsyncOpenAI`` client sends it, multipart, to the scripted
server's ``/v1/audio/transcriptions``; the transcript becomes the turn's message,
answered by the scripted chat completion. Sessions, queue and audit live in the
suite's redis-server.
"""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.engine.chat_service import SPEECH_MARK
from bot.queue.staff_actions import TRANSCRIPT_LABEL
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import (
    ScriptedOpenAIServer,
    error,
    text_answer,
    transcript,
    user_texts,
)
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, echo_responder
from bot.testing.settings import make_settings, stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.telegram.test_handoff import Desk

PREFIX = "voice"
CHAT = 705
AUDIO = b"OggS\x00fake-opus-payload" * 50


def voice(file_id: str = "voice-1", duration: int = 4, **extra: Any) -> dict[str, Any]:
    """A ``voice`` message body."""
    return {
        "voice": {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "duration": duration,
            "mime_type": "audio/ogg",
            **extra,
        }
    }


class VoiceStack(TelegramStack):
    """The Telegram side against the three test servers."""

    def metric(self, name: str, **labels: str) -> float:
        value = self.app.metrics.registry.get_sample_value(f"support_{name}", labels)
        return value or 0.0

    async def turn_entries(self) -> list[dict[str, str]]:
        """The turn entries of the audit once everything queued in the chat was handled."""
        await self.settle(CHAT)
        entries = await stream_entries(self.app.redis, f"{PREFIX}:audit")
        return [entry for entry in entries if entry.get("type") == "turn"]


async def _stack(
    telegram: FakeTelegramServer, bot: Bot, settings: Any
) -> AsyncIterator[VoiceStack]:
    async with open_application(settings) as app:
        stack = VoiceStack(app, bot, telegram=telegram)
        async with stack.running():
            yield stack


@pytest.fixture
async def stack(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> AsyncIterator[VoiceStack]:
    settings = stack_settings(
        telegram, openai_server, redis_server.url, prefix=PREFIX, VOICE_MAX_SECONDS=60
    )
    async for built in _stack(telegram, bot, settings):
        yield built


async def test_a_voice_message_is_transcribed_and_answered_as_the_customers_words(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("voice-1", AUDIO)
    openai_server.script_transcriptions(transcript("Где мой заказ 8041?"))
    openai_server.script(text_answer("Заказ 8041 уже в пути."))

    await stack.feed(telegram.message_update(CHAT, extra=voice(duration=4)))

    assert await telegram.wait_for_texts(CHAT, 1) == ["Заказ 8041 уже в пути."]
    (request,) = openai_server.transcriptions
    # The bytes the Bot API served, named as Telegram's voice format, with the hint.
    assert (request.audio, request.filename) == (AUDIO, "voice.ogg")
    assert (request.model, request.language) == ("gpt-4o-mini-transcribe", "ru")
    # The model read the transcript, marked as recognised speech.
    (chat_request,) = openai_server.requests
    assert user_texts(chat_request.body)[-1] == f"{SPEECH_MARK}Где мой заказ 8041?"
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.messages[0].content == f"{SPEECH_MARK}Где мой заказ 8041?"
    # The audit names the kind, the length and the transcription's time; never the words.
    (turn,) = await stack.turn_entries()
    assert (turn["outcome"], turn["input_kind"], turn["voice_seconds"]) == (
        "answered",
        "voice",
        "4",
    )
    assert float(turn["transcription_ms"]) >= 0
    assert not any("8041" in value for value in turn.values())
    assert stack.metric("transcriptions_total") == 1
    assert stack.metric("transcribed_audio_seconds_total") == 4
    assert stack.metric("transcription_duration_seconds_count") == 1


async def test_a_typed_turn_is_audited_as_text(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.script(text_answer("Здравствуйте!"))
    await stack.feed(telegram.message_update(CHAT, "Привет"))
    await telegram.wait_for_texts(CHAT, 1)
    (turn,) = await stack.turn_entries()
    assert turn["input_kind"] == "text"
    assert "voice_seconds" not in turn
    assert "transcription_ms" not in turn


async def test_a_voice_over_the_limit_is_refused_kindly_without_a_download(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("long", AUDIO)
    await stack.feed(telegram.message_update(CHAT, extra=voice("long", duration=61)))

    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_TOO_LONG]
    assert telegram.calls_of("getFile") == []
    assert telegram.downloads == []
    assert openai_server.transcriptions == []
    assert openai_server.requests == []
    assert await stack.turn_entries() == []
    assert stack.metric("media_refusals_total", kind="voice", reason="too_long") == 1


async def test_a_file_over_the_bot_apis_download_limit_is_refused_before_the_download(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    # Telegram's message does not say the size; getFile does (over 20 MB).
    telegram.add_file("huge", AUDIO, reported_size=21 * 1024 * 1024)
    await stack.feed(telegram.message_update(CHAT, extra=voice("huge", duration=30)))

    # Too large is what it is: not "too long" (issue 46).
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_TOO_LARGE]
    assert telegram.downloads == []
    assert openai_server.transcriptions == []
    assert stack.metric("media_refusals_total", kind="voice", reason="too_large") == 1


async def test_an_audio_file_larger_than_its_claimed_length_is_refused_before_any_download(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """The duration is the client's claim: 19 MB "of one second" is not downloaded (issue 46)."""
    telegram.add_file("claim", AUDIO)
    audio = {
        "file_id": "claim",
        "file_unique_id": "uc",
        "duration": 1,
        "file_name": "talk.mp3",
        "file_size": 19 * 1024 * 1024,
    }
    await stack.feed(telegram.message_update(CHAT, extra={"audio": audio}))

    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_TOO_LARGE]
    assert telegram.calls_of("getFile") == []
    assert telegram.downloads == []
    assert openai_server.transcriptions == []
    assert stack.metric("media_refusals_total", kind="voice", reason="too_large") == 1


async def test_a_size_only_getfile_reports_is_checked_against_the_claimed_length_too(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """Without a size in the message, getFile's size decides before the download."""
    telegram.add_file("quiet", AUDIO, reported_size=6 * 1024 * 1024)
    await stack.feed(telegram.message_update(CHAT, extra=voice("quiet", duration=2)))

    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_TOO_LARGE]
    assert telegram.downloads == []
    assert openai_server.transcriptions == []


async def test_a_long_voice_message_of_a_plausible_size_is_still_transcribed(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """The cap follows the claimed length: a minute of voice at a high bitrate passes."""
    telegram.add_file("minute", AUDIO)
    openai_server.script_transcriptions(transcript("длинный вопрос"))
    openai_server.script(text_answer("Понял."))
    # 60 s at 256 kbit/s, as Telegram reports it.
    await stack.feed(
        telegram.message_update(CHAT, extra=voice("minute", duration=60, file_size=1_920_000))
    )
    assert await telegram.wait_for_texts(CHAT, 1) == ["Понял."]
    assert len(openai_server.transcriptions) == 1


async def test_transcription_down_asks_to_write_and_leaves_no_turn(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("voice-1", AUDIO)
    openai_server.script_transcriptions(error(503, headers={"x-should-retry": "false"}))

    await stack.feed(telegram.message_update(CHAT, extra=voice()))

    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_NOT_HEARD]
    assert len(openai_server.transcriptions) == 1
    assert openai_server.requests == []
    assert await stack.app.sessions.load(f"tg:{CHAT}") is None
    assert await stack.turn_entries() == []
    assert stack.metric("media_refusals_total", kind="voice", reason="transcription_failed") == 1
    assert stack.metric("transcriptions_total") == 0

    # The chat goes on: the next message is a turn as usual.
    openai_server.script(text_answer("Слушаю вас."))
    await stack.feed(telegram.message_update(CHAT, "Алло"))
    assert (await telegram.wait_for_texts(CHAT, 3))[-1] == "Слушаю вас."


async def test_an_unknown_file_is_unreadable_and_asks_to_write(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    await stack.feed(telegram.message_update(CHAT, extra=voice("gone")))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_NOT_HEARD]
    assert openai_server.transcriptions == []
    assert stack.metric("media_refusals_total", kind="voice", reason="unreadable") == 1


async def test_a_video_note_and_an_audio_file_are_transcribed_too(
    stack: VoiceStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("note", AUDIO)
    telegram.add_file("song", AUDIO)
    openai_server.script_transcriptions(transcript("первое"), transcript("второе"))
    openai_server.script(text_answer("Ответ 1"), text_answer("Ответ 2"))
    note = {"file_id": "note", "file_unique_id": "un", "length": 240, "duration": 5}
    audio = {"file_id": "song", "file_unique_id": "us", "duration": 7, "file_name": "q.m4a"}

    await stack.feed(telegram.message_update(CHAT, extra={"video_note": note}))
    await stack.feed(telegram.message_update(CHAT, extra={"audio": audio}))

    assert await telegram.wait_for_texts(CHAT, 2) == ["Ответ 1", "Ответ 2"]
    names = [request.filename for request in openai_server.transcriptions]
    assert names == ["video_note.mp4", "q.m4a"]


async def test_with_the_offline_demo_model_voice_is_not_recognised(
    telegram: FakeTelegramServer, redis_server: RedisServer, bot: Bot
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=f"{PREFIX}:audit",
    )
    telegram.add_file("voice-1", AUDIO)
    async for stack in _stack(telegram, bot, settings):
        await stack.feed(telegram.message_update(CHAT, extra=voice()))
        assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_OFFLINE]
        assert telegram.downloads == []
        assert stack.metric("media_refusals_total", kind="voice", reason="offline") == 1


async def test_in_a_handoff_staff_get_the_voice_message_with_its_transcript(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> None:
    staff = -1009876543210
    telegram.make_forum(staff)
    telegram.add_file("waiting", AUDIO)
    telegram.add_file("human", AUDIO)
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix=PREFIX,
        STAFF_CHAT_ID=staff,
        ANALYSIS="off",
        CSAT="off",
    )
    async with open_application(settings) as app:
        desk = Desk(app, bot, telegram, ScriptedClient(echo_responder), staff)
        async with desk.running():
            thread = await desk.hand_off(CHAT)
            # Waiting for a person: the bot answers, staff follow with the transcript.
            openai_server.script_transcriptions(transcript("коробка пришла мятая"))
            openai_server.script(text_answer("Сотрудник скоро подключится."))
            waiting_id = await desk.customer(None, CHAT, extra=voice("waiting"))
            await telegram.wait_for(
                lambda: "Сотрудник скоро подключится." in telegram.sent_texts(CHAT)
            )
            label = f"{TRANSCRIPT_LABEL}\nкоробка пришла мятая"
            await telegram.wait_for(lambda: label in telegram.topic_texts(staff, thread))
            assert waiting_id in [c["message_id"] for c in telegram.copies(staff, thread)]

            # A person answers: the voice goes to the topic with its transcript, no turn.
            await desk.staff(thread, "Здравствуйте, я Анна.")
            await telegram.wait_for(lambda: len(telegram.copies(CHAT)) == 1)
            openai_server.script_transcriptions(transcript("спасибо, жду"))
            model_requests = len(openai_server.requests)
            human_id = await desk.customer(None, CHAT, extra=voice("human"))
            said = f"{TRANSCRIPT_LABEL}\nспасибо, жду"
            await telegram.wait_for(lambda: said in telegram.topic_texts(staff, thread))
            assert human_id in [c["message_id"] for c in telegram.copies(staff, thread)]
            assert len(openai_server.requests) == model_requests
            session = await app.sessions.load(f"tg:{CHAT}")
            assert session is not None
            assert session.messages[-1].content == f"{SPEECH_MARK}спасибо, жду"


async def test_a_transcript_over_the_message_limit_asks_for_a_shorter_voice_and_leaves_no_turn(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> None:
    settings = stack_settings(
        telegram, openai_server, redis_server.url, prefix=PREFIX, MESSAGE_MAX_CHARS=20
    )
    telegram.add_file("voice-1", AUDIO)
    openai_server.script_transcriptions(transcript("Где мой заказ 8041? " * 3))
    async for stack in _stack(telegram, bot, settings):
        await stack.feed(telegram.message_update(CHAT, extra=voice()))
        assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.VOICE_TRANSCRIPT_TOO_LONG]
        assert len(openai_server.transcriptions) == 1
        assert openai_server.requests == []
        assert await stack.app.sessions.load(f"tg:{CHAT}") is None
        assert await stack.turn_entries() == []
        assert stack.metric("media_refusals_total", kind="voice", reason="transcript_too_long") == 1
