"""A voice message to words: its file from the Bot API, then the transcription endpoint.

Only the update (with the file's ``file_id``) is durable: the worker holding the
chat downloads the file and transcribes it each time it runs the job, so a crash
mid-transcription re-runs both and the customer is answered once. Limits are
checked before anything is downloaded: the message's ``duration`` against
``VOICE_MAX_SECONDS``, and its size (as Telegram reports it, in the message or
from ``getFile``) against what that duration can take at a generous bitrate
(:func:`size_cap`), never over the Bot API's 20 MB download limit. The duration
is the sender's claim: a file far larger than its claimed length could be
(19 MB "of one second") is refused as too large, not downloaded and transcribed.
"""

import logging
from dataclasses import dataclass
from enum import StrEnum
from time import perf_counter
from typing import Final

from aiogram import Bot
from aiogram.types import Message

from bot.llm.errors import LLMClientError
from bot.llm.transcription import Transcriber
from bot.metrics import BotMetrics
from bot.telegram.files import (
    BOT_API_DOWNLOAD_LIMIT_BYTES,
    DOWNLOAD_TIMEOUT_SECONDS,
    DownloadFailure,
    download,
)
from turn import TurnInput

logger = logging.getLogger(__name__)

AUDIO_BYTES_PER_SECOND: Final = 40_000
"""320 kbit/s, the top of the lossy audio formats (MP3, AAC, Opus): voice messages and audio."""
VIDEO_NOTE_BYTES_PER_SECOND: Final = 250_000
"""2 Mbit/s: a video note carries its (small, round) video besides the sound."""
SIZE_SLACK_BYTES: Final = 256 * 1024
"""Headers, tags and a cover picture a short file may carry besides its sound."""


class VoiceRefusal(StrEnum):
    """Why a voice message was not turned into words (the metrics' ``reason``)."""

    TOO_LONG = "too_long"
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"
    TRANSCRIPTION_FAILED = "transcription_failed"
    # Heard, but more words than one customer message may hold (``MESSAGE_MAX_CHARS``).
    TRANSCRIPT_TOO_LONG = "transcript_too_long"
    # The offline demo model: nothing to transcribe with.
    OFFLINE = "offline"


@dataclass(frozen=True, slots=True, kw_only=True)
class Heard:
    """A voice message's words and what it took (the turn's input, for the audit)."""

    text: str
    turn_input: TurnInput


@dataclass(frozen=True, slots=True, kw_only=True)
class _Recording:
    file_id: str
    duration: int
    file_size: int | None
    filename: str
    bytes_per_second: int = AUDIO_BYTES_PER_SECOND


@dataclass(frozen=True, kw_only=True)
class VoiceMessages:
    """Downloads and transcribes ``voice``, ``audio`` and ``video_note`` messages.

    ``transcriber`` is ``None`` with the offline demo model: every voice message
    is then refused with :attr:`VoiceRefusal.OFFLINE`.
    """

    transcriber: Transcriber | None
    metrics: BotMetrics
    max_seconds: int
    max_chars: int
    """A turn's transcript at most (``MESSAGE_MAX_CHARS``, as a typed message)."""
    download_timeout_seconds: float = DOWNLOAD_TIMEOUT_SECONDS

    async def hear(self, bot: Bot, message: Message) -> Heard | VoiceRefusal:
        """The words of ``message``, or why there are none (counted in the metrics)."""
        result = await self._hear(bot, message)
        if isinstance(result, VoiceRefusal):
            self.metrics.record_media_refusal("voice", result.value)
        return result

    async def hear_for_turn(self, bot: Bot, message: Message) -> Heard | VoiceRefusal:
        """As :meth:`hear`, for a turn: a transcript over ``max_chars`` is refused too.

        Checked here, not by the turn, so the customer is asked for a shorter voice
        message (not told their message was too long) and nothing is half-done.
        Staff following a handoff read any transcript (:meth:`hear`).
        """
        heard = await self.hear(bot, message)
        if isinstance(heard, Heard) and len(heard.text) > self.max_chars:
            self.metrics.record_media_refusal("voice", VoiceRefusal.TRANSCRIPT_TOO_LONG.value)
            return VoiceRefusal.TRANSCRIPT_TOO_LONG
        return heard

    async def _hear(self, bot: Bot, message: Message) -> Heard | VoiceRefusal:
        recording = recording_of(message)
        refusal = self._refused_before_download(recording)
        if refusal is not None or recording is None or self.transcriber is None:
            return refusal or VoiceRefusal.UNREADABLE
        audio = await self._download(bot, recording)
        if isinstance(audio, VoiceRefusal):
            return audio
        started = perf_counter()
        try:
            text = await self.transcriber.transcribe(audio, filename=recording.filename)
        except LLMClientError as error:
            self.metrics.record_transcription(
                seconds=perf_counter() - started, audio_seconds=recording.duration, ok=False
            )
            logger.warning("Voice message not transcribed: %s", error)
            return VoiceRefusal.TRANSCRIPTION_FAILED
        took = perf_counter() - started
        words = text.strip()
        self.metrics.record_transcription(
            seconds=took, audio_seconds=recording.duration, ok=bool(words)
        )
        if not words:
            # Silence, noise: nothing the model could answer.
            return VoiceRefusal.UNREADABLE
        return Heard(
            text=words,
            turn_input=TurnInput(
                kind="voice",
                voice_seconds=recording.duration,
                transcription_ms=float(round(took * 1000)),
            ),
        )

    def _refused_before_download(self, recording: _Recording | None) -> VoiceRefusal | None:
        """What is refused from the message alone: no file is downloaded for it."""
        if recording is None:
            return VoiceRefusal.UNREADABLE
        if self.transcriber is None:
            return VoiceRefusal.OFFLINE
        if recording.duration > self.max_seconds:
            return VoiceRefusal.TOO_LONG
        if recording.file_size is not None and recording.file_size > size_cap(recording):
            return VoiceRefusal.TOO_LARGE
        return None

    async def _download(self, bot: Bot, recording: _Recording) -> bytes | VoiceRefusal:
        # The cap again: the message may not say the size, getFile does (checked before
        # the bytes are fetched) and the bytes themselves do.
        got = await download(
            bot,
            recording.file_id,
            max_bytes=size_cap(recording),
            timeout_seconds=self.download_timeout_seconds,
            what="Voice file",
        )
        return VoiceRefusal(got.value) if isinstance(got, DownloadFailure) else got


def recording_of(message: Message) -> _Recording | None:
    """The recording a ``voice``, ``audio`` or ``video_note`` message carries (else ``None``).

    The file name tells the transcription endpoint the format: Telegram's voice
    messages are OGG/Opus, video notes MP4; an audio file keeps its own name.
    """
    if message.voice is not None:
        voice = message.voice
        return _Recording(
            file_id=voice.file_id,
            duration=voice.duration,
            file_size=voice.file_size,
            filename="voice.ogg",
        )
    if message.video_note is not None:
        note = message.video_note
        return _Recording(
            file_id=note.file_id,
            duration=note.duration,
            file_size=note.file_size,
            filename="video_note.mp4",
            bytes_per_second=VIDEO_NOTE_BYTES_PER_SECOND,
        )
    if message.audio is not None:
        audio = message.audio
        return _Recording(
            file_id=audio.file_id,
            duration=audio.duration,
            file_size=audio.file_size,
            filename=audio.file_name or _audio_name(audio.mime_type),
        )
    return None


def size_cap(recording: _Recording) -> int:
    """The most bytes ``recording`` may be: its claimed length at a generous bitrate.

    Never more than the Bot API lets a bot download. A file over it is larger than
    the length it claims could make it, so the claim is not believed.
    """
    claimed = max(recording.duration, 1) * recording.bytes_per_second + SIZE_SLACK_BYTES
    return min(claimed, BOT_API_DOWNLOAD_LIMIT_BYTES)


def _audio_name(mime_type: str | None) -> str:
    suffix = {
        "audio/ogg": "ogg",
        "audio/mp4": "m4a",
        "audio/x-m4a": "m4a",
        "audio/wav": "wav",
        "audio/x-wav": "wav",
        "audio/webm": "webm",
        "audio/flac": "flac",
    }.get(mime_type or "", "mp3")
    return f"audio.{suffix}"
