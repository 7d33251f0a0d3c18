"""Malformed scenarios: exit 2 and one line naming the file, the field and what is wrong."""

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.evaluation.cli import main

VALID = """
name: fine
customer:
  script:
    - say: "Где мой заказ 8041?"
"""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            VALID + "expect:\n  no_other_action: true\n",
            "expect.no_other_action: Extra inputs are not permitted",
        ),
        (
            "name: x\ncustomer:\n  script:\n    - say: hi\n      press: confirm\n",
            "customer.script.0: a step is either say: or press:, exactly one of them",
        ),
        (
            "name: x\ncustomer:\n  script:\n    - press: maybe\n",
            "customer.script.0.press: Input should be 'confirm' or 'decline'",
        ),
        (
            "name: x\ncustomer:\n  user_id: 5\n",
            "customer: give either script: or instructions:, exactly one of them",
        ),
        ("customer:\n  script:\n    - say: hi\n", "name: Field required"),
        (
            VALID + "expect:\n  actions:\n    - {arguments: {order_id: '8042'}}\n",
            "expect.actions.0.tool: Field required",
        ),
        (VALID + "expect:\n  replies:\n    language: russian\n", "expect.replies.language:"),
        ("name: [unclosed\n", "not valid YAML at line"),
        ("- just\n- a list\n", "expected a mapping of fields"),
    ],
)
def test_a_malformed_scenario_is_one_line_and_exit_2(
    text: str,
    says: str,
    write_scenario: Callable[[str, str], Path],
    capsys: pytest.CaptureFixture[str],
):
    path = write_scenario("broken", text)
    code = main([str(path.parent)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: ")
    assert says in lines[0]


def test_two_scenarios_of_one_name_and_an_unknown_only_are_refused(
    write_scenario: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
):
    first = write_scenario("a", VALID)
    write_scenario("b", VALID)
    assert main([str(first.parent)]) == 2
    assert "name: 'fine' is also the name in" in capsys.readouterr().err
    assert main([str(first), "--only", "other"]) == 2
    assert "--only other: no scenario of that name" in capsys.readouterr().err


def test_a_simulated_customer_without_a_model_is_a_setting_error(
    write_scenario: Callable[[str, str], Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    monkeypatch.chdir(tmp_path)
    for name in ("LLM_BACKEND", "OPENAI_API_KEY", "EVAL_CUSTOMER_MODEL", "EVAL_CUSTOMER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = write_scenario("simulated", "name: sim\ncustomer:\n  instructions: Cancel order 8042.\n")
    assert main([str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("configuration error: EVAL_CUSTOMER_MODEL:")
