"""Where a turn's audit entries go: the seam between the chat service and the stream."""

from collections.abc import Mapping, Sequence
from typing import Protocol

from bot.audit.schema import AuditEntry


class AuditSink(Protocol):
    """Where a turn's audit entries go, all at once at the end of the turn.

    ``write`` must not raise: an audit failure never costs the customer an answer.
    """

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append the entries, in order."""
        ...

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append entries given as stream fields; a turn's entries are written once.

        The fields are :mod:`bot.audit.schema` entries' ``to_fields()`` (a worker
        carries a turn's audit through the outbox in that form).
        """
        ...
