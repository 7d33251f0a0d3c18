"""The last line: an exception no handler dealt with becomes a kind message with a code.

The customer gets the kind message for the failure (or a generic one), never
the exception's text; the worker commits and delivers it like any reply.
"""

import logging

from aiogram import Router
from aiogram.types import ErrorEvent

from bot import customer_texts
from bot.chat_errors import ChatServiceError
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext

logger = logging.getLogger(__name__)


async def on_error(event: ErrorEvent, job: JobContext) -> Reply:
    """Log the failure with the job's incident code and answer the customer kindly."""
    error = event.exception
    code = job.job.turn_id
    if isinstance(error, ChatServiceError):
        logger.warning("Update %s failed: %s (incident %s)", job.job.update_id, error.kind, code)
        return Reply.say(customer_texts.failure_message(error, code), audit=error.audit_fields)
    logger.error(
        "Update %s failed unexpectedly (incident %s)", job.job.update_id, code, exc_info=error
    )
    return Reply.say(customer_texts.unexpected_failure_message(code))


def build_router() -> Router:
    """A fresh router with the last-resort error handler."""
    router = Router(name=__name__)
    router.error.register(on_error)
    return router
