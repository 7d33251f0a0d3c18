"""What the bot stores in Redis reads back when another version added a field (rolling deploys)."""

import json
from datetime import UTC, datetime

from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import SendText, StaffRelay
from bot.queue.jobs import QueuedJob
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession, StoredMessage

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _with_extra(fields: dict[str, object]) -> str:
    return json.dumps({**fields, "added_by_a_newer_version": 1})


def test_a_queued_job_with_an_unknown_field_is_read() -> None:
    job = QueuedJob(job_id="1", update_id=1, turn_id="T1", enqueued_ms=5, chat_id=9)

    assert QueuedJob.model_validate_json(_with_extra(job.model_dump(mode="json"))) == job


def test_an_outbox_entry_and_its_staff_steps_with_unknown_fields_are_read() -> None:
    entry = Delivery(
        job_id="1",
        turn_id="T1",
        chat_id=9,
        steps=(SendText(text="ответ"), StaffRelay(actions=(StaffAction(kind="post", text="x"),))),
    )
    fields = entry.model_dump(mode="json")
    relay = fields["steps"][1]
    fields["steps"][1] = {**relay, "actions": [{**relay["actions"][0], "thread": 7}]}

    assert Delivery.model_validate_json(_with_extra(fields)) == entry


def test_a_session_and_its_messages_with_unknown_fields_are_read() -> None:
    session = ConversationSession.start("tg:9", NOW, "support_chat", "1").with_turn(
        "вопрос", "ответ", NOW, "1", turn_id="T1"
    )
    fields = session.model_dump(mode="json")
    fields["messages"] = [{**message, "reactions": []} for message in fields["messages"]]

    read = ConversationSession.model_validate_json(_with_extra(fields))

    assert read == session
    assert all(isinstance(message, StoredMessage) for message in read.messages)
