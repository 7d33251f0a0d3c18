"""Metrics of answers shown as drafts: drafts sent, draft errors by kind, first visible text."""

from typing import Final

from aiogram.exceptions import (
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from prometheus_client import CollectorRegistry, Counter, Histogram

from bot.metrics import NAMESPACE

FIRST_TEXT_BUCKETS: Final = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
DRAFT_KINDS: Final = ("answer", "placeholder", "thinking")
"""What a draft shows: the answer so far, a tool's purpose, or Telegram's "thinking"."""

DRAFT_ERROR_KINDS: Final[tuple[tuple[type[TelegramAPIError], str], ...]] = (
    (TelegramRetryAfter, "retry_after"),
    (TelegramBadRequest, "bad_request"),
    (TelegramForbiddenError, "forbidden"),
    (TelegramServerError, "server"),
    (TelegramNetworkError, "network"),
)
"""The ``kind`` label of a failed draft, by the error's class; any other error is ``other``."""

OTHER_ERROR: Final = "other"


def draft_error_kind(error: TelegramAPIError) -> str:
    """The ``kind`` label :data:`DRAFT_ERROR_KINDS` gives ``error``."""
    return next((kind for cls, kind in DRAFT_ERROR_KINDS if isinstance(error, cls)), OTHER_ERROR)


class DraftMetrics:
    """Registered in the bot's registry; one instance per process."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.drafts_sent = Counter(
            "drafts_sent",
            "Drafts (sendMessageDraft) Telegram accepted, by what they showed.",
            ["kind"],
            namespace=NAMESPACE,
            registry=registry,
        )
        self.draft_errors = Counter(
            "draft_errors",
            "Drafts Telegram refused or that failed, by kind (a retry_after pauses the chat).",
            ["kind"],
            namespace=NAMESPACE,
            registry=registry,
        )
        self.first_text_seconds = Histogram(
            "draft_first_text_seconds",
            "Time from the start of a turn to its first visible draft, by what it showed.",
            ["kind"],
            namespace=NAMESPACE,
            buckets=FIRST_TEXT_BUCKETS,
            registry=registry,
        )
        for kind in DRAFT_KINDS:
            self.drafts_sent.labels(kind=kind)
        for _, kind in DRAFT_ERROR_KINDS:
            self.draft_errors.labels(kind=kind)
        self.draft_errors.labels(kind=OTHER_ERROR)

    def count_error(self, error: TelegramAPIError) -> None:
        """One draft Telegram refused (or that failed), counted by its kind."""
        self.draft_errors.labels(kind=draft_error_kind(error)).inc()
