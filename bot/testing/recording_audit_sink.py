"""An audit sink that keeps the entries in a list, for tests that need no Redis."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.audit.entries import AuditEntry


@dataclass
class RecordingAuditSink:
    """The :class:`~bot.audit.entries.AuditSink` contract in memory: :attr:`entries`, in order."""

    entries: list[AuditEntry] = field(default_factory=list)

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append the entries."""
        self.entries.extend(entries)
