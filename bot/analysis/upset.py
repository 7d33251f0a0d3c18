"""Whether a customer's message reads upset: a cheap local word check, no model asked.

It only decides whether an early analysis is worth scheduling (the escalation
offer, :mod:`bot.analysis.schedule`), never what the analysis says. The try-out's
offline analyst (:mod:`bot.tryout.analyst`) reads the same words as negative or
urgent, so the two agree in the try-out.
"""

NEGATIVE_WORDS: tuple[str, ...] = (
    "ужас",
    "плох",
    "безобраз",
    "недовол",
    "обман",
    "разочар",
    "возмут",
    "не работает",
    "terrible",
    "awful",
    "angry",
    "disappointed",
    "scam",
)
"""Stems and words of an upset message, Russian and English (in lower case)."""

URGENT_WORDS: tuple[str, ...] = (
    "срочно",
    "немедленно",
    "сейчас же",
    "urgent",
    "asap",
    "immediately",
)
"""Words of an urgent message (in lower case)."""


def looks_upset(text: str) -> bool:
    """A cheap local guess that a customer's message is angry or urgent (no model asked)."""
    words = text.lower()
    return "!!" in words or any(w in words for w in NEGATIVE_WORDS + URGENT_WORDS)
