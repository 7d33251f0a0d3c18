"""Every Redis key of the project, built in one place; nothing else spells a key.

Everything of one conversation shares the conversation's hash tag, so every
script touches one cluster slot. Keys of different slots are only ever used
by single-key commands (the work stream, the audit stream). ``<prefix>`` is
``REDIS_KEY_PREFIX``; the audit stream is named by ``AUDIT_STREAM`` alone.

| key (after ``<prefix>:``)         | type   | TTL                 | written by     | read by  |
|-----------------------------------|--------|---------------------|----------------|----------|
| ``{<conv>}:session``              | hash   | SESSION_TTL_SECONDS | commit,summary | turns    |
| ``{<conv>}:lease``                | string | SESSION_LEASE_SECS  | worker         | workers  |
| ``{<conv>}:queue``                | list   | none (never expires)| intake         | worker   |
| ``{<conv>}:seen:<update id>``     | string | 24 h                | intake         | intake   |
| ``{<conv>}:outbox``               | hash   | SESSION_TTL_SECONDS | commit         | delivery |
| ``{<conv>}:flood:<user id>``      | hash   | burst x interval    | intake         | intake   |
| ``{<conv>}:queue_full``           | string | 24 h                | intake         | intake   |
| ``{<conv>}:turns:<user>:<day>``   | string | 2 days              | intake         | intake   |
| ``{<conv>}:blocked``              | string | 30 days             | my_chat_member | delivery |
| ``{<conv>}:archive:<session id>`` | hash   | SESSION_ARCHIVE_TTL | ``/new``       | staff    |
| ``{<conv>}:quarantine:<time>``    | hash   | SESSION_ARCHIVE_TTL | bad session    | staff    |
| ``{<conv>}:quarantine:outbox``    | hash   | SESSION_ARCHIVE_TTL | bad outbox     | staff    |
| ``{<conv>}:attempts``             | hash   | SESSION_TTL_SECONDS | worker         | worker   |
| ``{<conv>}:released``             | string | SESSION_LEASE_SECS  | worker         | worker   |
| ``{<conv>}:redriven:<turn id>``   | string | 30 days             | staff CLI      | staff CLI|
| ``{<conv>}:cards``                | hash   | SESSION_TTL_SECONDS | delivery       | delivery |
| ``{<conv>}:topic:<staff chat>``   | string | 30 days (renewed)   | handoff        | handoff  |
| ``{<conv>}:topic`` (before #22)   | string | none                | (old versions) | handoff  |
| ``{<conv>}:failed``               | list   | 7 days              | failed turns   | handoff  |
| ``{<conv>}:failed_streak``        | set    | 7 days              | turns          | handoff  |
| ``{<conv>}:csat``                 | hash   | max(interval, 7 d)  | CSAT ask/press | CSAT     |
| ``{<conv>}:analysis``             | hash   | SESSION_TTL_SECONDS | analysis       | staff    |
| ``{<conv>}:action:<action id>``   | string | SESSION_ARCHIVE_TTL | action press   | press    |
| ``{<conv>}:album:<group id>``     | string | 24 h                | photo turn     | photos   |
| ``{staff:<chat>}:topic:<thread>`` | string | 30 days (renewed)   | handoff        | intake   |
| ``{staff:<chat>}:seen:<update id>`` | string | 24 h            | intake         | intake   |
| ``{staff:<chat>}:flood:<user id>`` | hash   | burst x interval   | intake         | intake   |
| ``{staff:<chat>}:open``           | zset   | none                | desk, sweeper  | sweeper  |
| ``{csat}:due``                    | zset   | none (asked: gone)  | delivery       | sweeper  |
| ``{analysis}:due``                | zset   | none (done: gone)   | delivery       | sweeper  |
| ``{analysis}:soon``               | zset   | none (done: gone)   | text turn      | sweeper  |
| ``{dead_letters}:jobs``           | hash   | none (10,000 kept)  | worker         | CLI      |
| ``{dead_letters}:order``          | zset   | none (10,000 kept)  | worker         | CLI      |
| ``{shop:<customer>}:orders``      | hash   | 30 days             | demo shop      | tools    |
| ``{shop:<customer>}:done:<key>``  | string | 30 days             | demo shop      | demo shop|
| ``work``                          | stream | MAXLEN ~ 100,000    | intake         | workers  |
| ``{<prefix>:work}:queued``        | zset   | none (swept)        | signal         | sweep    |
| ``{<prefix>:work}:sweep``         | string | one sweep period    | sweep          | sweep    |
| ``AUDIT_STREAM`` (no prefix)      | stream | AUDIT_STREAM_MAXLEN | audit sink     | CLI      |
| ``{AUDIT_STREAM}:done:<turn id>`` | string | 24 h                | audit sink     | sink     |
| ``{AUDIT_STREAM}:index:*``        | various| trimmed with stream | audit sink     | CLI      |

``<conv>`` is a conversation key: ``tg:<chat id>`` for Telegram, the console's
own name for the console; its alphabet is :data:`KEY_ALPHABET`.
``{<prefix>:work}:...`` takes no other prefix: the stream's name is the hash
tag, so the stream and its index share a slot. A chat's queue never expires: it
holds accepted messages, and it is gone once its last job is popped.
"""

import re
from dataclasses import dataclass

from bot.settings import KEY_ALPHABET

_CONVERSATION = re.compile(rf"[{KEY_ALPHABET}]{{1,128}}")
_NOT_IN_ALPHABET = re.compile(rf"[^{KEY_ALPHABET}]")


def telegram_conversation(chat_id: int) -> str:
    """The conversation key of a Telegram chat (one conversation per chat)."""
    return f"tg:{chat_id}"


def telegram_chat_id(conversation_key: str) -> int | None:
    """The chat id of a Telegram conversation key, ``None`` for other front ends."""
    prefix, _, rest = conversation_key.partition(":")
    if prefix != "tg":
        return None
    try:
        return int(rest)
    except ValueError:
        return None


def is_conversation_key(raw: str) -> bool:
    """Whether ``raw`` is a valid conversation key (:data:`KEY_ALPHABET`, 1 to 128 characters)."""
    return _CONVERSATION.fullmatch(raw) is not None


def safe_conversation_key(raw: str, fallback: str) -> str:
    """``raw`` made into a valid conversation key (other characters become ``_``)."""
    return _NOT_IN_ALPHABET.sub("_", raw)[:64] or fallback


@dataclass(frozen=True, slots=True)
class ConversationKeys:
    """The keys of one conversation, all under its hash tag ``{<conversation>}``."""

    base: str

    @property
    def session(self) -> str:
        """The stored session (hash: ``v`` version, ``d`` JSON, ``c`` the lease token that
        saved it, ``h`` the handoff state while a person has the chat, which intake reads
        without parsing the JSON)."""
        return f"{self.base}:session"

    @property
    def lease(self) -> str:
        """The worker lease: a token, renewed by heartbeat while turns run."""
        return f"{self.base}:lease"

    @property
    def queue(self) -> str:
        """The chat's FIFO of accepted updates, in intake order."""
        return f"{self.base}:queue"

    @property
    def outbox(self) -> str:
        """Replies committed and not yet delivered (hash: job id -> JSON)."""
        return f"{self.base}:outbox"

    @property
    def blocked(self) -> str:
        """Set while the customer has blocked the bot: nothing is sent to the chat."""
        return f"{self.base}:blocked"

    @property
    def topic(self) -> str:
        """Before issue 22: the customer's topic in an unnamed staff group (read to adopt it)."""
        return f"{self.base}:topic"

    def topic_in(self, staff_chat_id: int) -> str:
        """The customer's forum topic (thread id) in staff group ``staff_chat_id``.

        Thread ids are message ids of their group: the same id names another
        customer's topic in another group, so the group is part of the key.
        """
        return f"{self.base}:topic:{staff_chat_id}"

    @property
    def failed(self) -> str:
        """Incident codes of the latest failed turns (newest first), for the staff header."""
        return f"{self.base}:failed"

    @property
    def failed_streak(self) -> str:
        """Failed turns in a row (deleted by an answered turn's commit): the handoff trigger."""
        return f"{self.base}:failed_streak"

    def seen(self, update_id: int) -> str:
        """Marks an update id as accepted (de-duplication at intake)."""
        return f"{self.base}:seen:{update_id}"

    def flood(self, user_id: int) -> str:
        """A user's token bucket in this chat."""
        return f"{self.base}:flood:{user_id}"

    @property
    def queue_full(self) -> str:
        """Set once the customer was told the queue is full; cleared when it has room again."""
        return f"{self.base}:queue_full"

    def daily_turns(self, user_id: int, day: str) -> str:
        """A user's count of model turns in this chat on ``day`` (``YYYYMMDD``, UTC)."""
        return f"{self.base}:turns:{user_id}:{day}"

    def archive(self, session_id: str) -> str:
        """A session moved aside by ``/new``."""
        return f"{self.base}:archive:{session_id}"

    def quarantine(self, stamp: str) -> str:
        """An unreadable session moved aside."""
        return f"{self.base}:quarantine:{stamp}"

    @property
    def outbox_quarantine(self) -> str:
        """Outbox entries this version could not read, moved aside (hash: job id -> as read)."""
        return f"{self.base}:quarantine:outbox"

    @property
    def cards(self) -> str:
        """Confirmation cards sent to the chat (hash: action id -> message id), to edit later."""
        return f"{self.base}:cards"

    def action_run(self, action_id: str) -> str:
        """A confirmed action's call has started (string ``executing``; see bot/actions/runs.py)."""
        return f"{self.base}:action:{action_id}"

    @property
    def csat(self) -> str:
        """The satisfaction question's state (hash: when last asked, the open question, its
        answer, whether a person answered since; see :mod:`bot.csat.schedule`)."""
        return f"{self.base}:csat"

    @property
    def analysis(self) -> str:
        """The conversation's last analysis (hash: ``v`` the session version analysed, ``by``
        who claimed it, ``a`` the analysis JSON with the summary for staff; see
        :mod:`bot.analysis.schedule`)."""
        return f"{self.base}:analysis"

    def album_charged(self, media_group_id: str) -> str:
        """How many photos of album ``media_group_id`` intake took in on one flood charge."""
        return f"{self.base}:album_charged:{media_group_id}"

    def album(self, media_group_id: str) -> str:
        """Which queued photos of album ``media_group_id`` one turn took (JSON: leader, members)."""
        return f"{self.base}:album:{media_group_id}"

    @property
    def attempts(self) -> str:
        """How often each queued job was handed to a worker (hash, see bot.queue.chat_queue)."""
        return f"{self.base}:attempts"

    @property
    def released(self) -> str:
        """The token of the worker that last handed the chat back once all was done (string,
        one lease long): a repeated ``delivered`` finds its own release there."""
        return f"{self.base}:released"

    def redriven(self, turn_id: str) -> str:
        """Set once the dead letter of ``turn_id`` was queued again (a retry runs it once)."""
        return f"{self.base}:redriven:{turn_id}"


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """Key builders under ``REDIS_KEY_PREFIX``."""

    prefix: str

    def conversation(self, conversation_key: str) -> ConversationKeys:
        """The keys of one conversation; refuses a key outside :data:`KEY_ALPHABET`."""
        if _CONVERSATION.fullmatch(conversation_key) is None:
            raise ValueError(f"invalid conversation key {conversation_key!r}")
        return ConversationKeys(f"{self.prefix}:{{{conversation_key}}}")

    def staff_topic(self, staff_chat_id: int, thread_id: int) -> str:
        """Which customer conversation a staff forum topic belongs to (the reverse mapping)."""
        return f"{self.prefix}:{{staff:{staff_chat_id}}}:topic:{thread_id}"

    def open_handoffs(self, staff_chat_id: int) -> str:
        """Conversations handed to staff, scored by their last activity (ms): the idle sweep.

        After queueing an idle check the sweeper moves the score on by its retry delay.
        """
        return f"{self.prefix}:{{staff:{staff_chat_id}}}:open"

    def staff_seen(self, staff_chat_id: int, update_id: int) -> str:
        """A staff topic message's flood verdict in its group, kept for a redelivery."""
        return f"{self.prefix}:{{staff:{staff_chat_id}}}:seen:{update_id}"

    def staff_flood(self, staff_chat_id: int, user_id: int) -> str:
        """A staff member's token bucket in staff group ``staff_chat_id`` (all topics)."""
        return f"{self.prefix}:{{staff:{staff_chat_id}}}:flood:{user_id}"

    @property
    def csat_due(self) -> str:
        """Conversations waiting for the satisfaction question, scored by when it is due (ms).

        One zset (its own slot) for every chat: a claim moves a due score on by the
        retry delay in one script, so one process queues the question.
        """
        return f"{self.prefix}:{{csat}}:due"

    @property
    def analysis_due(self) -> str:
        """Conversations to analyse once idle, scored by when they are due (ms).

        Claimed like :attr:`csat_due`; see :mod:`bot.analysis.schedule`.
        """
        return f"{self.prefix}:{{analysis}}:due"

    @property
    def analysis_soon(self) -> str:
        """Conversations to analyse early (an upset customer), scored by when (ms).

        Claimed like :attr:`analysis_due`; see :mod:`bot.analysis.schedule`.
        """
        return f"{self.prefix}:{{analysis}}:soon"

    @property
    def dead_letters(self) -> str:
        """Jobs given up after ``JOB_MAX_ATTEMPTS``, for staff (hash: turn id -> JSON)."""
        return f"{self.prefix}:{{dead_letters}}:jobs"

    @property
    def dead_letter_order(self) -> str:
        """The dead letters' turn ids by when they were given up (zset, ms): newest, trimming."""
        return f"{self.prefix}:{{dead_letters}}:order"

    def shop_orders(self, customer_key: str) -> str:
        """The demo shop's orders of one customer (hash: order id -> JSON), changed by writes."""
        return f"{self.prefix}:{{shop:{_shop_customer(customer_key)}}}:orders"

    def shop_done(self, customer_key: str, idempotency_key: str) -> str:
        """A demo shop write already applied under ``idempotency_key`` (its receipt)."""
        customer = _shop_customer(customer_key)
        return f"{self.prefix}:{{shop:{customer}}}:done:{_shop_customer(idempotency_key)}"

    @property
    def work_stream(self) -> str:
        """The stream that tells workers a conversation has queued work."""
        return f"{self.prefix}:work"

    @staticmethod
    def work_queued(stream: str) -> str:
        """Chats signalled on work stream ``stream``, until a sweep sees their queue empty.

        A sorted set (conversation key, scored by the ms of its last signal) in the
        stream's own slot, so that one script writes the signal and its entry.
        """
        return f"{_same_slot(stream)}:queued"

    @staticmethod
    def work_sweep(stream: str) -> str:
        """Taken (``SET NX PX``) by the one process that sweeps ``stream``'s chats this time."""
        return f"{_same_slot(stream)}:sweep"

    @staticmethod
    def audit_done(stream: str, turn_id: str) -> str:
        """Marks a turn's audit entries as written, in the audit stream's own slot.

        A stream name that carries a hash tag of its own keeps it (the name is the
        prefix); any other name becomes the tag.
        """
        return f"{_same_slot(stream)}:done:{turn_id}"

    @staticmethod
    def audit_index(stream: str) -> "AuditIndexKeys":
        """The audit stream's lookup index and per-minute rollups, in the stream's own slot."""
        return AuditIndexKeys(f"{_same_slot(stream)}:index")


@dataclass(frozen=True, slots=True)
class AuditIndexKeys:
    """The index the audit sink writes with each turn (no text, no arguments in any of it).

    Trimmed with the stream by the write script: what the stream no longer holds,
    the index no longer names. The script builds ``minute`` and ``minute_chats``
    keys from :attr:`minute_prefix` and the minute number, as these methods do.
    """

    base: str

    @property
    def turns(self) -> str:
        """Hash: turn id -> ``<chat>|<entry id>,<entry id>,...``."""
        return f"{self.base}:turns"

    @property
    def order(self) -> str:
        """Zset: turn id scored by the ms of its newest entry (what trimming walks)."""
        return f"{self.base}:order"

    @property
    def chats(self) -> str:
        """Hash: chat (as the stream holds it) -> its newest turn ids, newest first (bounded)."""
        return f"{self.base}:chats"

    @property
    def names(self) -> str:
        """Hash: ``tool:<name>``, ``status:<status>``, ``outcome:<outcome>`` -> last seen ms
        (the end of the minute it was last seen in: written once a minute per name)."""
        return f"{self.base}:names"

    @property
    def minutes(self) -> str:
        """Zset: the minutes (since the epoch) that have a rollup."""
        return f"{self.base}:minutes"

    @property
    def start(self) -> str:
        """String: the first entry id the index covers (older entries are only in the stream)."""
        return f"{self.base}:start"

    @property
    def minute_prefix(self) -> str:
        """What a minute's keys start with; the minute number follows."""
        return f"{self.base}:m:"

    def minute(self, minute: int) -> str:
        """Hash: one minute's counts and histogram buckets (``n|<name>``: entries naming it)."""
        return f"{self.minute_prefix}{minute}"

    def minute_chats(self, minute: int) -> str:
        """HyperLogLog: the chats that had turns in one minute (for the handoff rate)."""
        return f"{self.minute_prefix}{minute}:c"


def _same_slot(key: str) -> str:
    """A name that hashes to ``key``'s cluster slot: ``key`` itself as a hash tag.

    A key that carries a hash tag of its own keeps it (its slot is the tag's).
    """
    opening = key.find("{")
    closing = key.find("}", opening + 1)
    if opening != -1 and closing > opening + 1:
        return key
    return f"{{{key}}}"


def _shop_customer(raw: str) -> str:
    if _CONVERSATION.fullmatch(raw) is None:
        raise ValueError(f"invalid shop key part {raw!r}")
    return raw
