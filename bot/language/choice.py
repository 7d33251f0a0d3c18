"""A job's language from the session the worker read with it: no Redis round trip of its own."""

from dataclasses import dataclass

from bot.language.catalogs import Catalogs, Texts
from bot.language.detect import LanguagePolicy
from bot.queue.job_results import JobContext
from bot.sessions.models import session_of


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationLanguages:
    """The catalogs and the policy that picks one for a conversation's job."""

    catalogs: Catalogs
    policy: LanguagePolicy

    def decide(
        self, job: JobContext | None, *, text: str | None = None, telegram_code: str | None = None
    ) -> str:
        """The language of ``job``'s conversation for a message ``text`` (none: the stored one)."""
        session = session_of(job.session_data) if job is not None else None
        return self.policy.decide(
            stored=session.language if session is not None else None,
            chosen=session.language_chosen if session is not None else False,
            text=text,
            telegram_code=telegram_code,
        )

    def texts(self, language: str | None) -> Texts:
        """The texts in ``language`` (``None``: the default language)."""
        return self.catalogs.texts(language or self.policy.default)

    def of_job(self, job: JobContext | None) -> Texts:
        """The texts of ``job``'s conversation as stored (a notice, a question: no message)."""
        return self.texts(self.decide(job))
