"""The floor: a minimal hand-written asyncio turn doing the engine's two-tool work.

Three model requests on one aiohttp session against the same scripted model
server, the same two tool functions (arguments validated, results dumped), one
Redis pipeline to take the lease and load the history, one to save it and drop
the lease, one ``XADD`` for the audit. No retries, no error handling, no
history window, no locks in the process: what any Python implementation of
the turn pays at least. ``python -m bench`` runs it interleaved with the engine
(scenario ``floor_two_tools``) and prints the engine/floor ratio.
"""

import json
import secrets
from typing import Any

import aiohttp
from redis.typing import EncodableT, FieldT

from bot.app import Application
from bot.storage.connection import AsyncRedisClient
from tools.registry import ToolRegistry
from turn import TurnContext

HISTORY_MESSAGES = 40
"""History kept and sent (the engine's window is in tokens; five turns fit either way)."""
AUDIT_MAXLEN = 100_000
"""The audit stream's approximate length cap, as the engine's default."""
MODEL_STEPS = 3
"""Model requests at most per turn (the last one without tools), as the engine's default."""


async def tool_message(
    registry: ToolRegistry, call: dict[str, Any], context: TurnContext
) -> dict[str, str]:
    """Run one tool call as the floor does (arguments validated, result dumped); its message."""
    tool = registry.get(call["function"]["name"])
    arguments = tool.arguments_model.model_validate_json(call["function"]["arguments"])
    handler: Any = tool.handler
    result = handler(arguments, context) if tool.takes_context else handler(arguments)
    if tool.is_async:
        # The order status tool reads the shop backend, which is async.
        result = await result
    content = {"ok": True, "data": result.model_dump(mode="json")}
    return {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": json.dumps(content, ensure_ascii=False),
    }


class FloorModel:
    """The floor's model loop: up to three requests, the tools called in between."""

    def __init__(
        self,
        *,
        http: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        model: str,
        instruction: str,
        registry: ToolRegistry,
    ) -> None:
        self._http = http
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self.model = model
        self._instruction = instruction
        self._registry = registry
        self._schemas = list(registry.api_schemas())

    @classmethod
    def of(cls, app: Application, http: aiohttp.ClientSession, base_url: str) -> "FloorModel":
        """The floor's model loop with ``app``'s model name, default prompt and tools."""
        return cls(
            http=http,
            base_url=base_url,
            api_key="sk-bench",
            model=app.settings.llm.model,
            instruction=app.chat.instruction(None),
            registry=app.registry,
        )

    def messages(self, history: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
        """The first request's messages: the prompt, the history, the question."""
        return [
            {"role": "developer", "content": self._instruction},
            *history,
            {"role": "user", "content": text},
        ]

    async def answer(
        self, messages: list[dict[str, Any]], context: TurnContext
    ) -> tuple[str, list[str]]:
        """The final text and the tools called, ``messages`` grown by the turn's steps."""
        tools_called: list[str] = []
        for step in range(MODEL_STEPS):
            body = {
                "model": self.model,
                "messages": messages,
                "tools": self._schemas,
                "tool_choice": "auto" if step < MODEL_STEPS - 1 else "none",
                "parallel_tool_calls": False,
            }
            async with self._http.post(
                self._url, data=json.dumps(body, ensure_ascii=False), headers=self._headers
            ) as response:
                response.raise_for_status()
                completion = json.loads(await response.read())
            message = completion["choices"][0]["message"]
            calls = message.get("tool_calls")
            if not calls:
                return str(message["content"]), tools_called
            messages.append(
                {"role": "assistant", "content": message["content"], "tool_calls": calls}
            )
            for call in calls:
                messages.append(await tool_message(self._registry, call, context))
                tools_called.append(call["function"]["name"])
        return "", tools_called

    def audit_entry(
        self, context: TurnContext, tools_called: list[str]
    ) -> dict[FieldT, EncodableT]:
        """The one audit stream entry a floor turn writes."""
        return {
            "type": "turn",
            "chat_id": str(context.chat_id),
            "turn_id": context.turn_id,
            "outcome": "answered",
            "model": self.model,
            "tool_names": ",".join(tools_called),
        }


class FloorTurn:
    """One turn as a minimal script would write it (see the module docstring)."""

    def __init__(
        self, *, redis: AsyncRedisClient, model: FloorModel, key_prefix: str, stream: str
    ) -> None:
        self._redis = redis
        self._model = model
        self._prefix = key_prefix
        self._stream = stream

    async def reply(self, key: str, text: str, context: TurnContext) -> str:
        """Answer ``text`` in conversation ``key``; returns the model's final text."""
        lock, session = f"{self._prefix}:floor:{key}:lock", f"{self._prefix}:floor:{key}"
        token = secrets.token_hex(16)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(lock, token, nx=True, px=60_000)
            pipe.hmget(session, "v", "d")
            _, (version, data) = await pipe.execute()
        history: list[dict[str, Any]] = json.loads(data) if data else []
        messages = self._model.messages(history[-HISTORY_MESSAGES:], text)
        answer, tools_called = await self._model.answer(messages, context)
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(
                session,
                mapping={"v": int(version or 0) + 1, "d": json.dumps(history, ensure_ascii=False)},
            )
            pipe.expire(session, 86_400)
            pipe.delete(lock)
            await pipe.execute()
        await self._redis.xadd(
            self._stream,
            self._model.audit_entry(context, tools_called),
            maxlen=AUDIT_MAXLEN,
            approximate=True,
        )
        return str(answer)
