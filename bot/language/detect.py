"""Which language a conversation is in: the customer's own words first, then Telegram's.

Decided per message without any extra Redis read: the stored language and whether
the customer chose it come with the session the worker read with its job.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Letters of a script that name one enabled language each (ru and en: Cyrillic and Latin).
# A script shared by several enabled languages (uk and ru) cannot tell them apart: the
# stored language or Telegram's then decides.
_SCRIPT_OF = {"ru": "cyrillic", "uk": "cyrillic", "kk": "cyrillic", "be": "cyrillic"}
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_LATIN = re.compile("[A-Za-z]")
# Words that are no language's: commands, mentions, links.
_NOT_WORDS = ("/", "@", "http://", "https://", "www.")
# A message's first characters that decide (a long message costs what a short one does).
SAMPLE_CHARS = 300
# Fewer letters than this say nothing about the language ("ok", "1234").
MIN_LETTERS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class LanguagePolicy:
    """The enabled languages (``LANGUAGES``) and the default (``DEFAULT_LANGUAGE``)."""

    languages: tuple[str, ...]
    default: str

    def decide(
        self,
        *,
        stored: str | None,
        chosen: bool,
        text: str | None,
        telegram_code: str | None,
    ) -> str:
        """The conversation's language for this message.

        Chosen with ``/language``: kept. Otherwise the message's own script when all its
        words are written in it and it names exactly one enabled language (a customer with
        an English Telegram who writes in Russian gets Russian); else the stored language
        (a Russian message naming «AirPods Pro Max» stays Russian); else Telegram's
        ``language_code`` when enabled; else the default.
        """
        if chosen and stored in self.languages:
            return stored
        written = self.of_text(text or "")
        if written is not None:
            return written
        if stored in self.languages:
            return stored
        code = self.code_of(telegram_code or "")
        if code is not None:
            return code
        return self.default

    def code_of(self, tag: str) -> str | None:
        """The enabled language a tag names: ``en``, ``EN``, ``en-US`` and ``en_GB`` name ``en``.

        A region or script subtag (Telegram's ``language_code``, what a customer types
        after ``/language``) narrows a language the bot has one catalog for: the base
        language's. ``None`` when neither the tag nor its base language is enabled.
        """
        wanted = tag.strip().lower().replace("_", "-")
        for code in (wanted, wanted.split("-")[0]):
            if code and code in self.languages:
                return code
        return None

    def of_text(self, text: str) -> str | None:
        """The one enabled language the text's words are written in, if they say so.

        Each word counts for the script most of its letters are in. A message with
        words in two scripts («Где мой заказ с AirPods Pro Max?») names two languages,
        so it decides nothing: the stored language (or Telegram's) stays. Commands,
        mentions and links are no one's language ("/start", "@shop_bot"), nor are a
        command's arguments ("/language de-DE", "/start promo_spring"). The first
        :data:`SAMPLE_CHARS` characters are enough to tell, and bound the cost.
        """
        if text.lstrip().startswith("/"):
            return None
        scripts: set[str] = set()
        letters = 0
        for word in text[:SAMPLE_CHARS].split():
            if word.startswith(_NOT_WORDS):
                continue
            # Regular expressions count in C: a 4,000-character message costs microseconds.
            cyrillic = len(_CYRILLIC.findall(word))
            latin = len(_LATIN.findall(word))
            if cyrillic + latin == 0:
                continue
            letters += cyrillic + latin
            scripts.add("cyrillic" if cyrillic > latin else "latin")
        if letters < MIN_LETTERS or len(scripts) != 1:
            return None
        return _only(self.languages, scripts.pop())


def _only(languages: Sequence[str], script: str) -> str | None:
    matching = [code for code in languages if _SCRIPT_OF.get(code, "latin") == script]
    return matching[0] if len(matching) == 1 else None
