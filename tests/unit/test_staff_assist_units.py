"""Staff assist's small decisions: a reason per handoff path, the offline analyst's score,
the assist audit's acceptance rate, and the update ids of its jobs."""

from datetime import UTC, datetime

import pytest

from bot.analysis.analyzer import SupportRequestAnalyzer
from bot.analysis.review import REVIEW_UPDATE_ID_OFFSET, review_update_id
from bot.audit.assist import AssistAuditEntry, rollup_fields, stats_of_counts
from bot.queue.staff_actions import HANDOFF_REASONS, reason_of
from bot.sessions.models import ConversationSession
from bot.staff_assist.service import suggestion_update_id
from bot.staff_texts import HANDOFF_REASON_LABELS
from bot.tryout.analyst import OfflineAnalyst
from prompts.registry import ANALYSIS_PROMPT_ID, build_default_prompt_registry


@pytest.mark.parametrize(
    ("trigger", "detail", "reason"),
    [
        ("command", "", "customer_asked"),
        ("failed_turns", "", "repeated_failures"),
        ("analysis", "", "upset_customer"),
        ("staff", "", "other"),
        ("tool", "customer_asked", "customer_asked"),
        ("tool", "complaint", "upset_customer"),
        ("tool", "refund_dispute", "policy"),
        ("tool", "order_problem", "action_needs_person"),
        ("tool", "bot_cannot_help", "bot_could_not_answer"),
        ("tool", "other", "other"),
        ("tool", "made_up", "other"),
    ],
)
def test_every_path_that_opens_a_handoff_gives_one_of_seven_reasons(
    trigger: str, detail: str, reason: str
) -> None:
    assert reason_of(trigger, detail) == reason  # type: ignore[arg-type]
    assert reason in HANDOFF_REASONS


def test_every_reason_has_a_staff_label() -> None:
    assert set(HANDOFF_REASON_LABELS) == set(HANDOFF_REASONS)


async def test_the_offline_analyst_scores_a_conversation_too() -> None:
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    session = ConversationSession.start("100", now, "support_chat", "1.8.0").with_turn(
        "Где мой заказ 8041? Ужасно!", "Заказ 8041 передан в доставку.", now, "1.8.0", "TURN000001"
    )
    analyzer = SupportRequestAnalyzer(
        client=OfflineAnalyst(),
        prompt=build_default_prompt_registry().get(ANALYSIS_PROMPT_ID, "1.1.0"),
    )
    outcome = await analyzer.analyze(session)
    assert outcome.quality is not None
    # An upset customer: the demo fails "resolved" and "tone", a point each.
    assert (outcome.quality.score, outcome.quality.failed) == (3, ["resolved", "tone"])
    assert outcome.turn_codes == ("TURN000001",)


def test_acceptance_is_the_share_of_ended_suggestions_sent_as_is() -> None:
    counts: dict[str, int] = {}
    for event in ("suggested", "sent", "suggested", "own", "suggested", "replaced", "suggested"):
        fields = AssistAuditEntry(chat_id="1", turn_id="T", event=event).to_fields()
        for name, value in rollup_fields(fields):
            counts[name] = counts.get(name, 0) + int(value)
    stats = stats_of_counts(counts)
    assert stats.suggested == 4
    assert stats.ended == 3
    assert stats.acceptance == pytest.approx(1 / 3)


def test_assist_jobs_never_share_an_update_id_with_telegram_or_other_checks() -> None:
    ids = {suggestion_update_id(f"TURN{n:06d}") for n in range(1000)}
    assert len(ids) == 1000
    assert all(-(10**15) - 2**48 < i <= -(10**15) for i in ids)
    assert -(REVIEW_UPDATE_ID_OFFSET + 4 * 10**12) < review_update_id(1_800_000_000_000) < 0
