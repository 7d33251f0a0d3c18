"""The features' notices and hooks reach the job runner from their Telegram twins.

The runner names no feature: each twin registers its notices, its schedules
after an answer and after a closed handoff, and what settles its given-up jobs;
the assembly gathers them in the order of the twins. A notice of a feature that
is off has no handler and is dropped as nothing due, as before features
registered themselves; the plain limit notices stay the runner's own.
"""

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.analysis.feature import AnalysisFeature
from bot.csat.feature import CsatFeature
from bot.queue.chat_queue import ChatState
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import SendText
from bot.queue.job_results import DropReason, JobDropped, JobOutcome
from bot.queue.jobs import Notice, QueuedJob, turn_id_for
from bot.queue.worker import HeldLease
from bot.storage.keys import telegram_conversation
from bot.telegram.feature_jobs import FeatureJobs, JobHooks, JobRun
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

CHAT = 9300
STAFF = -1009300000001

FEATURE_NOTICES = {
    Notice.CSAT,
    Notice.ESCALATION,
    Notice.HANDOFF_IDLE,
    Notice.SUGGESTION,
    Notice.QUALITY_REVIEW,
}


@asynccontextmanager
async def _stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, **env: Any
) -> AsyncIterator[TelegramStack]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="notices",
        AUDIT_STREAM="notices:audit",
        **env,
    )
    async with open_application(settings) as app:
        yield TelegramStack(app, bot, telegram=telegram)


@pytest.fixture
async def all_on(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    telegram.make_forum(STAFF)
    async with _stack(
        redis_server, telegram, bot, STAFF_CHAT_ID=STAFF, CSAT="on", ANALYSIS="on"
    ) as stack:
        yield stack


@pytest.fixture
async def all_off(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    async with _stack(redis_server, telegram, bot, CSAT="off", ANALYSIS="off") as stack:
        yield stack


async def _run_notice(stack: TelegramStack, notice: Notice) -> JobOutcome:
    """Run one notice job of ``CHAT`` through the workers' runner, as a worker would."""
    key = telegram_conversation(CHAT)
    job = QueuedJob(
        job_id=f"job-{notice.value}",
        update_id=-1,
        turn_id=turn_id_for(key, -1),
        enqueued_ms=int(time.time() * 1000),
        chat_id=CHAT,
        notice=notice,
    )
    state = ChatState(
        head=job,
        head_raw=job.model_dump_json(),
        outbox=(),
        session_version="",
        session_data="",
        attempts=1,
    )
    return await stack.side.runner.run(state, HeldLease(conversation_key=key, token="t"))


async def test_each_feature_on_registers_its_notices_and_schedules(all_on: TelegramStack) -> None:
    hooks = all_on.side.runner.hooks
    csat = all_on.app.features.get(CsatFeature)
    analysis = all_on.app.features.get(AnalysisFeature)
    assert csat is not None
    assert analysis is not None

    assert set(hooks.notices) == FEATURE_NOTICES
    # The question's schedule before the analysis's, both written in one pipeline.
    assert hooks.after_answer == (
        csat.schedule.due_after_answer,
        analysis.schedule.due_after_answer,
    )
    assert hooks.after_handoff_closed == (
        csat.schedule.handoff_closed,
        analysis.schedule.handoff_closed,
    )
    # A press on a card is settled; staff's press on a suggestion dropped.
    assert len(hooks.given_up) == 2


async def test_a_notice_of_a_feature_that_is_off_is_nothing_due(
    all_off: TelegramStack, telegram: FakeTelegramServer
) -> None:
    hooks = all_off.side.runner.hooks
    assert dict(hooks.notices) == {}
    assert hooks.after_answer == ()
    assert hooks.after_handoff_closed == ()

    for notice in sorted(FEATURE_NOTICES):
        assert await _run_notice(all_off, notice) == JobDropped(reason=DropReason.NOTHING_DUE)
    assert telegram.calls_of("sendMessage") == []


async def test_the_plain_limit_notices_are_the_runners_own(all_off: TelegramStack) -> None:
    outcome = await _run_notice(all_off, Notice.RATE_LIMITED)

    assert isinstance(outcome, Reply)
    assert [step.text for step in outcome.steps if isinstance(step, SendText)] == [
        customer_texts.RATE_LIMITED
    ]


async def _nothing(run: JobRun) -> JobOutcome:
    return JobDropped(reason=DropReason.NOTHING_DUE)


def test_a_notice_handled_by_two_features_is_a_wiring_mistake() -> None:
    one = FeatureJobs(notices={Notice.CSAT: _nothing})
    other = FeatureJobs(notices={Notice.CSAT: _nothing})

    with pytest.raises(ValueError, match="two handlers of the notice csat"):
        JobHooks.of([one, other])
