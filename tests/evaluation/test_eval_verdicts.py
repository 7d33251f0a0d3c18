"""Verdicts through real trials: what holds passes; a wrong action, language or end state fails.

Each trial runs the bot's turn path (offline model, Redis, cards, presses, audit)
and each failing case names the expectation and what was found instead.
"""

from collections.abc import Callable
from pathlib import Path

from bot.evaluation.cli import run_scenarios
from bot.evaluation.report import EvalReport
from bot.evaluation.scenario import load_scenarios
from bot.settings import Settings

CANCEL_8042 = """
name: {name}
language: ru
customer:
  script:
    - say: "Отмените заказ 8042"
    - press: {press}
expect:
{expect}
"""


async def _run(settings: Settings, paths: list[Path], trials: int = 1) -> EvalReport:
    return await run_scenarios(load_scenarios(paths), settings, trials=trials)


async def test_expectations_that_hold_pass(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "holds",
        CANCEL_8042.format(
            name="holds",
            press="confirm",
            expect="""  actions:
    - {tool: cancel_order, arguments: {order_id: "8042"}, outcome: executed}
  no_other_actions: true
  replies: {contain: ["8042 отменён"], language: ru}
  handoff: false
  check:
    - {tool: get_order_status, arguments: {order_id: "8042"}, result: {status: cancelled}}""",
        ),
    )
    report = await _run(eval_settings, [path])
    assert report.scores[0].reasons == ()
    assert report.all_passed


async def test_a_wrong_action_fails_naming_what_was_executed(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "wrong-action",
        CANCEL_8042.format(
            name="wrong-action",
            press="confirm",
            expect="""  actions:
    - {tool: cancel_order, arguments: {order_id: "8041"}}""",
        ),
    )
    report = await _run(eval_settings, [path])
    score = report.scores[0]
    assert not report.all_passed
    assert score.passes == 0
    assert score.reasons[0] == "actions[1]: cancel_order arguments.order_id is 8042, expected 8041"


async def test_an_action_expected_but_declined_fails(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "declined",
        CANCEL_8042.format(
            name="declined",
            press="decline",
            expect="""  actions:
    - {tool: cancel_order, outcome: executed}""",
        ),
    )
    report = await _run(eval_settings, [path])
    assert report.scores[0].reasons == (
        "actions[1]: cancel_order was not executed (executed: nothing)",
    )


async def test_a_wrong_language_fails_quoting_the_reply(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "wrong-language",
        CANCEL_8042.format(
            name="wrong-language", press="decline", expect="  replies: {language: en}"
        ),
    )
    report = await _run(eval_settings, [path])
    (reason,) = report.scores[0].reasons
    assert reason.startswith("replies.language: reply 1 is not en: 'Проверьте")


async def test_a_wrong_end_state_fails_with_what_the_shop_says(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "wrong-end-state",
        CANCEL_8042.format(
            name="wrong-end-state",
            press="decline",
            expect="""  check:
    - {tool: get_order_status, arguments: {order_id: "8042"}, result: {status: cancelled}}""",
        ),
    )
    report = await _run(eval_settings, [path])
    assert report.scores[0].reasons == (
        "check get_order_status(order_id=8042): result.status is processing, expected cancelled",
    )


async def test_replies_and_handoff_expectations_fail_with_reasons(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    path = write_scenario(
        "replies",
        CANCEL_8042.format(
            name="replies",
            press="confirm",
            expect="""  replies:
    contain: ["курьер"]
    not_contain: ["отменён"]
  handoff: true""",
        ),
    )
    report = await _run(eval_settings, [path])
    assert report.scores[0].reasons == (
        "replies.contain: no reply has 'курьер'",
        "replies.not_contain: reply 3 has 'отменён'",
        "handoff: expected a person to take over, the bot kept the conversation",
    )


async def test_each_trial_starts_from_a_fresh_shop(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    """A cancel in one trial (or scenario) is not seen by the next: 8042 is cancellable again."""
    cancel = write_scenario(
        "a-cancel",
        CANCEL_8042.format(
            name="a-cancel",
            press="confirm",
            expect="""  actions:
    - {tool: cancel_order, arguments: {order_id: "8042"}, outcome: executed}
  no_other_actions: true""",
        ),
    )
    status = write_scenario(
        "b-status",
        """
name: b-status
language: ru
customer:
  script:
    - say: "Где мой заказ 8042?"
expect:
  replies: {contain: ["Собирается на складе"]}
  check:
    - {tool: get_order_status, arguments: {order_id: "8042"}, result: {status: processing}}
""",
    )
    report = await _run(eval_settings, [cancel, status], trials=3)
    assert [(s.name, s.passes, s.trials) for s in report.scores] == [
        ("a-cancel", 3, 3),
        ("b-status", 3, 3),
    ]
    assert report.pass_k(3) == 1.0


async def test_a_double_press_executes_once_and_a_press_without_a_card_fails(
    eval_settings: Settings, write_scenario: Callable[[str, str], Path]
):
    twice = write_scenario(
        "twice",
        """
name: twice
language: ru
customer:
  script:
    - say: "Отмените заказ 8042"
    - press: confirm
    - press: confirm
expect:
  actions: [{tool: cancel_order, outcome: executed}]
  no_other_actions: true
""",
    )
    no_card = write_scenario(
        "no-card",
        """
name: no-card
customer:
  script:
    - say: "Где мой заказ 8041?"
    - press: confirm
""",
    )
    report = await _run(eval_settings, [no_card, twice])
    by_name = {s.name: s for s in report.scores}
    assert by_name["twice"].reasons == ()
    assert by_name["no-card"].reasons == ("press confirm: no card was shown to press",)
