"""The gettext catalogs of the customer's texts, one per language, read from ``.po`` files.

Translators work in ``bot/locales/<lang>/LC_MESSAGES/messages.po`` (``scripts/i18n``
extracts and updates them with pybabel). The catalogs are read here at start,
with Babel, straight from the ``.po`` files: there is no compiled ``.mo`` to
build, ship or forget to rebuild after an edit. Nothing here imports aiogram
(importing any of it loads all its types: seconds of start-up the console and
the staff CLI do not need); the Telegram front end hands these catalogs to
aiogram's i18n middleware (``bot.telegram.middlewares.language``).

The source language of the messages (the msgids) is Russian, the shop's own:
``bot/customer_texts.py`` holds them, so a Russian customer reads exactly the
texts written there; every other language is a translation.
"""

import gettext
import io
from importlib.resources import files
from pathlib import Path
from typing import Final

from babel import Locale, UnknownLocaleError
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from bot.language.texts import Texts

DOMAIN: Final = "messages"
DEFAULT_LOCALES_DIR: Final = Path(str(files("bot").joinpath("locales")))
"""Where the shipped catalogs are (package data of the wheel)."""


class CatalogError(ValueError):
    """A language is enabled without a catalog, or a catalog cannot be read."""


class Catalogs:
    """Every catalog under ``path``; :meth:`texts` gives one language's texts.

    Built once by the composition root and passed on; nothing module-level.
    """

    def __init__(self, *, path: Path = DEFAULT_LOCALES_DIR, default_locale: str = "ru") -> None:
        self.path = path.resolve()
        self.domain = DOMAIN
        self.default_locale = default_locale
        self.locales = self._read()
        self._texts: dict[str, Texts] = {}

    def _read(self) -> dict[str, gettext.GNUTranslations]:
        """Every ``<lang>/LC_MESSAGES/messages.po`` under the path, read with Babel."""
        found: dict[str, gettext.GNUTranslations] = {}
        for po_path in sorted(self.path.glob(f"*/LC_MESSAGES/{self.domain}.po")):
            language = po_path.parent.parent.name
            try:
                with po_path.open("rb") as po_file:
                    catalog = read_po(po_file, locale=language)
            except (OSError, ValueError, UnknownLocaleError) as error:
                raise CatalogError(f"{po_path}: cannot be read ({error})") from error
            compiled = io.BytesIO()
            write_mo(compiled, catalog)
            compiled.seek(0)
            found[language] = gettext.GNUTranslations(compiled)
        return found

    def require(self, languages: tuple[str, ...]) -> None:
        """Raise :class:`CatalogError` (one line) when an enabled language has no catalog."""
        missing = [code for code in languages if code not in self.locales]
        if missing:
            known = ", ".join(sorted(self.locales)) or "none"
            raise CatalogError(
                f"LANGUAGES: no catalog for {', '.join(missing)} "
                f"(catalogs: {known}; add bot/locales/<lang>/LC_MESSAGES/messages.po)"
            )

    def texts(self, language: str) -> Texts:
        """The texts in ``language`` (the default language's for one without a catalog)."""
        cached = self._texts.get(language)
        if cached is not None:
            return cached
        code = language if language in self.locales else self.default_locale
        translations: gettext.NullTranslations = self.locales.get(code, gettext.NullTranslations())
        texts = Texts(
            language=code,
            name=language_name(code, code),
            name_ru=language_name(code, "ru"),
            translations=translations,
        )
        self._texts[language] = texts
        return texts


def language_name(code: str, in_language: str) -> str:
    """The name of language ``code`` in ``in_language`` (Babel's CLDR data), else the code."""
    try:
        name = Locale.parse(code).get_display_name(in_language)
    except (ValueError, UnknownLocaleError):
        return code
    return name or code
