"""``python -m bench.analysis``: what one request analysis costs in model tokens.

For a set of demo conversations (one to six turns, in the shop's usual topics)
it builds the exact request :class:`~bot.analysis.analyzer.SupportRequestAnalyzer`
sends (the instruction, the transcript, the strict JSON schema Structured
Outputs adds) and estimates its prompt tokens with the project's estimator
(``bot/llm/tokens.py``: characters / 3, calibrated on Russian prose), and the
answer's tokens from the offline analyst's JSON for the same conversation.
No model and no network: an estimate to plan ``ANALYSIS_MODEL``'s cost with.

``--burst N`` measures the other figure: N conversations go idle at once in a
private redis-server; two sweepers (two processes' worth of parts, each its own
Redis client and ``ANALYSIS_CONCURRENCY``) analyse them through the real openai SDK
against the scripted server answering each analysis after ``--latency`` seconds;
it prints the share analysed within a minute and when the last one was.
"""

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from bench.stack import BenchRedis
from bot.analysis.analyzer import SupportRequestAnalyzer, shaped_for
from bot.analysis.idle_analysis import IdleAnalysis
from bot.analysis.schedule import AnalysisSchedule
from bot.analysis.sweeper import AnalysisSweeper
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.tokens import estimate_messages_tokens, estimate_text_tokens
from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.settings import DEFAULT_CATEGORIES
from bot.storage.keys import RedisKeys
from bot.testing.openai_server import ScriptedOpenAIServer, delay, text_answer
from bot.testing.recording_audit_sink import RecordingAuditSink
from bot.tryout.analyst import OfflineAnalyst
from prompts.registry import ANALYSIS_PROMPT_ID, build_default_prompt_registry

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)

CONVERSATIONS: dict[str, list[tuple[str, str]]] = {
    "order status, 1 turn": [
        ("Где заказ 8041?", "Заказ 8041: передан в службу доставки. Ожидаемая дата: 5 декабря."),
    ],
    "return, 2 turns": [
        ("Можно вернуть кофемашину?", "Кофемашину можно вернуть в течение 14 дней."),
        ("А как оформить?", "Откройте «Мои заказы», выберите заказ и нажмите «Вернуть товар»."),
    ],
    "cancellation with a card, 3 turns": [
        ("Хочу отменить заказ 8042", "Отменить заказ 8042? Подтвердите кнопкой ниже."),
        ("Да", "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней."),
        ("Спасибо!", "Рады помочь!"),
    ],
    "complaint, 6 turns": [
        ("Курьер не приехал, заказ 8041", "Заказ 8041 передан в доставку, курьер в пути."),
        ("Я ждал весь день!!", "Понимаю, это неприятно. Могу передать вопрос сотруднику."),
        ("Где он сейчас?", "Курьер в пути; точное время доставки служба не сообщает."),
        ("Это безобразие, срочно", "Передаю ваш вопрос сотруднику, он ответит в этом чате."),
        ("Сколько ждать?", "Сотрудники отвечают с 9 до 21 по Москве, обычно за 15 минут."),
        ("Ладно", "Сотрудник скоро ответит."),
    ],
}


def conversation(turns: list[tuple[str, str]]) -> ConversationSession:
    session = ConversationSession.start("bench", NOW, "support_chat", "1.5.0")
    for question, answer in turns:
        session = session.with_turn(question, answer, NOW, "1.5.0")
    return session


async def measure() -> list[tuple[str, int, int]]:
    prompt = build_default_prompt_registry().get(ANALYSIS_PROMPT_ID, "1.0.0")
    analyzer = SupportRequestAnalyzer(client=OfflineAnalyst(), prompt=prompt)
    schema = json.dumps(shaped_for(DEFAULT_CATEGORIES).model_json_schema(), ensure_ascii=False)
    rows = []
    for name, turns in CONVERSATIONS.items():
        session = conversation(turns)
        asked = estimate_messages_tokens(analyzer.messages(session)) + estimate_text_tokens(schema)
        outcome = await analyzer.analyze(session)
        answered = estimate_text_tokens(outcome.analysis.model_dump_json())
        rows.append((name, asked, answered))
    return rows


async def burst(conversations: int, latency: float, concurrency: int) -> None:
    """Analyse ``conversations`` idle at once with two sweepers; print how fast it went."""
    answer = json.dumps(
        {
            "category": "order_status",
            "sentiment": "neutral",
            "urgency": "normal",
            "language": "ru",
            "resolved": True,
            "summary": "Клиент спросил про заказ.",
            "next_step": None,
        },
        ensure_ascii=False,
    )
    with BenchRedis() as redis_server:
        async with ScriptedOpenAIServer() as model:
            model.responder = lambda _body: delay(latency, text_answer(answer))
            sweepers: list[AnalysisSweeper] = []
            clients: list[Any] = []
            sinks: list[RecordingAuditSink] = []
            prompt = build_default_prompt_registry().get(ANALYSIS_PROMPT_ID, "1.0.0")
            for _ in range(2):
                client = aioredis.Redis.from_url(redis_server.url)
                keys = RedisKeys("bench")
                sessions = RedisSessionStore(
                    client, keys=keys, ttl_seconds=3600, archive_ttl_seconds=3600
                )
                llm = OpenAIChatClient.create(
                    api_key="bench",
                    base_url=model.base_url,
                    model="bench",
                    timeout_seconds=30,
                    max_retries=0,
                )
                schedule = AnalysisSchedule(client, keys=keys, idle_seconds=0, ttl_seconds=3600)
                analyzer = SupportRequestAnalyzer(client=llm, prompt=prompt)
                sinks.append(RecordingAuditSink())
                idle = IdleAnalysis(
                    analyzer=analyzer,
                    schedule=schedule,
                    sessions=sessions,
                    audit=sinks[-1],
                    timeout_seconds=30,
                )
                sweepers.append(
                    AnalysisSweeper(
                        schedule=schedule,
                        analysis=idle,
                        period_seconds=0.2,
                        concurrency=concurrency,
                    )
                )
                clients.append((client, llm, sessions, schedule))
            _, _, sessions, schedule = clients[0]
            turns = CONVERSATIONS["order status, 1 turn"]
            for number in range(conversations):
                key = f"bench-{number}"
                locked = await sessions.acquire(key, lease_seconds=30, wait_seconds=1)
                await sessions.commit(
                    locked, conversation(turns).model_copy(update={"conversation_key": key})
                )
                await schedule.answered(key)
            started = time.monotonic()
            running = [asyncio.create_task(sweeper.run()) for sweeper in sweepers]
            done_at: list[float] = []
            while len(done_at) < conversations and time.monotonic() - started < 300:
                await asyncio.sleep(0.25)
                analysed = sum(
                    row.get("event") == "analysed" for sink in sinks for row in sink.rows
                )
                done_at += [time.monotonic() - started] * (analysed - len(done_at))
            for sweeper in sweepers:
                sweeper.stop()
            await asyncio.gather(*running)
            for client, llm, _, _ in clients:
                await llm.close()
                await client.aclose()
    within = sum(1 for moment in done_at if moment <= 60)
    print(
        f"{conversations} conversations idle at once, model latency {latency:.1f} s, "
        f"2 processes x {concurrency} analyses: {within / conversations:.0%} analysed within "
        f"a minute, the last after {max(done_at, default=float('nan')):.1f} s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analysis")
    parser.add_argument("--burst", type=int, default=0, help="conversations idle at once")
    parser.add_argument("--latency", type=float, default=1.0, help="model seconds per analysis")
    parser.add_argument("--concurrency", type=int, default=16, help="ANALYSIS_CONCURRENCY")
    args = parser.parse_args(argv)
    if args.burst:
        asyncio.run(burst(args.burst, args.latency, args.concurrency))
        return
    rows = asyncio.run(measure())
    print(f"{'conversation':<36} {'prompt':>7} {'answer':>7} {'total':>7}")
    for name, asked, answered in rows:
        print(f"{name:<36} {asked:>7} {answered:>7} {asked + answered:>7}")


if __name__ == "__main__":
    main()
