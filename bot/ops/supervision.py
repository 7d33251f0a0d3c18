"""Supervised tasks: every long-lived task of a process runs under one supervisor.

A task that fails because Redis is briefly unavailable (a lost connection, a
timeout, or a refusal that passes on its own: ``NOREPLICAS``, ``MISCONF``,
``READONLY``, ``OOM``, ``LOADING``, ``BUSY``, ``TRYAGAIN``, ``CLUSTERDOWN``,
``MASTERDOWN``) is run again with back-off, and the outage is logged once
(again only if its kind changes), not once per retry. Any other exception is
logged with its traceback and the task restarts, with back-off too. A task
that has run for ``healthy_after_seconds`` without failing is healthy again:
its back-off starts over.

A task that cannot be restarted is given up: more than ``max_restarts``
unexpected failures within ``restart_window_seconds``, or an error no restart
can mend (Redis refusing the credentials or the command: only a new process,
with its configuration read again, can). The supervisor then reports the
failure (``/healthz`` answers 503 naming the task) and calls ``on_failure``,
with which the process stops and exits non-zero, so that whatever runs it
(systemd, Docker, Kubernetes) starts it afresh.
"""

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

TRANSIENT_REDIS_CODES = frozenset(
    {
        "NOREPLICAS",
        "MISCONF",
        "READONLY",
        "OOM",
        "LOADING",
        "BUSY",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "MASTERDOWN",
        # A blocking read cut short because the server became a replica (a fail-over).
        "UNBLOCKED",
    }
)
"""Error replies of a Redis that refuses for a while: a fail-over, a full disk, memory, a load."""


class FailureKind(StrEnum):
    """How the supervisor treats an exception a task raised."""

    TRANSIENT = "transient"
    """Redis is unavailable for a while: retry with back-off, log once."""
    UNEXPECTED = "unexpected"
    """A bug or an unforeseen state: log the traceback, restart (a bounded number of times)."""
    FATAL = "fatal"
    """No restart can mend it: give the task up at once."""


def redis_error_code(error: RedisError) -> str:
    """The code of a Redis error reply (``NOREPLICAS``, ``READONLY``...), ``""`` if none."""
    # redis-py strips the code off the message of the replies it maps to a class
    # (READONLY, OOM, LOADING...) and keeps it in status_code; other replies keep it in front.
    code = getattr(error, "status_code", None)
    if isinstance(code, str) and code:
        return code
    first = str(error).split(" ", 1)[0]
    return first if first.isalpha() and first.isupper() else ""


def classify(error: BaseException) -> FailureKind:
    """Transient (Redis or the network unavailable for a while), fatal, or unexpected."""
    # Before ConnectionError: redis-py's authentication errors are ConnectionErrors.
    if isinstance(error, AuthenticationError | AuthorizationError | NoPermissionError):
        return FailureKind.FATAL
    if isinstance(error, RedisConnectionError | RedisTimeoutError | OSError):
        return FailureKind.TRANSIENT
    if isinstance(error, ResponseError) and redis_error_code(error) in TRANSIENT_REDIS_CODES:
        return FailureKind.TRANSIENT
    return FailureKind.UNEXPECTED


def describe(error: BaseException) -> str:
    """The kind of ``error`` for a log line or ``/healthz``: its class and code, never its text."""
    name = type(error).__name__
    code = redis_error_code(error) if isinstance(error, RedisError) else ""
    return f"{name} {code}" if code and code != name else name


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisionPolicy:
    """Back-off, when a task counts as healthy again, and the restart budget."""

    backoff_first_seconds: float = 0.2
    backoff_max_seconds: float = 5.0
    healthy_after_seconds: float = 10.0
    max_restarts: int = 5
    restart_window_seconds: float = 60.0

    def backoff(self, failures: int) -> float:
        """The pause before attempt ``failures + 1``: doubling from the first, capped."""
        growth = 2.0 ** min(max(failures - 1, 0), 32)
        return min(self.backoff_first_seconds * growth, self.backoff_max_seconds)


class TaskState(StrEnum):
    """What a supervised task is doing, as ``/healthz`` reports it."""

    RUNNING = "running"
    RETRYING = "retrying"
    """Waiting for Redis: the process is fine, Redis's health is reported on its own."""
    RESTARTING = "restarting"
    """Failed unexpectedly, restarts after its back-off."""
    FAILED = "failed"
    """Given up: the process stops and exits non-zero."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFailure:
    """A task given up: its name and why (error kinds only)."""

    task: str
    reason: str


@dataclass(slots=True)
class _Record:
    state: TaskState = TaskState.RUNNING
    reason: str = ""
    # Failures since the task was last healthy: the back-off grows with them.
    failures: int = 0
    # Whether the last failure was a Redis outage (for the line that says it is over).
    outage: bool = False
    # The transient kind last logged, so that an outage is logged once.
    logged: str = ""
    outage_started: float | None = None
    crashes: deque[float] = field(default_factory=deque)


class TaskSupervisor:
    """Runs the long-lived tasks of one process: retries, restarts, gives up (see module doc).

    ``clock`` (monotonic seconds) counts the restart window and the length of an
    outage; ``sleep`` waits out the back-off. Both are injectable for tests.
    """

    def __init__(
        self,
        *,
        policy: SupervisionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_failure: Callable[[TaskFailure], None] | None = None,
    ) -> None:
        self._policy = policy or SupervisionPolicy()
        self._clock = clock
        self._sleep = sleep
        self._on_failure = on_failure
        self._records: dict[str, _Record] = {}
        self._spawned: set[asyncio.Task[None]] = set()
        self._failure: TaskFailure | None = None
        self._stopping = asyncio.Event()

    @property
    def failure(self) -> TaskFailure | None:
        """The first task given up, if any (the process is stopping then)."""
        return self._failure

    def states(self) -> dict[str, str]:
        """Every supervised task that is not simply running: name -> ``state: reason``."""
        return {
            name: f"{record.state}: {record.reason}"
            for name, record in self._records.items()
            if record.state is not TaskState.RUNNING
        }

    def down(self) -> dict[str, str]:
        """The tasks that are not working for a reason of their own (restarting or failed)."""
        return {
            name: f"{record.state}: {record.reason}"
            for name, record in self._records.items()
            if record.state in (TaskState.RESTARTING, TaskState.FAILED)
        }

    def stop(self) -> None:
        """The process is stopping: no task is started again, back-off pauses end now."""
        self._stopping.set()

    def spawn(
        self,
        name: str,
        body: Callable[[], Awaitable[None]],
        *,
        stop: asyncio.Event | None = None,
    ) -> "asyncio.Task[None]":
        """:meth:`run` in a task of its own (referenced here until it ends)."""
        task = asyncio.create_task(self.run(name, body, stop=stop), name=f"supervised:{name}")
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    async def run(
        self,
        name: str,
        body: Callable[[], Awaitable[None]],
        *,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Run ``body()`` until it returns, starting it again after each failure.

        Returns when ``body`` returns, when ``stop`` (or :meth:`stop`) is set
        during a back-off, or when the task is given up (see :attr:`failure`).
        """
        if name in self._records:
            raise ValueError(f"a task named {name!r} is already supervised")
        record = _Record()
        self._records[name] = record
        try:
            while not self._stopped(stop):
                error = await self._attempt(name, body, record)
                if error is None:
                    return
                delay = self._after_failure(name, record, error)
                if delay is None or not await self._pause(delay, stop):
                    return
        finally:
            # A failed task stays listed: /healthz names it until the process exits.
            if record.state is not TaskState.FAILED:
                del self._records[name]

    async def _attempt(
        self, name: str, body: Callable[[], Awaitable[None]], record: _Record
    ) -> Exception | None:
        """Run ``body`` once; the exception it ended with, ``None`` if it returned."""

        async def call() -> None:
            await body()

        # Retrying or restarting only while it waits: a task that runs again is working.
        record.state = TaskState.RUNNING
        record.reason = ""
        task = asyncio.create_task(call(), name=name)
        try:
            done, _ = await asyncio.wait({task}, timeout=self._policy.healthy_after_seconds)
            if not done:
                self._healthy(name, record)
                await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise
        if task.cancelled():
            return None
        error = task.exception()
        if error is None:
            return None
        if not isinstance(error, Exception):
            # KeyboardInterrupt, SystemExit: not ours to handle.
            raise error
        return error

    def _healthy(self, name: str, record: _Record) -> None:
        """The task has run long enough without failing: it is well again."""
        if record.failures and record.outage:
            started = record.outage_started
            took = self._clock() - started if started is not None else 0.0
            logger.info(
                "%s works again after %d retries in %.1f s (%s)",
                name,
                record.failures,
                took,
                record.logged,
            )
        elif record.failures:
            logger.info("%s works again after its restart", name)
        record.failures = 0
        record.outage = False
        record.logged = ""
        record.outage_started = None

    def _after_failure(self, name: str, record: _Record, error: Exception) -> float | None:
        """Record a failure; the back-off before the next attempt, ``None`` if given up."""
        kind = classify(error)
        reason = describe(error)
        if kind is FailureKind.FATAL:
            self._give_up(name, record, f"{reason}: a restart cannot mend it")
            return None
        record.failures += 1
        delay = self._policy.backoff(record.failures)
        record.reason = reason
        record.outage = kind is FailureKind.TRANSIENT
        if kind is FailureKind.TRANSIENT:
            record.state = TaskState.RETRYING
            if record.outage_started is None:
                record.outage_started = self._clock()
            if record.logged != reason:
                record.logged = reason
                logger.warning(
                    "%s: Redis unavailable (%s); retrying with back-off "
                    "(logged again when it works or the error changes)",
                    name,
                    reason,
                )
            else:
                logger.debug("%s: still unavailable (%s); retry in %.1f s", name, reason, delay)
            return delay
        now = self._clock()
        record.crashes.append(now)
        while record.crashes and now - record.crashes[0] > self._policy.restart_window_seconds:
            record.crashes.popleft()
        record.logged = ""
        if len(record.crashes) > self._policy.max_restarts:
            logger.error("%s failed (%s)", name, reason, exc_info=error)
            self._give_up(
                name,
                record,
                f"{len(record.crashes)} failures within "
                f"{self._policy.restart_window_seconds:.0f} s, the last {reason}",
            )
            return None
        record.state = TaskState.RESTARTING
        logger.error("%s failed (%s); restarting it in %.1f s", name, reason, delay, exc_info=error)
        return delay

    def _give_up(self, name: str, record: _Record, reason: str) -> None:
        record.state = TaskState.FAILED
        record.reason = reason
        logger.error(
            "%s cannot be restarted (%s): the process stops and exits with code 1", name, reason
        )
        if self._failure is None:
            self._failure = TaskFailure(task=name, reason=reason)
            if self._on_failure is not None:
                self._on_failure(self._failure)

    def _stopped(self, stop: asyncio.Event | None) -> bool:
        return self._stopping.is_set() or (stop is not None and stop.is_set())

    async def _pause(self, delay: float, stop: asyncio.Event | None) -> bool:
        """Wait out the back-off; ``False`` if the task is to stop instead."""
        waits = [
            asyncio.ensure_future(self._sleep(delay)),
            asyncio.ensure_future(self._stopping.wait()),
        ]
        if stop is not None:
            waits.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                if not waiting.done():
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiting
        return not self._stopped(stop)
