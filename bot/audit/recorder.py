"""Collects one turn's audit entries as they happen, for one write at the end."""

from dataclasses import dataclass, field

from bot.audit.schema import AuditEntry, ToolAuditEntry, TurnAuditEntry
from bot.llm.types import LLMResult
from tools.execution import ToolExecutionRecord
from turn import TEXT_INPUT, TurnInput, TurnOutcome, Usage


@dataclass
class TurnAuditRecorder:
    """A :class:`~bot.engine.tool_loop.ToolLoopObserver` that remembers what one turn did."""

    chat_id: str
    turn_id: str
    model: str
    queue_ms: float | None = None
    # What the customer sent: its kind (and a voice message's numbers) go into the turn entry.
    turn_input: TurnInput = TEXT_INPUT
    # The conversation's language code ("" when the front end decides none).
    language: str = ""
    tool_entries: list[ToolAuditEntry] = field(default_factory=list)
    responses: list[LLMResult] = field(default_factory=list)

    def on_model_response(self, step: int, result: LLMResult) -> None:
        """Remember the response for the turn's counts."""
        self.responses.append(result)

    def on_tool_executed(self, step: int, record: ToolExecutionRecord) -> None:
        """Remember the executor's record as a tool entry of this turn."""
        self.tool_entries.append(
            ToolAuditEntry.from_record(
                record, chat_id=self.chat_id, turn_id=self.turn_id, step=step
            )
        )

    def entries(
        self, outcome: TurnOutcome, latency_ms: float, prompt_id: str, prompt_version: str
    ) -> list[AuditEntry]:
        """The tool entries in order, then the turn entry."""
        turn = TurnAuditEntry(
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            outcome=outcome,
            model=self.responses[-1].model if self.responses else self.model,
            model_steps=len(self.responses),
            tool_calls=len(self.tool_entries),
            tool_names=tuple(entry.tool_name for entry in self.tool_entries),
            usage=Usage.total(r.usage for r in self.responses),
            latency_ms=latency_ms,
            queue_ms=self.queue_ms,
            prompt_id=prompt_id,
            prompt_version=prompt_version,
            input_kind=self.turn_input.kind,
            voice_seconds=self.turn_input.voice_seconds,
            transcription_ms=self.turn_input.transcription_ms,
            language=self.language,
        )
        return [*self.tool_entries, turn]
