"""Staff replies relayed by two real webhook processes keep the order staff wrote them in.

A staff topic message is queued in its *customer's* chat queue at intake,
whichever process Telegram posts it to; the chat's single worker then copies
them to the customer one after the other.
"""

import aiohttp
import pytest

from bot import customer_texts
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import Cluster, echo, post_update, wait_until

pytestmark = pytest.mark.timeout(120)

STAFF = -1001234567890
CUSTOMER = 6001
REPLIES = 20


async def test_two_processes_relay_staff_messages_to_the_customer_in_order(
    cluster: Cluster, telegram: FakeTelegramServer, model: ScriptedOpenAIServer
) -> None:
    model.responder = echo
    telegram.make_forum(STAFF)
    hooks = [
        await cluster.start("webhook", f"hook-{n}", STAFF_CHAT_ID=str(STAFF)) for n in range(2)
    ]
    async with aiohttp.ClientSession() as http:
        operator = telegram.message_update(CUSTOMER, "/operator")
        assert await post_update(http, hooks[0], operator) == 200
        await wait_until(lambda: bool(telegram.topics(STAFF)), 30, "a topic", cluster.logs)
        thread = next(iter(telegram.topics(STAFF)))
        await wait_until(
            lambda: bool(telegram.topic_texts(STAFF, thread)), 30, "the header", cluster.logs
        )
        [waiting] = telegram.sent_texts(CUSTOMER)
        assert waiting.startswith(customer_texts.OPERATOR_WAITING)

        written = []
        for n in range(REPLIES):
            update = telegram.topic_message_update(STAFF, thread, f"ответ сотрудника {n}")
            written.append(update["message"]["message_id"])
            # Back to back, alternating processes: accepted, not yet relayed.
            assert await post_update(http, hooks[n % 2], update) == 200

        await wait_until(
            lambda: len(telegram.copies(CUSTOMER)) >= REPLIES, 60, "every relay", cluster.logs
        )
    relayed = [copy["message_id"] for copy in telegram.copies(CUSTOMER)]
    assert relayed == written
    assert all(copy["from_chat_id"] == STAFF for copy in telegram.copies(CUSTOMER))
