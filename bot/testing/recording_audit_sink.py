"""An audit sink that keeps the entries in a list, for tests that need no Redis."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.audit.schema import TURN_ID, AuditEntry


@dataclass
class RecordingAuditSink:
    """The :class:`~bot.audit.sink.AuditSink` contract in memory: :attr:`entries`, in order."""

    entries: list[AuditEntry] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    _turns: set[str] = field(default_factory=set)

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append the entries."""
        self.entries.extend(entries)
        self.rows.extend(entry.to_fields() for entry in entries)

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append entries given as stream fields, once per turn (like the Redis sink)."""
        turns = {entry.get(TURN_ID, "") for entry in entries}
        if len(turns) == 1 and "" not in turns:
            turn_id = turns.pop()
            if turn_id in self._turns:
                return
            self._turns.add(turn_id)
        self.rows.extend(dict(entry) for entry in entries)
