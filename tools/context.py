"""What the application knows about the caller of a tool."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Identity of the conversation a tool runs for.

    The application builds it from the Telegram update (or the console); the
    model never writes it. Tools that need to know *who* asks (order ownership)
    read it from here, never from their model-written arguments.
    """

    chat_id: int | str
    user_id: int | None
    turn_id: str
