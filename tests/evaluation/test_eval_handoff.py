"""``handoff:`` is judged on what the turn did: a model calling a person in (a staff chat)."""

from collections.abc import Callable
from pathlib import Path

from bot.evaluation.cli import run_scenarios
from bot.evaluation.scenario import load_scenarios
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, tool_call_answer
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings

ASKS_FOR_A_PERSON = """
name: {name}
language: ru
customer:
  script:
    - say: "Позовите человека, пожалуйста"
expect:
  actions: []
  handoff: {handoff}
"""


async def test_a_person_called_in_is_a_handoff_and_judged_so(
    redis_server: RedisServer,
    openai_server: ScriptedOpenAIServer,
    write_scenario: Callable[[str, str], Path],
):
    settings = make_settings(
        REDIS_URL=redis_server.url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=openai_server.base_url,
        LLM_MODEL="scripted-model",
        LLM_MAX_RETRIES=0,
        STAFF_CHAT_ID=-1001234567890,
    )
    for _ in range(2):
        openai_server.script(
            tool_call_answer("request_human_agent", {"reason": "customer_asked"}),
            text_answer("Зову сотрудника, он скоро ответит."),
        )
    expected = write_scenario("expected", ASKS_FOR_A_PERSON.format(name="expected", handoff="true"))
    refused = write_scenario("refused", ASKS_FOR_A_PERSON.format(name="refused", handoff="false"))
    report = await run_scenarios(load_scenarios([expected, refused]), settings)
    assert openai_server.pending_steps == 0
    by_name = {score.name: score for score in report.scores}
    assert by_name["expected"].reasons == ()
    assert by_name["refused"].reasons == ("handoff: the conversation went to a person",)
