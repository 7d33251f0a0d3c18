"""What every entry point does first: read settings, set up logging."""

import logging
import sys

from bot.settings import Settings, SettingsError


def load_settings() -> Settings | None:
    """Settings from the environment, or ``None`` after printing one line per problem."""
    try:
        return Settings.from_env()
    except SettingsError as error:
        for line in error.problems:
            print(f"configuration error: {line}", file=sys.stderr)
        return None


def configure_logging(level: str) -> None:
    """Plain, one-line log records on stderr."""
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The HTTP clients log every request at INFO; that is noise for an operator.
    for noisy in ("httpx", "httpx2", "openai", "aiogram.event"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
