"""pass^k as tau2-bench estimates it, the 80-column table, and verdicts on their own."""

import pytest

from bot.evaluation.report import EvalReport, ScenarioScore, pass_hat_k, table_lines
from bot.evaluation.scenario import Expectations
from bot.evaluation.verdicts import ExecutedAction, Observation, verdict


def test_pass_hat_k_is_the_chance_that_k_drawn_trials_all_pass():
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_hat_k(4, 3, 4) == 0.0
    assert pass_hat_k(4, 2, 1) == 0.5
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)  # C(2,2)/C(4,2)
    with pytest.raises(ValueError, match="pass"):
        pass_hat_k(2, 2, 3)


def test_with_k_trials_pass_k_is_the_share_of_scenarios_passing_every_trial():
    report = EvalReport(
        k=3,
        scores=(
            ScenarioScore(name="a", trials=3, passes=3),
            ScenarioScore(name="b", trials=3, passes=2, reasons=("x",)),
            ScenarioScore(name="c", trials=3, passes=0, reasons=("y",)),
            ScenarioScore(name="d", trials=0, passes=0, skipped="waits"),
        ),
    )
    assert report.pass_k(3) == pytest.approx(1 / 3)
    assert report.pass_k(1) == pytest.approx((1 + 2 / 3 + 0) / 3)
    document = report.to_json()
    assert document["k"] == 3
    assert document["pass_k"] == pytest.approx(0.3333)
    scenarios = document["scenarios"]
    assert isinstance(scenarios, list)
    assert [s["passed"] for s in scenarios] == [True, False, False, False]
    assert not report.all_passed


def test_the_table_fits_80_columns_whatever_the_names_and_reasons():
    report = EvalReport(
        k=2,
        scores=(
            ScenarioScore(name="n" * 60, trials=2, passes=1, reasons=("r" * 200,)),
            ScenarioScore(name="ok", trials=2, passes=2),
            ScenarioScore(name="later", trials=0, passes=0, skipped="s" * 100),
        ),
    )
    lines = table_lines(report)
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith("ok ") and "2/2" in line for line in lines)
    assert lines[-1].startswith("pass^1 0.750   pass^2 0.500")


def test_a_write_without_a_press_fails_whatever_is_expected():
    seen = Observation(
        bot_texts=("ok",),
        actions=(),
        unpressed_writes=("cancel_order(order_id=8042)",),
    )
    assert verdict(Expectations(), seen) == ["write without a press: cancel_order(order_id=8042)"]


def test_actions_in_order_with_others_between_unless_no_other_actions():
    cancel = ExecutedAction(tool="cancel_order", arguments={"order_id": "8042"}, outcome="executed")
    address = ExecutedAction(
        tool="change_delivery_address", arguments={"order_id": "8042"}, outcome="failed"
    )
    seen = Observation(bot_texts=(), actions=(address, cancel))
    loose = Expectations.model_validate({"actions": [{"tool": "cancel_order"}]})
    strict = Expectations.model_validate(
        {"actions": [{"tool": "cancel_order"}], "no_other_actions": True}
    )
    none = Expectations.model_validate({"actions": []})
    assert verdict(loose, seen) == []
    assert verdict(strict, seen) == [
        "actions[1]: expected cancel_order, executed change_delivery_address(order_id=8042) failed"
    ]
    assert verdict(none, seen) == [
        "actions: expected none, executed change_delivery_address(order_id=8042) failed"
    ]
