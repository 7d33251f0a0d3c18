"""The parts that own a turn's items decide what follows; the chat service decides none.

Pure values in, values out: the handoff policy (:class:`TurnHandoff`) and the
action cards (:class:`ActionCards`) are given a :class:`TurnEnd` and the
follow-up so far, and return the next one, which the chat service commits
with the turn.
"""

from datetime import UTC, datetime, timedelta

from bot import customer_texts
from bot.actions.turns import ActionCards
from bot.audit.schema import TYPE
from bot.engine.chat_service import SPEECH_MARK
from bot.engine.turn_items import ActionProposed, FollowUp, HandoffAsked, TurnEnd
from bot.handoff.turns import IDLE_TOPIC_NOTE, TurnHandoff
from bot.queue.delivery_steps import SendCard, StaffRelay
from bot.queue.staff_actions import TRANSCRIPT_LABEL, HandoffTurn, StaffAction
from bot.sessions.handoff_machine import IdleRule
from bot.sessions.models import ConversationSession, HandoffState
from bot.sessions.pending import CARD_MIRROR, PendingAction
from turn import TurnContext, TurnInput

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CUSTOMER = HandoffTurn(name="Анна", username="anna", message_id=77)
CONTEXT = TurnContext(conversation_key="tg:5", chat_id=5, user_id=5, turn_id="TURN5")
RULE = IdleRule(idle_seconds=600, clock=lambda: NOW)


def _session(handoff: HandoffState = "bot", *, quiet_for: float = 0.0) -> ConversationSession:
    session = ConversationSession.start("tg:5", NOW - timedelta(hours=1), "support_chat", "1.5.0")
    if handoff == "bot":
        return session
    return session.with_handoff(handoff, NOW - timedelta(seconds=quiet_for))


def _action(action_id: str) -> PendingAction:
    return PendingAction(
        action_id=action_id,
        tool_name="cancel_order",
        arguments="{}",
        description=f"Отменить заказ ({action_id})",
        proposed_at=NOW,
        turn_id="TURN5",
    )


def _end(
    before: ConversationSession | None,
    *,
    customer: HandoffTurn | None = CUSTOMER,
    handoff: HandoffAsked | None = None,
    proposal: ActionProposed | None = None,
    turn_input: TurnInput | None = None,
    question: str = "где мой заказ?",
) -> TurnEnd:
    return TurnEnd(
        context=CONTEXT,
        before=before,
        question=question,
        turn_input=turn_input or TurnInput(),
        customer=customer,
        answer="Заказ в пути.",
        proposal=proposal,
        handoff=handoff,
    )


def _staff(follow: FollowUp) -> tuple[StaffAction, ...]:
    """The staff relay steps that follow the answer."""
    return tuple(
        action for step in follow.steps if isinstance(step, StaffRelay) for action in step.actions
    )


def _card(follow: FollowUp) -> SendCard | None:
    """The card that follows the answer, if any."""
    return next((step for step in follow.steps if isinstance(step, SendCard)), None)


def _events(follow: FollowUp) -> list[tuple[str, str]]:
    return [(fields[TYPE], fields["event"]) for fields in follow.audit]


def test_a_turn_without_a_customer_leaves_handoffs_alone() -> None:
    """The console has no staff chat: even the model's call for a person changes nothing."""
    before = _session()
    follow = FollowUp(session=before)

    after = TurnHandoff(idle=RULE)(
        _end(before, customer=None, handoff=HandoffAsked(reason="x")), follow
    )

    assert after == follow


def test_the_models_call_for_a_person_opens_a_handoff() -> None:
    before = _session()

    after = TurnHandoff(idle=RULE)(
        _end(before, handoff=HandoffAsked(reason="сложный возврат")), FollowUp(session=before)
    )

    assert after.session.handoff == "waiting"
    assert [step.kind for step in _staff(after)] == ["open"]
    assert "сложный возврат" in _staff(after)[0].text
    assert _events(after) == [("handoff", "opened")]
    assert after.note is None, "the customer hears the model's own answer"


def test_an_idle_handoff_ends_with_the_turn_and_the_customer_is_told() -> None:
    before = _session("human", quiet_for=601)

    after = TurnHandoff(idle=RULE)(_end(before), FollowUp(session=before))

    assert after.session.handoff == "bot"
    assert after.note == customer_texts.HANDOFF_IDLE_NOTE
    assert [(step.kind, step.text) for step in _staff(after)] == [
        ("post", IDLE_TOPIC_NOTE),
        ("ended", ""),
    ]
    assert _events(after) == [("handoff", "closed")]


def test_a_waiting_chat_mirrors_a_voice_question_its_transcript_the_answer_and_the_card() -> None:
    before = _session("waiting")
    proposal = ActionProposed(action=_action("A1"), superseded=None)

    after = TurnHandoff(idle=RULE)(
        _end(
            before,
            proposal=proposal,
            turn_input=TurnInput(kind="voice", voice_seconds=3),
            question=f"{SPEECH_MARK}отмените заказ",
        ),
        FollowUp(session=before),
    )

    assert [step.kind for step in _staff(after)] == [
        "copy_to_topic",
        "post",
        "post_answer",
        "post",
    ]
    assert _staff(after)[0].message_id == CUSTOMER.message_id
    assert _staff(after)[1].text.startswith(TRANSCRIPT_LABEL)
    assert _staff(after)[1].text.endswith("отмените заказ")
    assert _staff(after)[3].text == f"{CARD_MIRROR}Отменить заказ (A1)"
    assert after.session.handoff == "waiting"


def test_a_turn_without_a_proposal_gets_no_card() -> None:
    before = _session()
    follow = FollowUp(session=before)

    assert ActionCards(clock=lambda: NOW)(_end(before), follow) == follow


def test_a_proposal_becomes_a_card_with_its_audit_and_replaces_the_pending_card() -> None:
    before = _session()
    proposal = ActionProposed(action=_action("NEW"), superseded=_action("OLD"))

    after = ActionCards(clock=lambda: NOW)(
        _end(before, proposal=proposal), FollowUp(session=before)
    )

    card = _card(after)
    assert card is not None
    assert (card.card.action_id, card.card.text) == ("NEW", "Отменить заказ (NEW)")
    assert card.superseded == "OLD"
    assert _events(after) == [
        ("action", "superseded"),
        ("action", "proposed"),
    ]
