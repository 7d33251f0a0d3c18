"""SIGKILL of a real bot process mid-transcription: the voice message is answered once.

Only the update (with the voice file's ``file_id``) was kept at intake; the
worker that takes the chat over downloads and transcribes it again and answers
it, once. Nothing of the killed turn reached the history.
"""

import time

import pytest
import redis.asyncio as aioredis

from bot.engine.chat_service import SPEECH_MARK
from bot.testing.openai_server import ScriptedOpenAIServer, delay, transcript
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    CLAIM_INTERVAL_SECONDS,
    LEASE_SECONDS,
    Cluster,
    answer_for,
    audit_turns,
    echo,
    stored_session,
    wait_until,
)

pytestmark = pytest.mark.timeout(180)

CHAT = 4545
WORDS = "где мой заказ 8041?"
HEARD = f"{SPEECH_MARK}{WORDS}"
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 15


async def test_sigkill_mid_transcription_answers_the_voice_once_after_recovery(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
) -> None:
    telegram.add_file("voice-1", b"OggS-voice")
    # The first transcription never comes back in time; the second is prompt.
    model.script_transcriptions(delay(60, transcript(WORDS)), transcript(WORDS))
    model.responder = echo
    first = await cluster.start("polling", "first")
    await telegram.push_message(
        CHAT,
        extra={"voice": {"file_id": "voice-1", "file_unique_id": "u1", "duration": 3}},
    )
    await wait_until(lambda: bool(model.transcriptions), 30, "a transcription", cluster.logs)
    await first.sigkill()
    assert telegram.sent_texts(CHAT) == []

    await cluster.start("polling", "restarted")
    started = time.monotonic()
    await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
    print(f"answered {time.monotonic() - started:.1f} s after the restart was ready")
    await cluster.finish(store, [CHAT], turns=1)

    assert telegram.sent_texts(CHAT) == [answer_for(HEARD)], cluster.logs()
    # Downloaded and transcribed again by the process that took the chat over.
    assert len(model.transcriptions) == 2
    assert len(telegram.downloads) == 2
    session = await stored_session(store, CHAT)
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", HEARD),
        ("assistant", answer_for(HEARD)),
    ]
    turns = [t for t in await audit_turns(store) if t["chat_id"] == str(CHAT)]
    assert [(t["outcome"], t["input_kind"]) for t in turns] == [("answered", "voice")]
    assert "Traceback" not in cluster.logs()
