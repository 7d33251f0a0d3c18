"""Configured secrets never reach the log, whoever logs them (a library's error quotes them)."""

import io
import json
import logging
from collections.abc import Callable

import pytest

from bot.ops.secrets import SecretLogFilter, SecretMask
from bot.ops.startup import configured_secrets, log_formatter
from bot.testing.settings import make_settings

SECRET = "Bearer shop-secret-value-0042"


def logged(log_format: str, secrets: list[str], emit: Callable[[logging.Logger], None]) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log_formatter(log_format))
    handler.addFilter(SecretLogFilter(SecretMask(secrets)))
    logger = logging.getLogger("tests.log_secrets")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    return stream.getvalue()


def _library_error(logger: logging.Logger) -> None:
    logger.setLevel(logging.DEBUG)
    # As httpcore logs h11's refusal: the value quoted as bytes, newline escaped.
    logger.debug("send_request_headers.failed exception=%r", ValueError(f"Illegal {SECRET!r}\n"))
    try:
        raise RuntimeError(f"Illegal header value {(SECRET + chr(10)).encode()!r}")
    except RuntimeError:
        logger.exception("the session ended")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_secret_quoted_by_a_library_is_masked_in_messages_and_tracebacks(
    log_format: str,
) -> None:
    text = logged(log_format, [SECRET + "\n"], _library_error)

    assert "shop-secret" not in text
    assert "***" in text
    assert "Illegal header value" in text
    if log_format == "json":
        records = [json.loads(line) for line in text.splitlines()]
        assert "Traceback" in records[-1]["exc_info"]


def test_the_configured_secrets_are_the_secret_values_and_url_passwords_only() -> None:
    settings = make_settings(
        OPENAI_API_KEY="sk-the-api-key-77",
        REDIS_URL="redis://bot:redis-password-9@redis.example:6379/0",
        MCP_SERVERS=json.dumps(
            [
                {
                    "name": "shop",
                    "url": "https://shop.example/mcp",
                    "headers_from_env": {"Authorization": "SHOP_AUTH"},
                }
            ]
        ),
    )

    secrets = configured_secrets(settings, {"SHOP_AUTH": SECRET})

    assert "sk-the-api-key-77" in secrets
    assert "redis-password-9" in secrets
    assert SECRET in secrets
    assert settings.telegram.bot_token is not None
    assert settings.telegram.bot_token.get_secret_value() in secrets
    # The URL itself stays readable in log lines.
    assert not any("redis.example" in secret for secret in secrets)


def test_short_values_are_not_masked_on_their_own() -> None:
    mask = SecretMask(["ab", "Bearer x"])
    assert mask("ab Bearer x") == "ab ***"


def test_the_scheme_of_an_authorization_value_stays_readable() -> None:
    mask = SecretMask(["Bearer token-value-123"])
    assert mask("Bearer token-value-123 / token-value-123") == "*** / ***"
    assert mask("the Bearer scheme") == "the Bearer scheme"
