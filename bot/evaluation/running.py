"""What every eval run needs: its settings, Redis, and the simulated customer's model.

Shared by the scenario runs (:mod:`bot.evaluation.cli`) and tau2-bench's
(:mod:`bot.evaluation.tau2`).
"""

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from bot.llm.types import ToolCallingClient
from bot.ops import event_loop
from bot.ops.startup import StartupError, configure_logging, load_settings
from bot.settings import Settings, offline_by_default
from bot.tryout.local_redis import LocalRedisError, redis_or_private

T = TypeVar("T")


def eval_settings(
    *, needs_customer: bool, customer_for: str = "a scenario with instructions:"
) -> Settings | None:
    """The bot's settings (the try-out defaults when nothing is set), logging set up.

    ``None`` after the lines saying what is wrong. Logs show warnings and worse unless
    ``LOG_LEVEL`` asks for more than INFO: the engine's INFO lines would bury the progress.
    """
    offline = offline_by_default()
    settings = load_settings(values={"LLM_BACKEND": "offline"} if offline else None)
    if settings is None:
        return None
    problem = customer_model_problem(settings, customer_for) if needs_customer else None
    if problem is not None:
        print(f"configuration error: {problem}", file=sys.stderr)
        return None
    level = "WARNING" if settings.log_level == "INFO" else settings.log_level
    configure_logging(level, settings.log_format)
    return settings


def run_on_redis(settings: Settings, work: Callable[[Settings], Awaitable[T]]) -> T | int:
    """``work``'s result on Redis (a private one when ``REDIS_URL`` is unset), checked first;
    else the exit code after one line (1: Redis or the engine could not start)."""

    async def checked(ready: Settings) -> T:
        from bot.ops.redis_startup import check_redis  # noqa: PLC0415 - after the settings

        await check_redis(ready)
        return await work(ready)

    try:
        with redis_or_private(settings.redis) as (redis_settings, _server):
            return event_loop.run(checked(settings.model_copy(update={"redis": redis_settings})))
    except (LocalRedisError, StartupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomerModel:
    """Where the simulated customer's model is: ``EVAL_CUSTOMER_*``, else the bot's."""

    model: str
    base_url: str | None
    api_key: str


def customer_model(settings: Settings) -> CustomerModel | None:
    """The simulated customer's model, or ``None`` when none can be named."""
    chosen = settings.evaluation
    key = chosen.customer_api_key or settings.llm.api_key
    model = chosen.customer_model or (
        settings.llm.model if settings.llm.backend == "openai" else None
    )
    if key is None or not key.get_secret_value().strip() or model is None:
        return None
    return CustomerModel(
        model=model,
        base_url=chosen.customer_base_url or settings.llm.base_url,
        api_key=key.get_secret_value(),
    )


def customer_model_problem(
    settings: Settings, needed_by: str = "a scenario with instructions:"
) -> str | None:
    """Why a simulated customer cannot be played, or ``None``."""
    if customer_model(settings) is not None:
        return None
    return (
        f"EVAL_CUSTOMER_MODEL: {needed_by} needs a model to play the customer; set "
        "EVAL_CUSTOMER_MODEL and EVAL_CUSTOMER_API_KEY (or OPENAI_API_KEY)"
    )


def customer_client(settings: Settings) -> ToolCallingClient:
    """The simulated customer's model client (``EVAL_CUSTOMER_*``, else the bot's)."""
    from bot.llm.openai_client import OpenAIChatClient  # noqa: PLC0415 - only when needed

    chosen = customer_model(settings)
    if chosen is None:
        raise StartupError(customer_model_problem(settings) or "no customer model")
    return OpenAIChatClient.create(
        api_key=chosen.api_key,
        base_url=chosen.base_url,
        model=chosen.model,
        timeout_seconds=settings.llm.timeout_seconds,
        max_retries=settings.llm.max_retries,
        instructions_role="system",
    )
