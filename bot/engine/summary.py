"""Folding messages that left the history window into the conversation summary."""

from collections.abc import Sequence

from bot.engine.history import neutralise_block_tags
from bot.llm.errors import LLMClientError
from bot.llm.types import ToolCallingClient
from bot.sessions.models import StoredMessage
from prompts.template import PromptTemplate

MAX_SUMMARY_CHARS = 2000


class SummaryError(RuntimeError):
    """The model could not produce a usable summary (the old one stays)."""


class ConversationSummaryService:
    """Asks the model (with no tools) for a new summary of older turns."""

    def __init__(self, client: ToolCallingClient, prompt: PromptTemplate) -> None:
        self._client = client
        self._prompt = prompt
        self._instruction = prompt.render()

    async def summarise(self, previous: str | None, messages: Sequence[StoredMessage]) -> str:
        """A summary covering ``previous`` and ``messages``; raises :class:`SummaryError`."""
        # Customer text and the old summary must not open or close the request's blocks.
        lines = [
            ("Клиент: " if m.role == "user" else "Поддержка: ")
            + neutralise_block_tags(" ".join(m.content.split()))
            for m in messages
        ]
        material = (
            f"<previous_summary>\n{neutralise_block_tags(previous or '')}\n</previous_summary>\n"
            "<messages>\n" + "\n".join(lines) + "\n</messages>"
        )
        try:
            result = await self._client.generate_with_tools(
                [
                    {"role": "developer", "content": self._instruction},
                    {"role": "user", "content": material},
                ],
                tools=[],
            )
        except LLMClientError as error:
            raise SummaryError("the model could not summarise") from error
        text = (result.text or "").strip()
        if result.refusal or not text:
            raise SummaryError("the model returned no summary")
        return neutralise_block_tags(text)[:MAX_SUMMARY_CHARS]
