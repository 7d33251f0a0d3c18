"""The conversation's language for each event: aiogram's i18n middleware over our catalogs.

The worker runs an update with the session it read with its job (``job``), so the
language costs no Redis round trip: the customer's choice (``/language``) or the
message's own words, else the stored language, else Telegram's ``language_code``.
Handlers receive ``language`` (the code) and ``texts`` (its catalog); aiogram's
``gettext`` helpers see the same locale.
"""

import gettext
from typing import Any

from aiogram.types import CallbackQuery, Message, TelegramObject
from aiogram.utils.i18n import I18n, I18nMiddleware

from bot.language.catalogs import Catalogs
from bot.language.choice import ConversationLanguages, StoredLanguage
from bot.queue.job_results import JobContext


def stored_language(job: JobContext | None) -> StoredLanguage:
    """The language the session read with ``job`` keeps (nothing for a new conversation)."""
    session = job.session if job is not None else None
    if session is None:
        return StoredLanguage()
    return StoredLanguage(language=session.language, chosen=session.language_chosen)


class CatalogI18n(I18n):
    """aiogram's i18n over catalogs already read (its ``find_locales`` returns them).

    aiogram's own reads compiled ``.mo`` files; ours are read from ``.po`` at start.
    """

    def __init__(self, catalogs: Catalogs) -> None:
        # Set before aiogram's constructor, which calls find_locales.
        self.catalogs = catalogs
        super().__init__(
            path=catalogs.path, default_locale=catalogs.default_locale, domain=catalogs.domain
        )

    def find_locales(self) -> dict[str, gettext.GNUTranslations]:
        """The catalogs' translations, by language code."""
        return dict(self.catalogs.locales)


class ConversationLanguageMiddleware(I18nMiddleware):
    """Decides the language per event from the job's session, the text and Telegram's code."""

    def __init__(self, languages: ConversationLanguages) -> None:
        super().__init__(CatalogI18n(languages.catalogs))
        self.languages = languages

    async def get_locale(self, event: TelegramObject, data: dict[str, Any]) -> str:
        """The language code; also puts ``language`` and ``texts`` into the handler's data."""
        job = data.get("job")
        text = None
        user = None
        if isinstance(event, Message):
            text = event.text or event.caption
            user = event.from_user
        elif isinstance(event, CallbackQuery):
            user = event.from_user
        language = self.languages.decide(
            stored_language(job if isinstance(job, JobContext) else None),
            text=text,
            telegram_code=user.language_code if user is not None else None,
        )
        data["language"] = language
        data["texts"] = self.languages.texts(language)
        return language
