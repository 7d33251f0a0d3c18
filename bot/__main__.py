"""Entry point: ``python -m bot [polling|webhook|console|audit ...]``."""

import argparse
import asyncio
import sys
from collections.abc import Sequence

from bot.app import StartupError, build_application
from bot.audit.cli import main as audit_main
from bot.console import run_console
from bot.settings import Settings
from bot.startup import configure_logging, load_settings
from bot.telegram.runner import main as telegram_main


async def _console(settings: Settings, conversation: str | None) -> int:
    try:
        app = await build_application(settings)
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return await run_console(app, conversation)
    finally:
        await app.aclose()


def console_main(conversation: str | None) -> int:
    """``python -m bot console``: exit 2 on bad settings, 1 when Redis is unreachable."""
    settings = load_settings()
    if settings is None:
        return 2
    configure_logging(settings.log_level)
    try:
        return asyncio.run(_console(settings, conversation))
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen mode; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "audit":
        return audit_main(args[1:])

    parser = argparse.ArgumentParser(prog="python -m bot", description="Telegram support bot")
    sub = parser.add_subparsers(dest="mode")
    sub.add_parser("polling", help="run the bot with long polling (default)")
    sub.add_parser("webhook", help="run the webhook server")
    console = sub.add_parser("console", help="chat in the terminal through the same engine")
    console.add_argument("--session", help="conversation id to use (default: console-<user>)")
    sub.add_parser("audit", help="read the audit stream (see: python -m bot audit --help)")
    parsed = parser.parse_args(args)
    if parsed.mode == "console":
        return console_main(parsed.session)
    mode = "webhook" if parsed.mode == "webhook" else "polling"
    return telegram_main(mode)


if __name__ == "__main__":
    raise SystemExit(main())
