"""The offline demo analyst: a deterministic analysis from the conversation's words.

It stands in for a model's Structured Outputs with ``LLM_BACKEND=offline``, so
that ``/analyze`` works in the try-out with no key and no network. It reads the
transcript :class:`~bot.analysis.analyzer.SupportRequestAnalyzer` sends and
answers from keywords: good enough to show the feature, not to rely on.
"""

import re
from collections.abc import Sequence
from typing import Any

import pydantic

from bot.analysis.analyzer import SPEAKERS
from bot.analysis.upset import NEGATIVE_WORDS, URGENT_WORDS
from bot.llm.errors import LLMBadResponseError
from bot.llm.types import Message, StructuredResult, StructuredT

OFFLINE_ANALYST_MODEL = "offline-demo"

# In order of precedence: the first category whose stems the customer used.
_CATEGORY_STEMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("complaint", ("жалоб", "безобраз", "ужасн", "обман", "complain")),
    ("cancellation", ("отмен", "cancel")),
    ("return", ("верн", "возврат", "return", "refund")),
    ("payment", ("оплат", "платеж", "платёж", "деньг", "списал", "карт", "pay")),
    ("delivery", ("доставк", "достав", "курьер", "адрес", "deliver", "shipping")),
    ("order_status", ("заказ", "посылк", "статус", "order", "track")),
    ("product_question", ("товар", "гаранти", "размер", "наличи", "product", "warranty")),
    ("account", ("аккаунт", "парол", "логин", "account", "password")),
)
_LABELS = {
    "order_status": "статус заказа",
    "delivery": "доставка",
    "cancellation": "отмена заказа",
    "return": "возврат",
    "payment": "оплата",
    "product_question": "вопрос о товаре",
    "complaint": "жалоба",
    "account": "учётная запись",
    "other": "другое",
}
_POSITIVE = ("спасибо", "отлично", "супер", "благодар", "thank", "great")
_ORDER_NUMBER = re.compile(r"\b\d{4,10}\b")
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]", re.IGNORECASE)


def _said(transcript: str, role: str) -> list[str]:
    prefix = f"{SPEAKERS[role]}: "
    return [line[len(prefix) :] for line in transcript.splitlines() if line.startswith(prefix)]


def _category(words: str, categories: Sequence[str]) -> str:
    for category, stems in _CATEGORY_STEMS:
        if category in categories and any(stem in words for stem in stems):
            return category
    return "other" if "other" in categories else categories[-1]


def analyse(transcript: str, categories: Sequence[str]) -> dict[str, Any]:
    """The analysis of ``transcript`` as the JSON object a model would write."""
    customer = _said(transcript, "user")
    words = " ".join(customer).lower()
    category = _category(words, categories) if categories else "other"
    negative = any(w in words for w in NEGATIVE_WORDS) or "!!" in words
    positive = any(w in words for w in _POSITIVE)
    sentiment = "negative" if negative else "positive" if positive else "neutral"
    urgent = any(w in words for w in URGENT_WORDS)
    urgency = "high" if urgent or (negative and "!!" in words) else "normal"
    cyrillic, latin = len(_CYRILLIC.findall(words)), len(_LATIN.findall(words))
    lines = transcript.splitlines()
    last_is_bot = bool(lines) and lines[-1].startswith(f"{SPEAKERS['assistant']}: ")
    resolved = last_is_bot and not negative and category != "complaint"
    label = _LABELS.get(category, category)
    number = _ORDER_NUMBER.search(" ".join(customer))
    summary = f"Клиент обратился по теме «{label}»."
    if number is not None:
        summary += f" Номер заказа: {number.group()}."
    language = "en" if latin > cyrillic else "ru"
    return {
        "category": category,
        "sentiment": sentiment,
        "urgency": urgency,
        "language": language,
        "resolved": resolved,
        "summary": summary,
        "next_step": None if resolved else f"Ответить клиенту по теме «{label}».",
        "quality": _quality(transcript, resolved=resolved, negative=negative, language=language),
    }


def _quality(transcript: str, *, resolved: bool, negative: bool, language: str) -> dict[str, Any]:
    """The rubric as the demo reads it: a criterion fails on words, one point each.

    Not resolved, an upset customer (tone), or bot answers in another script than the
    customer's (language); facts and presses are what the tools enforce, so they pass.
    """
    failed = []
    if not resolved:
        failed.append("resolved")
    bot = " ".join(_said(transcript, "assistant")).lower()
    if bot:
        cyrillic, latin = len(_CYRILLIC.findall(bot)), len(_LATIN.findall(bot))
        if ("en" if latin > cyrillic else "ru") != language:
            failed.append("customer_language")
    if negative:
        failed.append("tone")
    return {"score": max(1, 5 - len(failed)), "failed": failed}


class OfflineAnalyst:
    """Answers :meth:`generate_structured` for the analysis schema from the transcript's words."""

    @property
    def model_name(self) -> str:
        """The model name the analyses report."""
        return OFFLINE_ANALYST_MODEL

    async def generate_structured(
        self, messages: Sequence[Message], output: type[StructuredT]
    ) -> StructuredResult[StructuredT]:
        """The analysis of the last user message's transcript, shaped as ``output``."""
        transcript = next(
            (str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"),
            "",
        )
        enum = output.model_json_schema().get("properties", {}).get("category", {}).get("enum")
        categories = [str(c) for c in enum] if isinstance(enum, list) and enum else ["other"]
        try:
            value = output.model_validate(analyse(transcript, categories))
        except pydantic.ValidationError as error:
            raise LLMBadResponseError("the offline analyst cannot answer this schema") from error
        return StructuredResult(value=value, refusal=None, model=OFFLINE_ANALYST_MODEL)
