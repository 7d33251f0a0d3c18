"""Settings for tests and benchmarks: documented variable names, defaults, no ``.env`` read."""

import os
from typing import Any

from bot.settings import Settings
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer

PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "SYSTEMROOT")
"""What a child process takes from this one's environment: finding programs, the locale."""


def child_environment(**env: Any) -> dict[str, str]:
    """The whole environment of a ``python -m bot`` child: :data:`PASSED_THROUGH`, then ``env``.

    Nothing else of this process's environment (a developer's bot variables) reaches it.
    """
    base = {key: os.environ[key] for key in PASSED_THROUGH if key in os.environ}
    base.update({key: str(value) for key, value in env.items()})
    return base


def make_settings(**env: Any) -> Settings:
    """Settings from ``env`` (variable names as in ``.env``) and defaults; no ``.env`` read."""
    values: dict[str, Any] = {
        "TELEGRAM_BOT_TOKEN": TEST_TOKEN,
        "LLM_BACKEND": "offline",
        "TELEGRAM_SHUTDOWN_GRACE_SECONDS": 10,
    }
    values.update(env)
    return Settings.from_env(values, env_file=None)


def stack_env(
    telegram: FakeTelegramServer, model: ScriptedOpenAIServer, redis_url: str, *, prefix: str
) -> dict[str, Any]:
    """Variables pointing the bot at a test's three servers; keys and the audit under ``prefix``.

    For :func:`stack_settings`, and for the environment of a bot started as a process.
    """
    return {
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "LLM_BACKEND": "openai",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_MAX_RETRIES": 0,
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": prefix,
        "AUDIT_STREAM": f"{prefix}:audit",
    }


def stack_settings(
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    redis_url: str,
    *,
    prefix: str,
    **env: Any,
) -> Settings:
    """The bot's settings against a test's three servers, with short model and Redis timeouts."""
    return make_settings(
        **stack_env(telegram, model, redis_url, prefix=prefix),
        LLM_TIMEOUT_SECONDS=5,
        REDIS_SOCKET_TIMEOUT_SECONDS=1,
        **env,
    )
