"""One language's customer texts: what handlers and the worker show (no aiogram, no Babel).

Kept apart from the catalogs (:mod:`bot.language.catalogs`, which reads them with Babel) so that
the texts' module and what imports it (the audit CLI among them) load neither.
"""

import gettext
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Texts:
    """The customer's texts in one language: ``gettext`` of a message of ``customer_texts``.

    ``name`` is the language's own name ("English", "русский") and ``name_ru`` its
    name in Russian, the prompt's language ("английский").
    """

    language: str
    name: str
    name_ru: str
    translations: gettext.NullTranslations

    def gettext(self, message: str) -> str:
        """``message`` (a msgid of ``customer_texts``) in this language."""
        return self.translations.gettext(message)

    def format(self, message: str, **values: object) -> str:
        """``message`` in this language with its ``{placeholders}`` filled."""
        return self.gettext(message).format(**values)
