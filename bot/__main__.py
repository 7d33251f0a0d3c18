"""Entry point: ``python -m bot [polling|webhook|worker|console|audit|knowledge|shop-mcp|eval]``.

Each mode imports only what it needs: aiogram alone takes seconds to import,
which the console and the staff's audit CLI should not pay. Every mode checks
its settings (exit 2) and then what it needs of the network (an unreachable
Redis, a rejected token, a staff group the bot cannot use: exit 1) before the
heavy imports, so a start-up failure is one line in about a second.
"""

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from bot.ops import event_loop
from bot.ops.startup import StartupError, configure_logging, configured_secrets, load_settings
from bot.settings import Settings, offline_by_default
from bot.telegram.startup_checks import Mode, mode_check
from bot.tryout.local_redis import LocalRedisError, LocalRedisServer, redis_or_private


async def _console(settings: Settings, conversation: str | None, notes: Sequence[str]) -> int:
    # redis-py after the settings, aiogram-free; the rest of the console after Redis answered.
    from bot.ops.redis_startup import check_redis  # noqa: PLC0415 - see module docstring

    try:
        await check_redis(settings)
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    from bot.app import build_application  # noqa: PLC0415 - see module docstring
    from bot.console import run_console  # noqa: PLC0415 - see module docstring

    try:
        app = await build_application(settings)
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return await run_console(app, conversation, notes)
    finally:
        await app.aclose()


def console_main(conversation: str | None) -> int:
    """``python -m bot console``: exit 2 on bad settings, 1 when Redis is unreachable.

    Nothing needs to be set to try it: without ``LLM_BACKEND`` and ``OPENAI_API_KEY``
    it runs the offline demo model, without ``REDIS_URL`` a private redis-server
    (:mod:`bot.tryout.local_redis`), each said in one line of the banner.
    """
    offline = offline_by_default()
    settings = load_settings(values={"LLM_BACKEND": "offline"} if offline else None)
    if settings is None:
        return 2
    configure_logging(
        settings.log_level, settings.log_format, configured_secrets(settings, os.environ)
    )
    notes = [console_model_note(settings, chosen_for_tryout=offline)]
    try:
        with redis_or_private(settings.redis) as (redis_settings, server):
            if server is not None:
                notes.append(console_redis_note(server))
            settings = settings.model_copy(update={"redis": redis_settings})
            return event_loop.run(_console(settings, conversation, [n for n in notes if n]))
    except LocalRedisError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def console_model_note(settings: Settings, *, chosen_for_tryout: bool) -> str:
    """The banner's one line on the model, when it is the offline demo (else empty)."""
    if settings.llm.backend != "offline":
        return ""
    why = "OPENAI_API_KEY is not set" if chosen_for_tryout else "LLM_BACKEND=offline"
    return (
        f"model: the offline demo (keyword rules, no network) because {why}; "
        "for a real model set OPENAI_API_KEY and LLM_BACKEND=openai (.env or the environment)"
    )


def console_redis_note(server: LocalRedisServer) -> str:
    """The banner's one line on the private redis-server, when REDIS_URL is unset."""
    whose = "started here" if server.started_here else "shared with another console or audit"
    return (
        f"redis: a private redis-server on 127.0.0.1:{server.port} ({whose}; data kept in "
        f"{server.directory}) because REDIS_URL is not set; stopped when the last user exits"
    )


def _delegate(command: str, args: list[str]) -> int:
    """A sub-command with a command line of its own (each imports only what it needs)."""
    if command == "audit":
        from bot.support_audit.cli import main as audit_main  # noqa: PLC0415 - see module docstring

        return audit_main(args)
    if command == "eval":
        from bot.evaluation.cli import main as eval_main  # noqa: PLC0415 - see module docstring

        return eval_main(args)
    if command == "knowledge":
        from bot.knowledge.cli import main as knowledge_main  # noqa: PLC0415 - see module docstring

        return knowledge_main(args)
    from bot.tryout.demo_shop_mcp import main as shop_mcp_main  # noqa: PLC0415 - see module docstring

    return shop_mcp_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen mode; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("audit", "knowledge", "shop-mcp", "eval"):
        return _delegate(args[0], args[1:])

    parser = argparse.ArgumentParser(prog="python -m bot", description="Telegram support bot")
    sub = parser.add_subparsers(dest="mode")
    sub.add_parser("polling", help="run the bot with long polling (default)")
    sub.add_parser("webhook", help="run the webhook server (intake and workers)")
    sub.add_parser("worker", help="run workers only: add processes to either mode")
    console = sub.add_parser("console", help="chat in the terminal through the same engine")
    console.add_argument("--session", help="conversation id to use (default: console-<user>)")
    sub.add_parser("audit", help="read the audit stream (see: python -m bot audit --help)")
    sub.add_parser("knowledge", help="check and try the help center (knowledge --help)")
    sub.add_parser("shop-mcp", help="serve the demo shop's tools over MCP (shop-mcp --help)")
    sub.add_parser("eval", help="run scenario files against the bot (eval --help)")
    parsed = parser.parse_args(args)
    if parsed.mode == "console":
        return console_main(parsed.session)
    if parsed.mode == "webhook":
        return telegram_main("webhook")
    if parsed.mode == "worker":
        return telegram_main("worker")
    return telegram_main("polling")


def telegram_main(mode: Mode) -> int:
    """``polling``, ``webhook`` or ``worker``: exit 2 on bad settings, 1 on a failed preflight.

    Every configuration problem is printed at once, in about a second; then Redis,
    the token and the staff group are checked (:mod:`bot.telegram.preflight`), also
    before aiogram and the model SDK are imported. Only a start that can work pays
    for those imports.
    """
    ignore_hangups()
    settings = load_settings(mode_check(mode))
    if settings is None:
        return 2
    # aiohttp and redis-py only: a settings error (above) imports neither.
    from bot.telegram.preflight import run_preflight  # noqa: PLC0415 - see module docstring

    identity = run_preflight(settings)
    if identity is None:
        return 1
    from bot.telegram.process import start  # noqa: PLC0415 - see module docstring

    return start(settings, mode, identity)


def ignore_hangups() -> None:
    """Let SIGHUP do nothing until the help center's watcher takes it (a reload request).

    Its default action ends the process: an operator's ``kill -HUP`` (or a
    supervisor's reload) during the seconds of start-up would kill the bot.
    """
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


if __name__ == "__main__":
    raise SystemExit(main())
