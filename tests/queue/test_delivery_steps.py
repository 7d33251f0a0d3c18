"""A reply is an ordered tuple of typed steps; the previous version's flat entry reads as steps.

Pure values: what the outbox stores (pydantic, read back as written), what an
entry the previous version committed means in steps (its delivery order kept:
the question or the offer alone, else the card's edit, the text, the card, the
staff relays), and a step of a kind this version does not know (a newer one
wrote it) read as unknown instead of making the whole entry unreadable.
"""

import json

import pytest
from pydantic import ValidationError

from bot.queue.delivery import Delivery, Reply
from bot.queue.delivery_steps import (
    STEP_KINDS,
    AskQuestion,
    EditCard,
    KnownStep,
    OfferPerson,
    SendCard,
    SendText,
    StaffRelay,
    UnknownStep,
    relay,
)
from bot.queue.jobs import QueuedJob
from bot.queue.legacy_outbox import LegacyOutboxEntry
from bot.queue.staff_actions import StaffAction
from bot.sessions.pending import ActionCard

TURN_FIELDS = {
    "type": "turn",
    "chat_id": "8300",
    "turn_id": "K7M2P9QRS8",
    "outcome": "answered",
    "model": "m",
    "model_steps": "1",
    "tool_calls": "1",
    "tool_names": "cancel_order",
    "prompt_tokens": "",
    "completion_tokens": "",
    "total_tokens": "",
    "latency_ms": "12.000",
    "queue_ms": "3.000",
    "prompt_id": "support_chat",
    "prompt_version": "1",
    "input_kind": "text",
}

# As the previous version stored them (OutboxEntry.model_dump_json), field for field.
LEGACY_ANSWER_WITH_CARD = (
    '{"job_id":"8","turn_id":"K7M2P9QRS8","chat_id":8300,"format":"answer",'
    '"text":"Отменить заказ 42? Нажмите кнопку.","audit":[' + json.dumps(TURN_FIELDS) + "],"
    '"staff":[{"kind":"post_answer","message_id":null,"text":"","name":"","username":"",'
    '"handoff_reason":"","suggestion_id":"","language":"","action":""}],'
    '"card":{"action_id":"k7m2p9qrs3t4v5w6","text":"Отменить заказ 42","language":"ru"},'
    '"card_edit":{"message_id":1,"text":"Заказ 41: отменён"},"superseded":"a2b3c4d5e6f7g8h9",'
    '"question":null,"person_offer":false,"reply_keyboard":null,"language":null}'
)
LEGACY_QUESTION = (
    '{"job_id":"9","turn_id":"K7M2P9QRS9","chat_id":8300,"format":"none","text":"",'
    '"audit":[{"type":"feedback","chat_id":"8300","turn_id":"K7M2P9QRS9","event":"asked",'
    '"answered_by":"bot","turns":"1"}],"staff":[],"card":null,"card_edit":null,'
    '"superseded":null,"question":{"question_id":"K7M2P9QRS9"},"person_offer":false,'
    '"reply_keyboard":null,"language":"en"}'
)
LEGACY_OFFER = (
    '{"job_id":"10","turn_id":"K7M2P9QRSA","chat_id":8300,"format":"none","text":"",'
    '"audit":[{"type":"analysis","chat_id":"8300","turn_id":"K7M2P9QRSA",'
    '"event":"escalation_offered"}],"staff":[],"card":null,"card_edit":null,'
    '"superseded":null,"question":null,"person_offer":true,"reply_keyboard":null,'
    '"language":"ru"}'
)
LEGACY_LINK_REQUEST = (
    '{"job_id":"11","turn_id":"K7M2P9QRSB","chat_id":8300,"format":"plain",'
    '"text":"Поделитесь номером","audit":[],"staff":[],"card":null,"card_edit":null,'
    '"superseded":null,"question":null,"person_offer":false,"reply_keyboard":"contact",'
    '"language":"en"}'
)
LEGACY_RELAY_ONLY = (
    '{"job_id":"12","turn_id":"K7M2P9QRSC","chat_id":8300,"format":"none","text":"",'
    '"audit":[],"staff":[{"kind":"copy_to_topic","message_id":70}]}'
)


def test_an_answer_with_a_card_reads_as_the_edit_the_answer_the_card_then_the_relay() -> None:
    entry = Delivery.read(LEGACY_ANSWER_WITH_CARD)

    assert (entry.job_id, entry.turn_id, entry.chat_id) == ("8", "K7M2P9QRS8", 8300)
    assert entry.steps == (
        EditCard(message_id=1, text="Заказ 41: отменён"),
        SendText(text="Отменить заказ 42? Нажмите кнопку.", answer=True),
        SendCard(
            card=ActionCard(action_id="k7m2p9qrs3t4v5w6", text="Отменить заказ 42", language="ru"),
            superseded="a2b3c4d5e6f7g8h9",
        ),
        StaffRelay(actions=(StaffAction(kind="post_answer"),)),
    )
    assert entry.audit == (TURN_FIELDS,)
    assert entry.text == "Отменить заказ 42? Нажмите кнопку."


def test_a_question_reads_as_the_question_alone_its_audit_written_only_once_asked() -> None:
    entry = Delivery.read(LEGACY_QUESTION)

    [step] = entry.steps
    assert step == AskQuestion(
        question_id="K7M2P9QRS9",
        language="en",
        audit=(
            {
                "type": "feedback",
                "chat_id": "8300",
                "turn_id": "K7M2P9QRS9",
                "event": "asked",
                "answered_by": "bot",
                "turns": "1",
            },
        ),
    )
    assert entry.audit == (), "the entry's own audit went with the question's step"


def test_an_offer_of_a_person_reads_as_the_offer_alone() -> None:
    entry = Delivery.read(LEGACY_OFFER)

    assert entry.steps == (
        OfferPerson(
            language="ru",
            audit=(
                {
                    "type": "analysis",
                    "chat_id": "8300",
                    "turn_id": "K7M2P9QRSA",
                    "event": "escalation_offered",
                },
            ),
        ),
    )
    assert entry.audit == ()


def test_a_plain_text_keeps_its_reply_keyboard_and_language() -> None:
    entry = Delivery.read(LEGACY_LINK_REQUEST)

    assert entry.steps == (SendText(text="Поделитесь номером", keyboard="contact", language="en"),)


def test_a_relay_without_a_text_sends_the_customer_nothing() -> None:
    entry = Delivery.read(LEGACY_RELAY_ONLY)

    assert entry.steps == (StaffRelay(actions=(StaffAction(kind="copy_to_topic", message_id=70),)),)
    assert entry.text == ""


@pytest.mark.parametrize(
    "legacy", [LEGACY_ANSWER_WITH_CARD, LEGACY_QUESTION, LEGACY_OFFER, LEGACY_LINK_REQUEST]
)
def test_a_legacy_entry_written_again_is_stored_as_steps_and_reads_the_same(legacy: str) -> None:
    entry = Delivery.read(legacy)

    stored = json.loads(entry.model_dump_json())

    assert "format" not in stored
    assert "steps" in stored
    assert Delivery.model_validate_json(entry.model_dump_json()) == entry
    assert Delivery.read(entry.model_dump_json()) == entry


def test_every_known_step_kind_is_read_back_as_written() -> None:
    steps: tuple[KnownStep, ...] = (
        EditCard(message_id=5, text="готово"),
        SendText(text="ответ", answer=True, keyboard="remove", language="en"),
        SendCard(card=ActionCard(action_id="A", text="карточка"), superseded="B"),
        AskQuestion(question_id="Q", language="en", audit=({"type": "feedback"},)),
        OfferPerson(language="ru", audit=({"type": "analysis"},)),
        StaffRelay(actions=(StaffAction(kind="post", text="x"), StaffAction(kind="ended"))),
    )
    entry = Delivery(job_id="1", turn_id="T1", chat_id=9, steps=steps, audit=({"type": "turn"},))

    read = Delivery.model_validate_json(entry.model_dump_json())

    assert read == entry
    assert [type(step) for step in read.steps] == [type(step) for step in steps]
    assert {step.kind for step in steps} == STEP_KINDS


def test_a_step_of_a_kind_a_newer_version_wrote_is_read_as_unknown_and_the_rest_kept() -> None:
    stored = {
        "job_id": "1",
        "turn_id": "T1",
        "chat_id": 9,
        "steps": [
            {"kind": "send_poll", "question": "?"},
            {"kind": "send_text", "text": "ответ", "answer": True, "colour": "blue"},
        ],
        "audit": [],
    }

    entry = Delivery.read(json.dumps(stored))

    assert entry.steps == (UnknownStep(was="send_poll"), SendText(text="ответ", answer=True))


@pytest.mark.parametrize(
    "stored",
    [
        "{not json",
        "[1, 2]",
        '{"job_id": "1", "turn_id": "T1", "chat_id": 9}',
        '{"job_id": "1", "turn_id": "T1", "chat_id": 9, "steps": "send"}',
        '{"job_id": "1", "chat_id": 9, "steps": []}',
        '{"job_id": "1", "turn_id": "T1", "chat_id": 9, "format": "loud", "text": ""}',
    ],
)
def test_what_is_no_delivery_of_any_version_is_refused(stored: str) -> None:
    """The chat's queue moves such an entry to its quarantine (tests/queue/test_outbox_entries)."""
    # Not JSON (json's own error), or a pydantic validation error: both are ValueErrors.
    with pytest.raises(ValueError, match=r"validation error for|Expecting property name"):
        Delivery.read(stored)


def test_a_legacy_entry_is_never_read_as_an_empty_reply_of_this_version() -> None:
    """Without the reader, the previous version's entry is no delivery at all: never one that
    silently sends nothing."""
    with pytest.raises(ValidationError, match="steps"):
        Delivery.model_validate_json(LEGACY_LINK_REQUEST)


def test_a_reply_leaves_out_the_steps_not_needed_and_is_committed_for_its_job() -> None:
    job = QueuedJob(job_id="3", update_id=3, turn_id="T3", enqueued_ms=1, chat_id=77)
    reply = Reply.of(
        EditCard(message_id=2, text="нажато"),
        None,
        SendText(text="ок"),
        relay(),
        audit=[{"type": "turn"}],
    )

    committed = Delivery.of(job, reply)

    assert reply.steps == (EditCard(message_id=2, text="нажато"), SendText(text="ок"))
    assert (committed.job_id, committed.turn_id, committed.chat_id) == ("3", "T3", 77)
    assert committed.reply == reply
    assert committed.first(EditCard) == EditCard(message_id=2, text="нажато")
    assert committed.first(SendCard) is None
    assert Reply.say("").steps == (), "an empty text sends nothing"
    assert Delivery.of(job, reply, turn_id="TURN").turn_id == "TURN"


@pytest.mark.parametrize(
    "legacy", [LEGACY_ANSWER_WITH_CARD, LEGACY_LINK_REQUEST, LEGACY_RELAY_ONLY]
)
def test_the_previous_version_reads_a_stored_reply_of_text_card_and_relays_as_it_wrote_it(
    legacy: str,
) -> None:
    """A worker of the previous version taking a chat over mid-deploy delivers the reply."""
    entry = Delivery.read(legacy)

    stored = entry.stored()

    assert LegacyOutboxEntry.model_validate_json(stored) == LegacyOutboxEntry.model_validate_json(
        legacy
    )
    assert Delivery.read(stored) == entry, "this version reads its steps, not the flat fields"


@pytest.mark.parametrize("legacy", [LEGACY_QUESTION, LEGACY_OFFER])
def test_a_question_or_an_offer_is_stored_without_the_flat_fields(legacy: str) -> None:
    """Their audit sat where the delivery's own is now: written flat, it would be read twice."""
    entry = Delivery.read(legacy)

    stored = entry.stored()

    assert "format" not in json.loads(stored)
    assert Delivery.read(stored) == entry


def test_steps_out_of_the_previous_versions_order_are_stored_without_the_flat_fields() -> None:
    entry = Delivery(
        job_id="1",
        turn_id="K7M2P9QRS8",
        chat_id=8300,
        steps=(SendText(text="b"), EditCard(message_id=1, text="a")),
    )

    assert "format" not in json.loads(entry.stored())
    assert Delivery.read(entry.stored()) == entry
