"""The tau2-bench adapter: tasks' gold actions replayed through the bot score as tau2 scores.

The bot's model is the scripted OpenAI-compatible server asking for each task's
gold actions (reads inline, each write on a card); the scripted customer presses
confirm on every card. The retail database is served over MCP and scored by
tau2's own evaluators. Skipped unless the extra is installed (./scripts/bootstrap-tau2).
"""

from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

from bot.evaluation.cli import main
from bot.evaluation.customers import ScriptedCustomer
from bot.evaluation.scenario import ScriptStep
from bot.evaluation.tau2 import (
    Tau2,
    Tau2UnavailableError,
    leaderboard_lines,
    load_tau2,
    play_task,
    run_tau2,
)
from bot.llm.openai_client import OpenAIChatClient
from bot.settings import Settings
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, tool_calls_answer
from bot.testing.settings import make_settings


@pytest.fixture(scope="module")
def tau2() -> Tau2:
    try:
        return load_tau2()
    except Tau2UnavailableError as error:
        pytest.skip(f"the tau2 extra is not installed here: {error}")


@pytest.fixture(scope="module")
def writes(tau2: Tau2) -> frozenset[str]:
    """The retail tools that change the database."""
    environment = tau2.fresh_environment()
    return frozenset(
        tool.name
        for tool in environment.get_tools()
        if str(environment.tools.tool_type(tool.name).value) == "write"
    )


def _segments(task: Any, writes: frozenset[str]) -> list[list[Any]]:
    """The gold actions cut after each write: one customer turn (and card) per write."""
    segments: list[list[Any]] = [[]]
    for action in task.evaluation_criteria.actions:
        segments[-1].append(action)
        if action.name in writes:
            segments.append([])
    return [segment for segment in segments if segment]


def _replay(
    task: Any, writes: frozenset[str], *, press: str
) -> tuple[list[Reply], list[ScriptStep]]:
    """The bot model's steps and the customer's script that replay ``task``'s gold actions."""
    model: list[Reply] = []
    customer: list[ScriptStep] = []
    for segment in _segments(task, writes):
        *reads, last = segment
        if last.name not in writes:
            reads, last = segment, None
        customer.append(ScriptStep(say="Please go on with my request."))
        if reads:
            model.append(tool_calls_answer([(a.name, a.arguments) for a in reads]))
        if last is not None:
            model.append(tool_calls_answer([(last.name, last.arguments)]))
            customer.append(ScriptStep.model_validate({"press": press}))
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


def _tasks_with_writes(tau2: Tau2, writes: frozenset[str], count: int) -> Sequence[Any]:
    """Tasks with one to three writes and no facts to say (the replay says none)."""
    chosen = [
        task
        for task in tau2.tasks("retail")
        if 2 <= len(_segments(task, writes)) <= 3 and not task.evaluation_criteria.communicate_info
    ]
    return chosen[:count]


async def test_gold_actions_pressed_through_the_bot_score_one_and_write_only_on_a_press(
    tau2: Tau2, writes: frozenset[str], redis_server: Any, openai_server: ScriptedOpenAIServer
):
    tasks = _tasks_with_writes(tau2, writes, 2)
    assert len(tasks) == 2
    for number, task in enumerate(tasks, start=1):
        steps, script = _replay(task, writes, press="confirm")
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
    tau2: Tau2, writes: frozenset[str], redis_server: Any, openai_server: ScriptedOpenAIServer
):
    (task,) = _tasks_with_writes(tau2, writes, 1)
    steps, script = _replay(task, writes, press="decline")
    openai_server.script(*steps)
    played = await play_task(
        tau2,
        task,
        _settings(redis_server.url, openai_server),
        customer=ScriptedCustomer(script),
        prefix="t2test-declined",
    )
    assert (played.reward, played.writes_without_press) == (0.0, 0)


def test_an_unknown_domain_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]):
    assert main(["--tau2", "airline"]) == 2
    assert capsys.readouterr().err == "error: --tau2 airline: this adapter knows retail\n"


def test_without_the_extra_the_command_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str],
):
    try:
        load_tau2()
    except Tau2UnavailableError:
        pass
    else:
        pytest.skip("the tau2 extra is installed here")
    assert main(["--tau2", "retail"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: tau2-bench is not installed")
    assert "./scripts/bootstrap-tau2" in line


async def test_a_run_reports_pass_k_beside_the_leaderboard_and_counts_unpressed_writes(
    tau2: Tau2, writes: frozenset[str], redis_server: Any, openai_server: ScriptedOpenAIServer
):
    """``run_tau2`` with a model customer: the bot's and the customer's requests answered
    from two scripts (by the model each names), the task replayed and scored."""
    (task,) = _tasks_with_writes(tau2, writes, 1)
    bot_steps, script = _replay(task, writes, press="confirm")
    bot = deque(bot_steps)
    customer = deque(
        text_answer(f"[{step.press}]" if step.press else step.say or "") for step in script
    )
    customer.append(text_answer("Thanks, that is all. [done]"))
    openai_server.responder = lambda body: (
        customer if body["model"] == "customer-model" else bot
    ).popleft()
    client = OpenAIChatClient.create(
        api_key="sk-test",
        base_url=openai_server.base_url,
        model="customer-model",
        timeout_seconds=5,
        max_retries=0,
        instructions_role="system",
    )
    try:
        report, unpressed = await run_tau2(
            tau2,
            _settings(redis_server.url, openai_server),
            tasks=None,
            only=task.id,
            trials=1,
            customer_model=client,
        )
    finally:
        await client.close()
    assert (report.pass_k(1), unpressed) == (1.0, 0)
    assert not bot
    assert not customer
    lines = leaderboard_lines(report, unpressed)
    assert lines[0].startswith("tau2-bench retail leaderboard (best verified): pass^1 0.844")
    assert lines[-1] == "writes without a press: 0 (must be 0)"
