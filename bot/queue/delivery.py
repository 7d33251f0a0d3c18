"""The reply, in two states: :class:`Reply` before its commit, :class:`Delivery` after it.

A handler, a turn's follower or a job runner says what to send as a
:class:`Reply`: the ordered steps (:mod:`bot.queue.delivery_steps`) and the
audit entries its delivery completes. Committing it with the job (its pop, and
the session when it changed) makes it a :class:`Delivery`: the same steps and
audit, with the job they belong to, kept in the chat's outbox until a worker
has delivered it (so a crash between the commit and the send sends it then).
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.queue.delivery_steps import DeliveryStep, SendText, known_or_unknown
from bot.queue.jobs import QueuedJob
from bot.queue.legacy_outbox import is_legacy, legacy_fields, steps_of_legacy

StepT = TypeVar("StepT")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What to send for a job, not committed yet: its steps, in order, and its audit.

    ``audit`` holds audit entries as stream fields (:mod:`bot.audit.schema`); a
    turn entry among them is settled ``undelivered`` when a text of the reply
    never reaches the customer. No steps: nothing is sent (the audit is written).
    """

    steps: tuple[DeliveryStep, ...] = ()
    audit: tuple[dict[str, str], ...] = ()

    @classmethod
    def of(cls, *steps: DeliveryStep | None, audit: Iterable[dict[str, str]] = ()) -> "Reply":
        """A reply of ``steps`` in order (a ``None`` is left out: a step not needed)."""
        return cls(steps=tuple(step for step in steps if step is not None), audit=tuple(audit))

    @classmethod
    def say(cls, text: str, *, audit: Iterable[dict[str, str]] = ()) -> "Reply":
        """The bot's own ``text`` (plain), and ``audit``; an empty text sends nothing."""
        return cls.of(SendText(text=text) if text else None, audit=audit)

    @property
    def text(self) -> str:
        """The first text the customer is sent (empty when the reply sends none)."""
        return _text_of(self.steps)

    def first(self, kind: type[StepT]) -> StepT | None:
        """The first step of ``kind``, if the reply has one."""
        return _first(self.steps, kind)


class Delivery(BaseModel):
    """A reply committed with its job and not yet delivered (the chat's outbox holds it).

    The worker delivers its steps in order and writes its audit once the customer's
    part is done (:mod:`bot.telegram.delivery`). Read a stored one with :meth:`read`:
    it also reads an entry the previous version wrote (flat fields: ``format``,
    ``text``, ``card``, ``question``...) as the steps it meant.
    """

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    turn_id: str
    chat_id: int
    # No default: an entry without steps is the previous version's (see ``read``).
    steps: tuple[DeliveryStep, ...]
    audit: tuple[dict[str, str], ...] = ()

    @classmethod
    def read(cls, raw: str | bytes) -> "Delivery":
        """An outbox entry as stored: this version's (the fast path, straight from JSON);
        else the previous version's flat entry, read as the steps that deliver it as that
        version did (:mod:`bot.queue.legacy_outbox`), or a newer version's whose step
        kinds this one does not all know (those read as unknown steps, skipped).

        Raises ``ValueError`` (a pydantic ``ValidationError`` among them) when it is
        none of these.
        """
        try:
            return cls.model_validate_json(raw)
        except ValidationError as error:
            unread = error
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise unread
        if is_legacy(data):
            return cls.model_validate(steps_of_legacy(data))
        steps = data.get("steps")
        if not isinstance(steps, list):
            raise unread
        return cls.model_validate({**data, "steps": known_or_unknown(steps)})

    @classmethod
    def of(cls, job: QueuedJob, reply: Reply, *, turn_id: str | None = None) -> "Delivery":
        """``reply`` as committed for ``job`` (``turn_id``: the turn's, if not the job's)."""
        return cls(
            job_id=job.job_id,
            turn_id=job.turn_id if turn_id is None else turn_id,
            chat_id=job.chat_id,
            steps=reply.steps,
            audit=reply.audit,
        )

    def stored(self) -> str:
        """This delivery as the outbox stores it: its JSON and, for a rolling deploy, the
        previous version's flat fields that say the same reply (:func:`legacy_fields`),
        which this version ignores when it reads the entry back."""
        legacy = legacy_fields(self.steps)
        if legacy is None:
            return self.model_dump_json()
        return json.dumps(
            {**legacy, **self.model_dump(mode="json")}, ensure_ascii=False, separators=(",", ":")
        )

    @property
    def text(self) -> str:
        """The first text the customer is sent (empty when the reply sends none)."""
        return _text_of(self.steps)

    def first(self, kind: type[StepT]) -> StepT | None:
        """The first step of ``kind``, if the reply has one."""
        return _first(self.steps, kind)

    @property
    def reply(self) -> Reply:
        """The reply this delivery commits (its steps and audit, without the job)."""
        return Reply(steps=self.steps, audit=self.audit)


def _text_of(steps: tuple[DeliveryStep, ...]) -> str:
    return next((step.text for step in steps if isinstance(step, SendText)), "")


def _first(steps: tuple[DeliveryStep, ...], kind: type[StepT]) -> StepT | None:
    return next((step for step in steps if isinstance(step, kind)), None)
