"""What the benchmark's scripted model answers: a direct answer or a two-tool turn.

The customer's text decides: a message containing :data:`TWO_TOOLS` makes the
model call ``get_order_status`` and then ``get_support_hours`` before answering;
any other message gets a direct answer. Requests without tools are summaries.
Answers are of a realistic length (a few hundred characters), so that history
and summaries grow as they would in a real conversation.
"""

from typing import Any

from bot.testing.openai_server import Reply, text_answer, tool_call_answer

TWO_TOOLS = "[два инструмента]"

ANSWER = (
    "Спасибо за вопрос! Ваш заказ передан в службу доставки и ожидается в ближайшие дни. "
    "Если курьер не свяжется с вами до конца недели, напишите нам: мы проверим отправление "
    "и предложим удобное время доставки. Поддержка работает ежедневно с 9 до 21 часа."
)
SUMMARY = (
    "Клиент уточнял статус заказа 8041 и время работы поддержки; ему объяснили, что заказ "
    "в пути, и дали часы работы. Открытых вопросов нет."
)


def is_summary_request(body: Any) -> bool:
    """A summary request: no tools, and the material block of bot.engine.summary as the user text.

    (A turn's last allowed step offers no tools either.)
    """
    if body.get("tools"):
        return False
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return bool(users) and str(users[-1].get("content") or "").startswith("<previous_summary>")


def bench_responder(body: Any) -> Reply:
    """The scripted model of every benchmark scenario."""
    messages: list[dict[str, Any]] = body["messages"]
    if is_summary_request(body):
        return text_answer(SUMMARY)
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    if TWO_TOOLS not in str(messages[last_user]["content"]):
        return text_answer(ANSWER)
    tool_results = sum(1 for message in messages[last_user:] if message["role"] == "tool")
    if tool_results == 0:
        return tool_call_answer("get_order_status", {"order_id": "8041"})
    if tool_results == 1:
        return tool_call_answer("get_support_hours", {})
    return text_answer(ANSWER)
