"""What every entry point does first: read settings, set up logging."""

import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping

from pydantic import SecretStr
from pydantic_settings import BaseSettings
from pythonjsonlogger.json import JsonFormatter

from bot.ops.log_context import LogContextFilter
from bot.ops.secrets import SecretLogFilter, SecretMask
from bot.settings import (
    SETTINGS_SECTIONS,
    McpSettings,
    Settings,
    SettingsError,
    mcp_header_problems,
)


class StartupError(RuntimeError):
    """The application cannot start; ``str()`` is one line for the operator (exit 1)."""


SectionCheck = Callable[[Mapping[str, BaseSettings]], list[str]]
"""A mode's own check of the settings sections that loaded: one line per problem."""


def load_settings(
    check: SectionCheck | None = None, values: Mapping[str, object] | None = None
) -> Settings | None:
    """Settings from the environment, or ``None`` after printing one line per problem.

    ``check`` (a mode's needs: a token, a webhook URL) runs on every section that
    loaded, also when others did not: every problem is printed at once. ``values``
    (variable names as in ``.env``) take precedence over the environment.
    """
    settings: Settings | None = None
    # Every mode connects MCP_SERVERS: their secret headers are checked with the settings.
    check = _with_mcp_headers(check)
    try:
        settings = Settings.from_env(values)
        problems: list[str] = []
        sections: Mapping[str, BaseSettings] = {
            name: getattr(settings, name) for name in SETTINGS_SECTIONS if name != "log"
        }
    except SettingsError as error:
        problems = list(error.problems)
        sections = error.sections
    if check is not None:
        problems.extend(check(sections))
    for line in problems:
        print(f"configuration error: {line}", file=sys.stderr)
    return None if problems else settings


def _with_mcp_headers(check: SectionCheck | None) -> SectionCheck:
    """``check`` and the check of the MCP servers' secret headers in the environment."""

    def checked(sections: Mapping[str, BaseSettings]) -> list[str]:
        problems = check(sections) if check is not None else []
        mcp = sections.get("mcp")
        if isinstance(mcp, McpSettings):
            problems.extend(mcp_header_problems(mcp, os.environ))
        return problems

    return checked


def configured_secrets(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """Every secret the settings hold: the values of their ``SecretStr`` fields, the MCP
    servers' header values (from ``environ``), and the passwords in URLs (not the URLs).
    """
    secrets: list[str] = []
    for name in SETTINGS_SECTIONS:
        section = getattr(settings, name, None)
        if not isinstance(section, BaseSettings):
            continue
        for value in section.__dict__.values():
            if isinstance(value, SecretStr):
                text = value.get_secret_value()
                password = url_password(text)
                secrets.append(password if "://" in text else text)
    for server in settings.mcp.servers:
        secrets.extend(
            environ[variable]
            for variable in server.headers_from_env.values()
            if variable in environ
        )
    return [secret for secret in secrets if secret]


def url_password(url: str) -> str:
    """The password of ``scheme://user:password@host...`` (empty without one)."""
    _, separator, rest = url.partition("://")
    userinfo, at, _ = rest.rpartition("@")
    if not separator or not at or ":" not in userinfo:
        return ""
    return userinfo.split(":", 1)[1]


class ContextTextFormatter(logging.Formatter):
    """One plain line; the update, chat and turn it belongs to, when known, at the end."""

    def format(self, record: logging.LogRecord) -> str:
        """The standard line plus ``[update=... chat=... turn=...]``."""
        line = super().format(record)
        labels = {"update_id": "update", "chat": "chat", "turn_id": "turn"}
        context = " ".join(
            f"{label}={getattr(record, name)}"
            for name, label in labels.items()
            if hasattr(record, name)
        )
        if not context:
            return line
        first, newline, rest = line.partition("\n")
        return f"{first} [{context}]{newline}{rest}"


def log_formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``LOG_FORMAT``: ``text`` lines or one JSON object per line.

    JSON records have ``time``, ``level``, ``logger``, ``message``, the context's
    ``update_id``, ``chat`` and ``turn_id`` when set, and ``exc_info`` with the trace.
    """
    if log_format == "json":
        return JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )
    return ContextTextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


def configure_logging(level: str, log_format: str = "text", secrets: Iterable[str] = ()) -> None:
    """One record per line on stderr, as text or JSON, with the turn's identifiers.

    ``secrets`` (:func:`configured_secrets`) are masked in every record, a library's too.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(log_format))
    # On the handler, so that records of every logger (aiogram's too) get the context.
    handler.addFilter(LogContextFilter())
    handler.addFilter(SecretLogFilter(SecretMask(secrets)))
    logging.basicConfig(level=level, handlers=[handler])
    # The HTTP clients log every request at INFO; that is noise for an operator.
    for noisy in ("httpx", "httpx2", "openai", "aiogram.event"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
