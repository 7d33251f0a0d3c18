"""Account linking as the audit stream tells it: ``type=link`` entries, never the number.

An entry says what became of one shared contact (``event``) and which lookup
answered (``tool_name``, the ``ACCOUNT_LINK_TOOL``); never the phone number, the
contact's name or the shop's customer id (the session keeps that).
"""

from dataclasses import dataclass, field
from typing import Literal

from bot.audit.schema import CHAT_ID, TOOL_NAME, TURN_ID, EntryType, StreamRecord, stream_field

LinkEvent = Literal["linked", "not_own_contact", "not_found", "unavailable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkAuditEntry(StreamRecord):
    """What became of one shared contact: linked, someone else's, unknown to the shop, no answer."""

    entry_type = EntryType.LINK

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    # In the tool column of ``support-audit tail`` (``--tool`` finds it there).
    tool: str = field(metadata=stream_field(TOOL_NAME))
