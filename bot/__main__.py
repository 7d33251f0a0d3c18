"""Entry point: ``python -m bot [polling|webhook|worker|console|audit ...]``.

Each mode imports only what it needs: aiogram alone takes seconds to import,
which the console and the staff's audit CLI should not pay.
"""

import argparse
import signal
import sys
from collections.abc import Sequence

from bot.ops import event_loop
from bot.ops.startup import configure_logging, load_settings
from bot.settings import Settings
from bot.telegram.startup_checks import Mode, mode_check


async def _console(settings: Settings, conversation: str | None) -> int:
    from bot.app import StartupError, build_application  # noqa: PLC0415 - see module docstring
    from bot.console import run_console  # noqa: PLC0415 - see module docstring

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
    configure_logging(settings.log_level, settings.log_format)
    try:
        return event_loop.run(_console(settings, conversation))
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen mode; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "audit":
        from bot.support_audit.cli import main as audit_main  # noqa: PLC0415 - see module docstring

        return audit_main(args[1:])
    if args and args[0] == "knowledge":
        from bot.knowledge.cli import main as knowledge_main  # noqa: PLC0415 - see module docstring

        return knowledge_main(args[1:])

    parser = argparse.ArgumentParser(prog="python -m bot", description="Telegram support bot")
    sub = parser.add_subparsers(dest="mode")
    sub.add_parser("polling", help="run the bot with long polling (default)")
    sub.add_parser("webhook", help="run the webhook server (intake and workers)")
    sub.add_parser("worker", help="run workers only: add processes to either mode")
    console = sub.add_parser("console", help="chat in the terminal through the same engine")
    console.add_argument("--session", help="conversation id to use (default: console-<user>)")
    sub.add_parser("audit", help="read the audit stream (see: python -m bot audit --help)")
    sub.add_parser("knowledge", help="check and try the help center (knowledge --help)")
    parsed = parser.parse_args(args)
    if parsed.mode == "console":
        return console_main(parsed.session)
    if parsed.mode == "webhook":
        return telegram_main("webhook")
    if parsed.mode == "worker":
        return telegram_main("worker")
    return telegram_main("polling")


def telegram_main(mode: Mode) -> int:
    """``polling``, ``webhook`` or ``worker``: exit 2 on bad settings, before aiogram is imported.

    Every configuration problem is printed at once, in about a second; only a
    usable configuration pays for importing aiogram and the model SDK.
    """
    ignore_hangups()
    settings = load_settings(mode_check(mode))
    if settings is None:
        return 2
    from bot.telegram.runner import start  # noqa: PLC0415 - see module docstring

    return start(settings, mode)


def ignore_hangups() -> None:
    """Let SIGHUP do nothing until the help center's watcher takes it (a reload request).

    Its default action ends the process: an operator's ``kill -HUP`` (or a
    supervisor's reload) during the seconds of start-up would kill the bot.
    """
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


if __name__ == "__main__":
    raise SystemExit(main())
