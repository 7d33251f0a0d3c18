"""The console's terminal: a log record never lands after the open prompt ``Вы: ``."""

import io
import logging
from collections.abc import Iterator

import pytest

from bot.console import ConsoleScreen, logs_through


class Keyboard(io.StringIO):
    """stdin as a person types into a terminal (whose echo ends each line they enter)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def shared() -> Iterator[io.StringIO]:
    """stdout and stderr in one place, where the root logger writes while the test runs."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger()
    saved = list(root.handlers)
    for existing in saved:
        root.removeHandler(existing)
    root.addHandler(handler)
    try:
        yield stream
        assert handler in root.handlers  # given back after the chat
    finally:
        root.removeHandler(handler)
        for existing in saved:
            root.addHandler(existing)


def test_a_record_while_the_prompt_is_open_gets_its_own_line_and_the_prompt_again(shared):
    screen = ConsoleScreen(Keyboard(), shared, shared)
    with logs_through(screen, shared):
        screen.prompt()
        logging.getLogger("tests.console").warning("help center reloaded")
        screen.entered()  # the echo of Enter ended the line on the terminal
        screen.print("Бот: ответ")

    assert shared.getvalue() == "Вы: \nWARNING help center reloaded\nВы: Бот: ответ\n"


def test_from_a_pipe_the_prompt_line_is_ended_before_the_turn_logs(shared):
    screen = ConsoleScreen(io.StringIO("Где заказ?\n"), shared, shared)
    with logs_through(screen, shared):
        screen.prompt()
        screen.entered()  # no echo from a pipe: the console ends the line itself
        logging.getLogger("tests.console").warning("a turn failed")
        screen.print("Бот: ответ")

    assert shared.getvalue() == "Вы: \nWARNING a turn failed\nБот: ответ\n"
