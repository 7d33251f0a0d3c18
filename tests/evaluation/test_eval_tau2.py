"""The tau2-bench adapter: tasks' gold actions replayed through the bot score as tau2 scores.

The bot's model is the scripted OpenAI-compatible server asking for each task's
gold actions (reads inline, each write on a card); the scripted customer presses
confirm on every card. The retail database is served over MCP and scored by
tau2's own evaluators. Skipped unless the extra is installed (./scripts/bootstrap-tau2).
"""

from collections.abc import Sequence
from typing import Any

import pytest

from bot.evaluation.customers import ScriptedCustomer
from bot.evaluation.scenario import ScriptStep
from bot.evaluation.tau2 import Tau2, Tau2UnavailableError, load_tau2, play_task
from bot.settings import Settings
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, tool_calls_answer
from bot.testing.settings import make_settings


@pytest.fixture(scope="module")
def tau2() -> Tau2:
    try:
        return load_tau2()
    except Tau2UnavailableError as error:
        pytest.skip(f"the tau2 extra is not installed here: {error}")


def _segments(tau2: Tau2, task: Any) -> list[list[Any]]:
    """The gold actions cut after each write: one customer turn (and card) per write."""
    segments: list[list[Any]] = [[]]
    environment = tau2.fresh_environment()
    for action in task.evaluation_criteria.actions:
        segments[-1].append(action)
        if str(environment.tools.tool_type(action.name).value) == "write":
            segments.append([])
    return [segment for segment in segments if segment]


def _replay(tau2: Tau2, task: Any, *, press: str) -> tuple[list[Reply], list[ScriptStep]]:
    """The bot model's steps and the customer's script that replay ``task``'s gold actions."""
    model: list[Reply] = []
    customer: list[ScriptStep] = []
    environment = tau2.fresh_environment()
    for segment in _segments(tau2, task):
        *reads, last = segment
        writes = str(environment.tools.tool_type(last.name).value) == "write"
        if not writes:
            reads, last = segment, None
        customer.append(ScriptStep(say="Please go on with my request."))
        if reads:
            model.append(tool_calls_answer([(a.name, a.arguments) for a in reads]))
        if last is not None:
            model.append(tool_calls_answer([(last.name, last.arguments)]))
            customer.append(ScriptStep(press=press))  # type: ignore[arg-type]
        model.append(text_answer("Done as asked."))
    return model, customer


def _settings(redis_url: str, model: ScriptedOpenAIServer) -> Settings:
    return make_settings(
        REDIS_URL=redis_url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=model.base_url,
        LLM_MODEL="scripted-model",
        LLM_MAX_RETRIES=0,
        TOOL_MAX_STEPS=5,
        TOOL_MAX_CALLS_PER_TURN=20,
        MCP_TOOLS_TOKEN_WARNING=0,
    )


def _tasks_with_writes(tau2: Tau2, count: int) -> Sequence[Any]:
    chosen = [
        task
        for task in tau2.tasks("retail")
        if len(_segments(tau2, task)) <= 3 and not task.evaluation_criteria.communicate_info
    ]
    return chosen[:count]


async def test_gold_actions_pressed_through_the_bot_score_one_and_write_only_on_a_press(
    tau2: Tau2, redis_server: Any, openai_server: ScriptedOpenAIServer
):
    tasks = _tasks_with_writes(tau2, 3)
    assert tasks
    for number, task in enumerate(tasks, start=1):
        steps, script = _replay(tau2, task, press="confirm")
        openai_server.script(*steps)
        played = await play_task(
            tau2,
            task,
            _settings(redis_server.url, openai_server),
            customer=ScriptedCustomer(script),
            prefix=f"t2test-{number}",
        )
        assert openai_server.pending_steps == 0
        assert (task.id, played.reward, played.writes_without_press) == (task.id, 1.0, 0)


async def test_declining_the_cards_leaves_the_database_short_of_the_gold_one(
    tau2: Tau2, redis_server: Any, openai_server: ScriptedOpenAIServer
):
    (task,) = _tasks_with_writes(tau2, 1)
    steps, script = _replay(tau2, task, press="decline")
    openai_server.script(*steps)
    played = await play_task(
        tau2,
        task,
        _settings(redis_server.url, openai_server),
        customer=ScriptedCustomer(script),
        prefix="t2test-declined",
    )
    assert (played.reward, played.writes_without_press) == (0.0, 0)
