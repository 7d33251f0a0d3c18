"""The draft publisher on its own: a real aiogram Bot against the fake Bot API."""

import asyncio
import itertools

from aiogram import Bot
from prometheus_client import CollectorRegistry

from bot.telegram.draft_metrics import DraftMetrics
from bot.telegram.drafts import DRAFT_TEXT_LIMIT, DraftPolicy, Drafts, cut_utf16
from bot.testing.telegram_server import FakeTelegramServer, utf16_len
from tests.queue.echo_pool import wait_until

CHAT = 801


def drafts(policy: DraftPolicy, registry: CollectorRegistry | None = None) -> Drafts:
    return Drafts(policy, metrics=DraftMetrics(registry) if registry is not None else None)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_a_long_answer_is_cut_at_4096_utf16_units(
    bot: Bot, telegram: FakeTelegramServer
) -> None:
    text = "😀" + "я" * 5000  # an emoji counts twice in UTF-16
    publisher = drafts(DraftPolicy(enabled=True, interval_seconds=0.1)).publisher(bot, CHAT)

    async with publisher:
        publisher.on_text(text)
        await telegram.wait_for(lambda: bool(telegram.drafts(CHAT)))

    [draft] = telegram.drafts(CHAT)
    assert utf16_len(draft.params["text"]) == DRAFT_TEXT_LIMIT
    assert text.startswith(draft.params["text"])
    assert cut_utf16("😀😀", 3) == "😀"  # never half a character


async def test_what_is_shown_is_renewed_before_the_draft_expires(
    bot: Bot, telegram: FakeTelegramServer
) -> None:
    policy = DraftPolicy(enabled=True, interval_seconds=0.1, renew_seconds=0.3)
    publisher = drafts(policy).publisher(bot, CHAT)

    async with publisher:
        publisher.on_tools(("get_order_status",))
        await telegram.wait_for(lambda: len(telegram.drafts(CHAT)) >= 3, within=5)

    shown = telegram.drafts(CHAT)
    assert [call.params["text"] for call in shown[:3]] == ["Проверяю заказ…"] * 3
    assert all(b.at - a.at >= 0.25 for a, b in itertools.pairwise(shown[:3]))


async def test_sends_and_errors_are_counted_by_kind_and_the_first_text_is_timed(
    bot: Bot, telegram: FakeTelegramServer
) -> None:
    registry = CollectorRegistry()
    service = drafts(DraftPolicy(enabled=True, interval_seconds=0.1), registry)
    telegram.fail_next("sendMessageDraft", 429, "Too Many Requests: retry after 1", retry_after=1)

    first = service.publisher(bot, CHAT)
    async with first:
        first.on_text("Здравствуйте")
        await wait_until(
            lambda: sample(registry, "support_drafts_sent_total", kind="answer") == 1, 5, "sent"
        )
    telegram.fail_next("sendMessageDraft", 403, "Forbidden: bot was blocked by the user")
    second = service.publisher(bot, CHAT)
    async with second:
        second.on_text("Ещё раз")
        await wait_until(
            lambda: sample(registry, "support_draft_errors_total", kind="forbidden") == 1,
            5,
            "refused",
        )
        # Off for this reply: more text sends nothing.
        second.on_text(" и ещё")
        await asyncio.sleep(0)

    assert [call.status for call in telegram.calls_of("sendMessageDraft")] == [429, 200, 403]
    sent = "support_drafts_sent_total"
    errors = "support_draft_errors_total"
    assert sample(registry, sent, kind="answer") == 1
    assert sample(registry, errors, kind="retry_after") == 1
    assert sample(registry, errors, kind="forbidden") == 1
    # The 429 asked for 1 s: the first visible text came after it.
    assert sample(registry, "support_draft_first_text_seconds_sum", kind="answer") >= 1.0


def test_where_drafts_are_wanted() -> None:
    on = drafts(DraftPolicy(enabled=True, interval_seconds=0.5))
    off = drafts(DraftPolicy(enabled=False, interval_seconds=0.5))

    assert on.wanted(chat_type="private", thread_id=None, handoff_state="bot")
    assert on.wanted(chat_type="private", thread_id=None, handoff_state="waiting")
    assert not on.wanted(chat_type="private", thread_id=None, handoff_state="human")
    assert not on.wanted(chat_type="private", thread_id=7, handoff_state="bot")
    assert not on.wanted(chat_type="group", thread_id=None, handoff_state="bot")
    assert not on.wanted(chat_type="supergroup", thread_id=None, handoff_state="bot")
    assert not off.wanted(chat_type="private", thread_id=None, handoff_state="bot")
