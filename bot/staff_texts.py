"""Texts of staff assist for support staff in their topics: suggestions, reasons, reviews.

Marked with :func:`~bot.customer_texts.N_` like the customer's texts, so ``scripts/i18n``
extracts them into the same catalogs; the staff desk shows them through the default
language's catalog (``DEFAULT_LANGUAGE``), a translation away from any staff's language.
Nothing here is ever sent to a customer. The older staff texts of the handoff
(``bot/handoff/``, the header's labels) are not catalogued yet.
"""

from typing import Final

from bot.customer_texts import N_, Translate

HANDOFF_REASON_LABELS: Final[dict[str, str]] = {
    "customer_asked": N_("клиент попросил человека"),
    "bot_could_not_answer": N_("бот не смог ответить"),
    "repeated_failures": N_("несколько сбоев подряд"),
    "upset_customer": N_("клиент расстроен"),
    "action_needs_person": N_("действие требует сотрудника"),
    "policy": N_("так требуют правила магазина"),
    "other": N_("другое"),
}
"""Each handoff reason as staff read it in the topic's first message."""

HANDOFF_REASON_LINE = N_("Причина передачи: {reason}")

SUGGESTION_HEADER = N_("💡 Предлагаемый ответ (язык клиента: {language}):")
SUGGESTION_ACTION = N_(
    "Нужно действие: {action}. Бот ничего не делает сам: кнопка ниже отправит клиенту "
    "карточку, и действие выполнится только по нажатию клиента."
)
SUGGESTION_SEND = N_("Отправить как есть")
SUGGESTION_SEND_CARD = N_("Отправить клиенту карточку действия")
SUGGESTION_SENT = N_("✅ Отправлено клиенту как есть.")
SUGGESTION_CARD_SENT = N_("📨 Клиенту отправлена карточка действия: выполнится по его нажатию.")
SUGGESTION_CARD_REFUSED = N_("Карточку действия отправить не удалось: {code}.")
SUGGESTION_FAILED = N_("Подсказка ответа не получилась ({kind}); напишите ответ сами.")
SUGGESTION_OUT_OF_DATE = N_("Подсказка устарела")
SUGGESTION_NOT_SAVED = N_("Нажатие не сработало; нажмите ещё раз.")

QUALITY_REVIEW_HEADER = N_(
    "Проверка качества: разговор бота получил оценку {score} из 5 (порог {threshold})."
)
QUALITY_REVIEW_FAILED = N_("Не выполнены критерии: {criteria}.")
QUALITY_REVIEW_TURNS = N_("Коды ходов: {turns}")
QUALITY_REVIEW_HINT = N_("Это не передача разговора: клиенту ничего не отправлено.")

QUALITY_CRITERIA_LABELS: Final[dict[str, str]] = {
    "resolved": N_("вопрос клиента решён"),
    "facts_from_tools": N_("факты только из инструментов и статей"),
    "actions_with_press": N_("действия только по нажатию клиента"),
    "customer_language": N_("на языке клиента"),
    "tone": N_("тон"),
}
"""The quality rubric's criteria as staff read them (the audit keeps the names only)."""


def reason_label(reason: str, gettext: Translate) -> str:
    """``reason`` as staff read it (an unknown one as it is)."""
    label = HANDOFF_REASON_LABELS.get(reason)
    return gettext(label) if label is not None else reason


ACTION_CHECK_NOTE = N_(
    "Проверьте действие {action_id} ({tool}): клиент подтвердил {description}; магазин мог "
    "его выполнить, ответ не получен. Клиенту сказано, что итог проверяется."
)
"""The topic's note on a confirmed action whose outcome is unknown (what to check, and what
the customer confirmed: the card's text on one line)."""
