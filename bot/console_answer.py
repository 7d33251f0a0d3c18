"""The console's answer as the model writes it: ``Бот: `` and each piece printed as it comes."""

from typing import TYPE_CHECKING

from bot.customer_texts import CONSOLE_ANSWER_CUT, CONSOLE_BOT

if TYPE_CHECKING:
    # For the annotation only: the console imports this module to print its answers.
    from bot.console import ConsoleScreen


class ConsoleAnswer:
    """A :class:`bot.engine.reply_stream.ReplyStream` printing the answer's text as it arrives.

    Leading whitespace is not printed (the committed answer is stripped). A step
    that turns to tools ends its line; the next step starts a new ``Бот: `` line.
    """

    def __init__(
        self, screen: "ConsoleScreen", *, label: str = CONSOLE_BOT, cut: str = CONSOLE_ANSWER_CUT
    ) -> None:
        # ``label`` and ``cut`` in the conversation's language (the catalogs' ``Бот: ``).
        self._screen = screen
        self._label = label
        self._cut = cut
        self._started = False
        self._printed = False

    def on_text(self, piece: str) -> None:
        """Print ``piece`` (after ``Бот: `` on the answer's first piece)."""
        if not self._started:
            piece = piece.lstrip()
            if not piece:
                return
            self._screen.write_partial(self._label)
            self._started = True
        self._screen.write_partial(piece)
        self._printed = True

    def on_tools(self, names: tuple[str, ...]) -> None:
        """Tools run: what the step wrote (rarely anything) was not the answer."""
        if self._started:
            self._screen.end_partial()
            self._started = False

    def finish(self) -> bool:
        """End the answer's line; ``False`` when nothing was printed (print it whole)."""
        self._screen.end_partial()
        return self._started and self._printed

    def abandon(self) -> None:
        """The turn failed: what was printed is not an answer, and is said so."""
        self._screen.end_partial()
        if self._started:
            self._screen.print(self._cut, dim=True)
        self._started = False
