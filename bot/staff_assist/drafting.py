"""Drafting one suggested reply: the model, the shop's read tools, nothing that acts.

A short tool loop of its own (at most ``max_steps`` model calls, the last one
without tools): reads run with the customer's identity (the turn context), a
write is only validated and checked (:meth:`~bot.staff_assist.tool_path.AssistTools.propose`)
and becomes the suggestion's action, for staff to send as a card. The transcript
is data in a user message; the instruction is the versioned ``staff_suggestion``
prompt, in the customer's language.
"""

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from bot.analysis.analyzer import transcript
from bot.llm.errors import LLMClientError
from bot.llm.types import Message, ToolCallingClient
from bot.sessions.models import ConversationSession
from bot.sessions.suggestion import SuggestedAction
from bot.staff_assist.tool_path import AssistTools, Proposed
from prompts.template import PromptTemplate
from turn import TurnContext

SUGGESTION_MAX_CHARS = 3000
_PROPOSED_NOTE = {
    "ok": True,
    "data": {
        "status": "not_executed",
        "note": "Staff will send the customer a confirmation card; it runs only on their press.",
    },
}


class DraftError(RuntimeError):
    """No suggestion: ``kind`` says why in one word (for the topic's line and the audit)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """A suggested reply and the write it needs (``None``: none)."""

    text: str
    action: SuggestedAction | None


@dataclass(frozen=True, kw_only=True)
class SuggestionDrafter:
    """Drafts suggested replies with ``client`` and the tools of ``tools``."""

    client: ToolCallingClient
    tools: AssistTools
    prompt: PromptTemplate
    timeout_seconds: float
    # A language code's name in the prompt's language (Russian): "английский".
    language_name: Callable[[str], str] = lambda code: code
    max_steps: int = 3
    max_transcript_chars: int = 8000

    async def draft(self, session: ConversationSession, context: TurnContext) -> Draft:
        """The suggestion for the conversation as it is; raises :class:`DraftError`."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await self._draft(session, context)
        except TimeoutError as error:
            raise DraftError("timeout") from error
        except LLMClientError as error:
            raise DraftError("unavailable") from error

    async def _draft(self, session: ConversationSession, context: TurnContext) -> Draft:
        language = context.language or session.language or "ru"  # the service fills it
        messages: list[Message] = [
            {
                "role": "system",
                "content": self.prompt.render(language=self.language_name(language)),
            },
            {"role": "user", "content": transcript(session, max_chars=self.max_transcript_chars)},
        ]
        newest = session.messages[-1] if session.messages else None
        if newest is not None and newest.role == "user":
            # The message to answer, on its own (as on the customer's own turn).
            messages.append({"role": "user", "content": newest.content})
        schemas = list(self.tools.schemas())
        action: SuggestedAction | None = None
        for step in range(1, self.max_steps + 1):
            last = step == self.max_steps
            result = await self.client.generate_with_tools(
                messages, [] if last else schemas, "none" if last else "auto"
            )
            if not result.tool_calls or last:
                text = (result.text or "").strip()
                if not text:
                    raise DraftError("empty")
                return Draft(text=text[:SUGGESTION_MAX_CHARS], action=action)
            messages.append(result.tool_calls_message())
            for call in result.tool_calls:
                if self.tools.needs_card(call.name):
                    proposed = await self.tools.propose(call, context)
                    if isinstance(proposed, Proposed):
                        # The first write counts: one card per suggestion.
                        action = action or SuggestedAction(
                            tool_name=proposed.action.tool_name,
                            arguments=proposed.action.arguments,
                            description=proposed.action.description,
                        )
                        content = json.dumps(_PROPOSED_NOTE)
                    else:
                        content = proposed.content
                else:
                    content = await self.tools.read(call, context)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise DraftError("empty")
