"""The Redis stream sink against a real redis-server: fields, privacy, trimming, failures."""

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from bot.audit.pseudonym import ChatPseudonymizer, chat_pseudonym
from bot.audit.redis_sink import RedisStreamAuditSink
from bot.audit.schema import AuditEntry, ToolAuditEntry, TurnAuditEntry
from bot.chat_errors import ChatServiceError
from bot.llm.types import LLMResult
from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.testing.audit_entries import simple_turn, tool_entry, turn_entry
from bot.testing.chat_harness import ChatHarness
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, scripted
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutionError, ToolExecutionRecord, ToolExecutor
from tools.registry import RegisteredTool, ToolRegistry
from tools.shop_data import ShopData
from turn import ToolCall, TurnContext, TurnOutcome, Usage


@pytest.fixture
def redis_client(storage_client: AsyncRedisClient) -> AsyncRedisClient:
    """The factory's client, once on standalone Redis and once on the cluster."""
    return storage_client


STREAM = "support:audit"
TOOL_FIELDS = [
    "type", "call_id", "tool_name", "status", "error_code", "started_at",
    "duration_ms", "chat_id", "turn_id", "step",
]  # fmt: skip
TURN_FIELDS = [
    "type", "chat_id", "turn_id", "outcome", "model", "model_steps", "tool_calls",
    "tool_names", "prompt_tokens", "completion_tokens", "total_tokens", "latency_ms",
    "queue_ms", "prompt_id", "prompt_version", "input_kind",
]  # fmt: skip


async def _read_all(client: aioredis.Redis, stream: str = STREAM) -> list[dict[str, str]]:
    # The fixture's client returns bytes; redis-py's stubs cannot know that.
    rows: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(stream)  # type: ignore[assignment]
    return [{key.decode(): value.decode() for key, value in fields.items()} for _, fields in rows]


# ---------------------------------------------------------------- tools for every status


class _NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Answer(BaseModel):
    value: str


async def _slow(_: _NoArguments) -> _Answer:
    await asyncio.sleep(30)
    return _Answer(value="late")


def _crash(_: _NoArguments) -> _Answer:
    raise RuntimeError("SECRET-INTERNAL-DETAIL database password is hunter2")


def _wrong_type(_: _NoArguments) -> _Answer:
    return {"value": "a dict"}  # type: ignore[return-value]


@pytest.fixture
def registry() -> ToolRegistry:
    """The four real tools plus one that hangs, one that crashes, one that returns a dict."""
    registry = build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))
    registry.register(RegisteredTool("slow_tool", "Hangs.", _NoArguments, _slow, 0.05))
    registry.register(RegisteredTool("crashing_tool", "Crashes.", _NoArguments, _crash))
    registry.register(
        RegisteredTool("wrong_type_tool", "Returns a dict.", _NoArguments, _wrong_type)
    )
    return registry


@pytest.fixture
def executor(registry: ToolRegistry) -> Iterator[ToolExecutor]:
    """A real executor over ``registry``."""
    executor = ToolExecutor(registry, max_workers=2)
    yield executor
    executor.close()


async def _execute(executor: ToolExecutor, name: str, arguments: str) -> ToolExecutionRecord:
    call = ToolCall(id=f"call_{name}", name=name, arguments=arguments)
    context = TurnContext(
        conversation_key="tg:100200300", chat_id=100200300, user_id=1, turn_id="TURNSTATUS"
    )
    try:
        return (await executor.execute(call, context)).audit
    except ToolExecutionError as error:
        return error.audit


@pytest.fixture
async def sink(redis_client: aioredis.Redis) -> RedisStreamAuditSink:
    """A sink over the suite's Redis with the default length limit."""
    return RedisStreamAuditSink(redis_client, STREAM, 1_000_000)


# ---------------------------------------------------------------- fields of each status


@pytest.mark.parametrize(
    ("tool", "arguments", "status", "error_code"),
    [
        ("search_products", '{"query": "кофемашина"}', "success", ""),
        ("get_order_status", '{"order_id": "0001"}', "business_error", "order_not_found"),
        ("drop_database", "{}", "rejected", "unknown_tool"),
        ("get_order_status", '{"order_id": "eighty"}', "rejected", "invalid_arguments"),
        ("slow_tool", "{}", "timeout", "timeout"),
        ("crashing_tool", "{}", "technical_error", "technical_error"),
        ("wrong_type_tool", "{}", "technical_error", "invalid_result_type"),
    ],
)
async def test_each_tool_status_is_one_entry_with_the_flat_fields(
    executor: ToolExecutor,
    sink: RedisStreamAuditSink,
    redis_client: aioredis.Redis,
    *,
    tool: str,
    arguments: str,
    status: str,
    error_code: str,
) -> None:
    before = datetime.now(UTC)
    record = await _execute(executor, tool, arguments)
    await sink.write(
        [ToolAuditEntry.from_record(record, chat_id="100200300", turn_id="TURNSTATUS", step=2)]
    )

    (fields,) = await _read_all(redis_client)
    assert list(fields) == TOOL_FIELDS
    assert fields["type"] == "tool"
    assert fields["call_id"] == f"call_{tool}"
    assert fields["tool_name"] == tool
    assert fields["status"] == status
    assert fields["error_code"] == error_code
    started_at = datetime.fromisoformat(fields["started_at"])
    assert started_at.utcoffset() == timedelta(0)
    assert before <= started_at <= datetime.now(UTC)
    assert float(fields["duration_ms"]) >= 0
    assert (fields["chat_id"], fields["turn_id"], fields["step"]) == (
        "100200300",
        "TURNSTATUS",
        "2",
    )
    assert sink.lost_entries == 0


async def test_failed_turn_entry_names_the_failure_kind_and_leaves_unknown_tokens_empty(
    sink: RedisStreamAuditSink, redis_client: aioredis.Redis
) -> None:
    entries: list[AuditEntry] = [
        tool_entry("FAILEDTURN", tool_name="slow_tool", status="timeout", error_code="timeout"),  # type: ignore[arg-type]
        TurnAuditEntry(
            chat_id="100200300",
            turn_id="FAILEDTURN",
            outcome=TurnOutcome.TOOL_FAILURE,
            model="gpt-4.1-mini",
            model_steps=1,
            tool_calls=1,
            tool_names=("slow_tool",),
            usage=Usage(prompt_tokens=None, completion_tokens=None, total_tokens=None),
            latency_ms=2051.25,
            prompt_id="support_chat",
            prompt_version="1.2.0",
        ),
    ]
    await sink.write(entries)

    tool, turn = await _read_all(redis_client)
    assert tool["type"] == "tool"
    assert list(turn) == TURN_FIELDS
    assert turn == {
        "type": "turn",
        "chat_id": "100200300",
        "turn_id": "FAILEDTURN",
        "outcome": "tool_failure",
        "model": "gpt-4.1-mini",
        "model_steps": "1",
        "tool_calls": "1",
        "tool_names": "slow_tool",
        "prompt_tokens": "",
        "completion_tokens": "",
        "total_tokens": "",
        "latency_ms": "2051.250",
        # Not a worker's turn (the console): it never waited in a queue.
        "queue_ms": "",
        "prompt_id": "support_chat",
        "prompt_version": "1.2.0",
        # A typed message; a voice message's length and transcription time only for voice.
        "input_kind": "text",
    }


# ---------------------------------------------------------------- privacy


SECRETS = ("ZEBRA-ARGUMENT", "QUOKKA-CUSTOMER", "OKAPI-MODEL", "hunter2", "SECRET")
USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _scripted(turns: list[list[tuple[ToolCall, ...] | str]]) -> ScriptedClient:
    """A model that plays each turn's steps in order: tool calls, then a final text."""
    return scripted(
        *(
            LLMResult(step, None, "stop", (), "scripted", "resp", USAGE)
            if isinstance(step, str)
            else LLMResult(None, None, "tool_calls", step, "scripted", "resp", USAGE)
            for steps in turns
            for step in steps
        )
    )


async def test_no_argument_customer_or_model_text_reaches_the_stream(
    registry: ToolRegistry, redis_client: aioredis.Redis
) -> None:
    """Turns through ``ChatService.reply``; every audit field is searched for the secrets."""
    secret_query = json.dumps({"query": "ZEBRA-ARGUMENT-SECRET"})
    secret_order = json.dumps({"order_id": "ZEBRA-ARGUMENT-SECRET"})
    turns: list[list[tuple[ToolCall, ...] | str]] = [
        [(_call("c1", "search_products", secret_query),), "OKAPI-MODEL-SECRET answer"],
        # Rejected calls go back to the model, which then answers.
        [(_call("c2", "get_order_status", secret_order),), "Такого заказа нет."],
        [(_call("c3", "crashing_tool", "{}"),)],
        [(_call("c4", "ZEBRA-ARGUMENT-SECRET", "{}"),), "Так я не умею."],
    ]
    client = _scripted(turns)
    harness = ChatHarness(redis_client, client, prefix="privacy", registry=registry)
    customer_text = "Где мой заказ? QUOKKA-CUSTOMER-SECRET"
    outcomes = []
    try:
        for index in range(len(turns)):
            try:
                await harness.ask(f"chat-{index}", customer_text, user_id=1)
                outcomes.append("answered")
            except ChatServiceError as error:
                outcomes.append(error.kind)
        history = await harness.history("chat-0")
        rows = await harness.audit_entries()
    finally:
        await harness.close()

    # The secrets were really there: the model saw the customer text, the history keeps it.
    assert outcomes == ["answered", "answered", "tool_failure", "answered"]
    assert all("QUOKKA-CUSTOMER-SECRET" in str(request[0]) for request in client.requests)
    # A rejection told to the model names the rule, never the value the model wrote.
    rejections = [
        str(message["content"])
        for request in client.requests
        for message in request[0]
        if message.get("role") == "tool" and '"ok": false' in str(message.get("content"))
    ]
    assert len(rejections) == 2
    assert all("ZEBRA-ARGUMENT-SECRET" not in text for text in rejections)
    assert history == [("user", customer_text), ("assistant", "OKAPI-MODEL-SECRET answer")]
    assert [row["type"] for row in rows] == ["tool", "turn"] * 4
    # A made-up tool name is model text too: the entry says what happened without it.
    assert (rows[6]["status"], rows[6]["error_code"]) == ("rejected", "unknown_tool")
    assert rows[6]["tool_name"] == rows[7]["tool_names"] == "(invalid name)"
    for row in rows:
        for name, value in row.items():
            for secret in SECRETS:
                assert secret not in name
                assert secret not in value, f"{secret!r} leaked into {name}={value!r}"


async def test_pseudonymised_chat_ids_never_show_the_real_id(
    redis_client: aioredis.Redis,
) -> None:
    key = b"pseudonym-key-0123456789"
    sink = RedisStreamAuditSink(
        redis_client, STREAM, 1_000_000, pseudonymizer=ChatPseudonymizer(key)
    )
    await sink.write(simple_turn("PSEUDO0001", chat_id="987654321", tools=("get_order_status",)))

    rows = await _read_all(redis_client)
    assert [row["chat_id"] for row in rows] == [chat_pseudonym("987654321", key)] * 2
    assert all("987654321" not in value for row in rows for value in row.values())


async def test_an_invented_tool_name_is_kept_only_when_shaped_like_a_tool_name(
    sink: RedisStreamAuditSink, redis_client: aioredis.Redis
) -> None:
    """``get_weather`` tells staff what the model wanted; free text is not written."""
    rejected = {"status": "rejected", "error_code": "unknown_tool"}
    await sink.write(
        [
            tool_entry("INVENTED01", tool_name="get_weather", **rejected),  # type: ignore[arg-type]
            tool_entry("INVENTED01", tool_name="Иван Петров, паспорт", **rejected),  # type: ignore[arg-type]
            turn_entry("INVENTED01", tool_names=("get_weather", "Иван Петров, паспорт")),
        ]
    )

    tool_ok, tool_text, turn = await _read_all(redis_client)
    assert tool_ok["tool_name"] == "get_weather"
    assert tool_text["tool_name"] == "(invalid name)"
    assert turn["tool_names"] == "get_weather,(invalid name)"


# ---------------------------------------------------------------- retention


async def test_maxlen_trims_approximately_and_keeps_every_newest_entry(
    redis_client: aioredis.Redis,
) -> None:
    sink = RedisStreamAuditSink(redis_client, STREAM, maxlen=1000)
    for turn in range(300):
        await sink.write(
            [tool_entry(f"TRIM{turn:06d}", call_id=f"c{turn}_{i}") for i in range(9)]
            + [turn_entry(f"TRIM{turn:06d}")]
        )

    length = await redis_client.xlen(STREAM)
    # "~" trims whole nodes only: never below the limit, never much above it.
    assert 1000 <= length <= 1100
    newest = await _read_all(redis_client)
    assert newest[-1]["turn_id"] == "TRIM000299"
    assert {row["turn_id"] for row in newest[-1000:]} == {f"TRIM{t:06d}" for t in range(200, 300)}
    assert sink.lost_entries == 0


async def test_max_age_trims_entries_older_than_the_age(redis_client: aioredis.Redis) -> None:
    two_days_ago = int((datetime.now(UTC) - timedelta(days=2)).timestamp() * 1000)
    for index in range(500):
        await redis_client.xadd(
            STREAM, {"type": "tool", "turn_id": "OLD"}, id=f"{two_days_ago}-{index}"
        )
    sink = RedisStreamAuditSink(redis_client, STREAM, 1_000_000, max_age=timedelta(days=1))

    await sink.write(simple_turn("NEWTURN001"))

    rows = await _read_all(redis_client)
    old = [row for row in rows if row["turn_id"] == "OLD"]
    # "~" keeps a node that also holds new entries: at most one node of old ones remains.
    assert len(old) < 100
    assert [row["turn_id"] for row in rows if row["turn_id"] != "OLD"] == ["NEWTURN001"] * 2


# ---------------------------------------------------------------- no loss, and loss


@pytest.mark.standalone_only
async def test_no_entry_is_lost_while_redis_is_up(
    redis_server: RedisServer, redis_client: aioredis.Redis
) -> None:
    """200 turns written at once: every entry arrives, each turn's in its own order.

    The client is built as production must build it: a pool that waits for a free
    connection (redis-py's default pool raises once 100 connections are busy, which
    would lose the audit of every turn past the hundredth).
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        redis_server.url, max_connections=20, timeout=10
    )
    client = aioredis.Redis.from_pool(pool)
    sink = RedisStreamAuditSink(client, STREAM, 1_000_000)
    turns = {
        f"LOSS{index:06d}": [
            tool_entry(f"LOSS{index:06d}", call_id=f"call_{step}", step=step)
            for step in range(1, index % 4 + 1)
        ]
        + [turn_entry(f"LOSS{index:06d}")]
        for index in range(200)
    }
    try:
        await asyncio.gather(*(sink.write(entries) for entries in turns.values()))
    finally:
        await client.aclose()

    rows = await _read_all(redis_client)
    expected = sum(len(entries) for entries in turns.values())
    assert len(rows) == expected
    assert sink.lost_entries == 0
    for turn_id, entries in turns.items():
        written = [
            (row["type"], row.get("call_id", "")) for row in rows if row["turn_id"] == turn_id
        ]
        assert written == [
            (entry.to_fields()["type"], entry.to_fields().get("call_id", "")) for entry in entries
        ]


def _client_without_retries(url: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=2)


@pytest.fixture
async def own_client(own_redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """A client (no retries) to this test's own server."""
    client = _client_without_retries(own_redis_server.url)
    yield client
    await client.aclose()


async def test_entries_redis_missed_are_kept_logged_and_written_when_it_is_back(
    own_redis_server: RedisServer,
    own_client: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = RedisStreamAuditSink(own_client, STREAM, 1_000_000)
    await sink.write(simple_turn("BEFOREDOWN"))
    own_redis_server.stop()

    with caplog.at_level(logging.WARNING, logger="bot.audit.redis_sink"):
        await sink.write(simple_turn("WHILEDOWN1", tools=("get_order_status", "search_products")))
        await sink.write(simple_turn("WHILEDOWN2"))

    assert (sink.pending_entries, sink.lost_entries) == (5, 0)
    first, second = (record.getMessage() for record in caplog.records)
    assert "3 entries not written yet" in first
    assert "turns WHILEDOWN1" in first
    assert "ConnectionError" in first
    # The entries themselves are in the line, so nothing about them is lost with the process.
    logged = json.loads(first.split("entries: ", 1)[1])
    assert [row["type"] for row in logged] == ["tool", "tool", "turn"]
    assert "5 pending" in second

    own_redis_server.start()
    await sink.write(simple_turn("AFTERUP001"))
    rows = await _read_all(own_client)
    # (The restarted test Redis keeps no data, so BEFOREDOWN is gone with it.)
    assert [row["turn_id"] for row in rows] == [
        *["WHILEDOWN1"] * 3,
        *["WHILEDOWN2"] * 2,
        "AFTERUP001",
        "AFTERUP001",
    ]
    # A delayed entry says when it was due; a timely one has no such field.
    assert all("queued_at" in row for row in rows[:5])
    assert not any("queued_at" in row for row in rows[5:])
    assert (sink.pending_entries, sink.lost_entries) == (0, 0)


async def test_pending_entries_are_bounded_and_the_oldest_dropped(
    own_redis_server: RedisServer,
    own_client: aioredis.Redis,
) -> None:
    sink = RedisStreamAuditSink(own_client, STREAM, 1_000_000, max_pending=3)
    own_redis_server.stop()
    await sink.write(simple_turn("DOWNFIRST1"))
    await sink.write(simple_turn("DOWNSECOND"))
    assert (sink.pending_entries, sink.lost_entries) == (3, 1)

    own_redis_server.start()
    await sink.flush()
    rows = await _read_all(own_client)
    assert [row["turn_id"] for row in rows] == ["DOWNFIRST1", "DOWNSECOND", "DOWNSECOND"]
    assert sink.pending_entries == 0


async def test_a_key_of_the_wrong_type_loses_the_entries_without_an_exception(
    redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await redis_client.set(STREAM, "not a stream")
    sink = RedisStreamAuditSink(redis_client, STREAM, 1_000_000)
    with caplog.at_level(logging.WARNING, logger="bot.audit.redis_sink"):
        await sink.write(simple_turn("WRONGTYPE1"))
    assert sink.lost_entries == 2
    assert "WRONGTYPE" in caplog.records[0].getMessage()


async def test_timeout_bounds_a_write_to_a_redis_that_never_answers() -> None:
    """A listener that accepts connections and never replies stands in for a hung Redis."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        client = _client_without_retries(f"redis://127.0.0.1:{port}/0")
        try:
            sink = RedisStreamAuditSink(client, STREAM, 1_000_000, timeout_seconds=0.2)
            await asyncio.wait_for(sink.write(simple_turn("HUNGREDIS1")), timeout=10)
        finally:
            await client.aclose()
    # Not known to be written: kept for the next write (which may then repeat it).
    assert (sink.pending_entries, sink.lost_entries) == (2, 0)


async def test_an_empty_write_sends_nothing(
    sink: RedisStreamAuditSink, redis_client: aioredis.Redis
) -> None:
    await sink.write([])
    assert await redis_client.exists(STREAM) == 0
    assert sink.lost_entries == 0
