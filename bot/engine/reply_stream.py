"""What a front end may see of a reply while it is being written (drafts, a console)."""

from typing import Protocol


class ReplyStream(Protocol):
    """Told, as a turn runs, the text the model writes and the tools it waits for.

    Both methods must return at once (no I/O): they run inside the model's stream.
    The text told is a preview only; the turn's answer is what it commits.
    """

    def on_text(self, piece: str) -> None:
        """The next piece of the current model step's text."""

    def on_tools(self, names: tuple[str, ...]) -> None:
        """The current step asked for these tools: its text (if any) is not the answer."""
