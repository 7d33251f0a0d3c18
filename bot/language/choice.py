"""The catalogs and the policy together: a conversation's language and its texts."""

from dataclasses import dataclass

from bot.language.catalogs import Catalogs
from bot.language.detect import LanguagePolicy
from bot.language.texts import Texts


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredLanguage:
    """What the session keeps: the last language, and whether the customer chose it."""

    language: str | None = None
    chosen: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationLanguages:
    """The catalogs and the policy that picks one for a conversation's message."""

    catalogs: Catalogs
    policy: LanguagePolicy

    def decide(
        self,
        stored: StoredLanguage | None = None,
        *,
        text: str | None = None,
        telegram_code: str | None = None,
    ) -> str:
        """The conversation's language for a message ``text`` (none: the stored one)."""
        kept = stored or StoredLanguage()
        return self.policy.decide(
            stored=kept.language, chosen=kept.chosen, text=text, telegram_code=telegram_code
        )

    def texts(self, language: str | None) -> Texts:
        """The texts in ``language`` (``None``: the default language)."""
        return self.catalogs.texts(language or self.policy.default)

    def choices(self) -> str:
        """What ``/language`` lists: one ``/language <code> — <name>`` line per enabled language."""
        return "\n".join(
            f"/language {code} — {self.texts(code).name.capitalize()}"
            for code in self.policy.languages
        )

    def chosen(self, argument: str) -> str | None:
        """The enabled language ``/language <argument>`` names (``en-US`` names ``en``)."""
        return self.policy.code_of(argument)
