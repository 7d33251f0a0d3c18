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

        Chosen with ``/language``: kept. Otherwise the message's own script when it names
        exactly one enabled language (a customer with an English Telegram who writes in
        Russian gets Russian); else the stored language; else Telegram's
        ``language_code`` when enabled; else the default.
        """
        if chosen and stored in self.languages:
            return stored
        written = self.of_text(text or "")
        if written is not None:
            return written
        if stored in self.languages:
            return stored
        code = (telegram_code or "").split("-")[0].lower()
        if code in self.languages:
            return code
        return self.default

    def of_text(self, text: str) -> str | None:
        """The one enabled language the text's letters are written in, if they say so.

        Commands, mentions and links are no one's language ("/start", "@shop_bot"). The
        first :data:`SAMPLE_CHARS` characters are enough to tell, and bound the cost.
        """
        sample = text[:SAMPLE_CHARS].split()
        text = " ".join(word for word in sample if not word.startswith(_NOT_WORDS))
        # Regular expressions count in C: a 4,000-character message costs microseconds.
        cyrillic = len(_CYRILLIC.findall(text))
        latin = len(_LATIN.findall(text))
        if cyrillic + latin < MIN_LETTERS:
            return None
        script = "cyrillic" if cyrillic > latin else "latin"
        return _only(self.languages, script)


def _only(languages: Sequence[str], script: str) -> str | None:
    matching = [code for code in languages if _SCRIPT_OF.get(code, "latin") == script]
    return matching[0] if len(matching) == 1 else None
