"""The shipped pack (evals/) passes with the offline demo model, run through the command."""

import json
from pathlib import Path

import pytest

from bot.evaluation.cli import main
from bot.evaluation.scenario import load_scenarios
from bot.testing.redis_server import RedisServer
from tests.evaluation.conftest import PACK


def test_the_pack_covers_what_the_issue_lists_in_both_languages():
    files = load_scenarios([PACK])
    running = [f.scenario for f in files if f.scenario.skip is None]
    assert len(running) >= 24
    assert {s.language for s in running} == {"ru", "en"}
    names = " ".join(s.name for s in running)
    for topic in (
        "order-status",
        "order-number-asked",
        "return-rules",
        "cancel-8042-confirmed",
        "cancel-8042-declined",
        "address-change-refused",
        "help-center",
        "person-asked",
        "someone-elses-order",
        "injected-cancel",
    ):
        assert topic in names, topic


def test_the_pack_passes_with_the_offline_model_through_the_command(
    redis_server: RedisServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    """``python -m bot eval evals/ --json FILE`` with only REDIS_URL set: exit 0, all passed."""
    monkeypatch.chdir(tmp_path)  # no developer's .env here
    for name in ("LLM_BACKEND", "OPENAI_API_KEY", "STAFF_CHAT_ID", "EVAL_CUSTOMER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    out = tmp_path / "results.json"

    code = main([str(PACK), "--json", str(out)])

    printed = capsys.readouterr().out
    assert code == 0, printed
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["k"] == 1
    assert results["pass_1"] == 1.0
    assert results["pass_k"] == 1.0
    ran = [s for s in results["scenarios"] if "skipped" not in s]
    assert len(ran) >= 24
    assert all(s["passed"] and s["passes"] == s["trials"] == 1 for s in ran)
    assert all(len(line) <= 80 for line in printed.splitlines())
    assert "pass^1 1.000" in printed
