"""``python -m bench.analysis``: what one request analysis costs in model tokens.

For a set of demo conversations (one to six turns, in the shop's usual topics)
it builds the exact request :class:`~bot.analysis.analyzer.SupportRequestAnalyzer`
sends (the instruction, the transcript, the strict JSON schema Structured
Outputs adds) and estimates its prompt tokens with the project's estimator
(``bot/llm/tokens.py``: characters / 3, calibrated on Russian prose), and the
answer's tokens from the offline analyst's JSON for the same conversation.
No model and no network: an estimate to plan ``ANALYSIS_MODEL``'s cost with.
"""

import asyncio
import json
from datetime import UTC, datetime

from bot.analysis.analyzer import SupportRequestAnalyzer, shaped_for
from bot.analysis.model import DEFAULT_CATEGORIES
from bot.analysis.offline import OfflineAnalyst
from bot.llm.tokens import estimate_messages_tokens, estimate_text_tokens
from bot.sessions.models import ConversationSession
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


def main() -> None:
    rows = asyncio.run(measure())
    print(f"{'conversation':<36} {'prompt':>7} {'answer':>7} {'total':>7}")
    for name, asked, answered in rows:
        print(f"{name:<36} {asked:>7} {answered:>7} {asked + answered:>7}")


if __name__ == "__main__":
    main()
