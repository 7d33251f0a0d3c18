"""The same two-tool turn written with the OpenAI Agents SDK and its ``RedisSession``.

What a team would write with the framework instead of the engine: one ``Agent``
with the engine's instructions and the registry's tools as SDK function tools
(the same schemas, the same tool functions, arguments validated by their pydantic
models, results dumped as the floor does), an ``OpenAIChatCompletionsModel`` on a
plain ``AsyncOpenAI`` client (the SDK's default transport) against the same
scripted model server, and ``Runner.run`` with a ``RedisSession`` per
conversation on one shared redis-py client. Tracing is off (it would export to
OpenAI's servers), so the framework does no more than the turn needs.
``python -m bench --only agents_sdk_two_tools`` runs it interleaved with the
engine (:func:`bench.scenarios.agents_sdk_two_tools`).

Needs the bench extra (``requirements-bench.lock``); not installed by the tests.
"""

import copy
import json
from typing import Any

import redis.asyncio as aioredis
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from agents.extensions.memory import RedisSession
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from tools.registry import ToolRegistry
from turn import TurnContext

SESSION_TTL_SECONDS = 86_400
"""As long as the floor keeps its history."""


def _function_tool(schema: dict[str, Any], registry: ToolRegistry) -> FunctionTool:
    """One of the engine's tool schemas as an SDK function tool, run as the floor runs it.

    Every schema the engine sends is offered (so the requests are alike); the
    scenario's model calls only the two read tools.
    """
    function = schema["function"]

    async def invoke(run: ToolContext[TurnContext], arguments: str) -> str:
        tool = registry.get(function["name"])
        parsed = tool.arguments_model.model_validate_json(arguments)
        handler: Any = tool.handler
        result = handler(parsed, run.context) if tool.takes_context else handler(parsed)
        if tool.is_async:
            result = await result
        return json.dumps({"ok": True, "data": result.model_dump(mode="json")}, ensure_ascii=False)

    return FunctionTool(
        name=function["name"],
        description=function["description"],
        params_json_schema=copy.deepcopy(function["parameters"]),
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


class AgentsSdkTurn:
    """One turn through ``Runner.run`` with a ``RedisSession`` (see the module docstring)."""

    def __init__(
        self,
        *,
        redis: aioredis.Redis,
        base_url: str,
        api_key: str,
        model: str,
        instruction: str,
        registry: ToolRegistry,
        key_prefix: str,
    ) -> None:
        set_tracing_disabled(True)
        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0)
        self._redis = redis
        self._prefix = f"{key_prefix}:agents"
        self._agent: Agent[TurnContext] = Agent(
            name="support",
            instructions=instruction,
            model=OpenAIChatCompletionsModel(model=model, openai_client=self._client),
            model_settings=ModelSettings(parallel_tool_calls=False),
            tools=[_function_tool(schema, registry) for schema in registry.api_schemas()],
        )
        self._config = RunConfig(tracing_disabled=True)

    async def reply(self, key: str, text: str, context: TurnContext) -> str:
        """Answer ``text`` in conversation ``key``; returns the model's final text."""
        session = RedisSession(
            key, redis_client=self._redis, key_prefix=self._prefix, ttl=SESSION_TTL_SECONDS
        )
        result = await Runner.run(
            self._agent, text, session=session, context=context, run_config=self._config
        )
        return str(result.final_output)

    async def aclose(self) -> None:
        """Close the model client."""
        await self._client.close()
