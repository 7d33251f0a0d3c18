"""What the bot stores in Redis reads back when another version added a field (rolling deploys)."""

import json
from datetime import UTC, datetime

from bot.queue.jobs import OutboxEntry, QueuedJob
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession, StoredMessage

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _with_extra(fields: dict[str, object]) -> str:
    return json.dumps({**fields, "added_by_a_newer_version": 1})


def test_a_queued_job_with_an_unknown_field_is_read() -> None:
    job = QueuedJob(job_id="1", update_id=1, turn_id="T1", enqueued_ms=5, chat_id=9)

    assert QueuedJob.model_validate_json(_with_extra(job.model_dump(mode="json"))) == job


def test_an_outbox_entry_and_its_staff_steps_with_unknown_fields_are_read() -> None:
    entry = OutboxEntry(
        job_id="1",
        turn_id="T1",
        chat_id=9,
        format="plain",
        text="ответ",
        staff=(StaffAction(kind="post", text="x"),),
    )
    fields = entry.model_dump(mode="json")
    fields["staff"] = [{**fields["staff"][0], "thread": 7}]

    assert OutboxEntry.model_validate_json(_with_extra(fields)) == entry


def test_a_session_and_its_messages_with_unknown_fields_are_read() -> None:
    session = ConversationSession.start("tg:9", NOW, "support_chat", "1").with_turn(
        "вопрос", "ответ", NOW, "1", turn_id="T1"
    )
    fields = session.model_dump(mode="json")
    fields["messages"] = [{**message, "reactions": []} for message in fields["messages"]]

    read = ConversationSession.model_validate_json(_with_extra(fields))

    assert read == session
    assert all(isinstance(message, StoredMessage) for message in read.messages)
