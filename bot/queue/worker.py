"""Workers: claim chats with queued work, hold their lease by heartbeat, drain them in order.

At most ``concurrency`` chats are drained at once per process; everything
else waits in Redis (a worker reads only as many signals as it has free
slots). A signal stays pending until its chat is drained, so a worker that
dies leaves its chats to the others: they claim signals idle for about one
lease. On a graceful stop a worker stops claiming, lets the chats it drains
finish their current job within the grace, then hands what is left back
(release the lease, signal again) instead of waiting to be reclaimed.

The worker alone finishes a job (as arq's ``finish_job``): the front end's
runner runs it under the job's deadline and says what happened (a
:class:`~bot.queue.job_results.JobOutcome`); the worker pops it (unless the
handler's own commit did, with the session), delivers its reply, marks it
delivered and moves on. A run that overruns the deadline is cancelled and
counted as a failed attempt: the chat is handed back at once and the job runs
again, until its attempts are spent and it is given up kindly.
"""

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from bot.ops.log_context import chat_label
from bot.ops.retry import RetryCounter
from bot.ops.supervision import TaskSupervisor
from bot.queue.chat_queue import ChatQueue, ChatState, LeaseLostError
from bot.queue.delivery import Delivery, Reply
from bot.queue.job_results import JobDone, JobDropped, JobOutcome
from bot.queue.redis_patience import BOOKKEEPING_RETRY_SECONDS, until_redis_answers
from bot.queue.sweep import QueueSweep
from bot.queue.work_stream import Acknowledger, Signal, WorkStream

logger = logging.getLogger(__name__)

_ACK_FLUSH_SECONDS = 5.0

DEADLINE_EXCEEDED = "JobDeadlineExceeded"
"""The failure kind noted beside a job whose run overran the worker's deadline."""


@dataclass(slots=True)
class HeldLease:
    """A chat this worker drains: its key, its lease token, whether the heartbeat lost it."""

    conversation_key: str
    token: str
    lost: bool = False
    # The head job this lease was handed and did not run (stopping): not an attempt.
    unrun_job_id: str = ""


class JobOverrunError(RuntimeError):
    """A job's run took longer than the worker's deadline and was cancelled."""


class JobRunner(Protocol):
    """The front end's part of a worker: run a job, deliver a reply, summarise."""

    async def run(self, state: ChatState, lease: HeldLease) -> JobOutcome:
        """Run the head job of ``state`` and say what happened; the worker finishes it."""
        ...

    async def tell(self, reply: Delivery) -> None:
        """Send ``reply``'s texts and write its audit without the queue: Redis lost its job."""
        ...

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        """Deliver a committed reply's steps, record it undelivered if it cannot be, audit it.

        ``blocked``: the customer blocked the bot (read with the chat's state).
        """
        ...

    async def summarise(self, lease: HeldLease) -> None:
        """Fold old messages into the summary while the lease is held."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPoolConfig:
    """How many chats at once, how long a lease lasts, how long shutdown may wait."""

    concurrency: int
    lease_seconds: float
    shutdown_grace_seconds: float
    read_block_ms: int = 1000
    # How often the backlog is logged (only while there is one).
    backlog_log_seconds: float = 60.0
    # How long handing a chat back waits out a Redis outage (REDIS_OUTAGE_WAIT_SECONDS).
    outage_wait_seconds: float = BOOKKEEPING_RETRY_SECONDS
    # The longest one job's run may take (JOB_DEADLINE_SECONDS); delivery is bounded
    # by the sender's own attempts.
    job_deadline_seconds: float = 300.0


@dataclass
class _Slots:
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class WorkerPool:
    """Drains chats signalled on the work stream, ``concurrency`` at a time."""

    def __init__(
        self,
        *,
        stream: WorkStream,
        queue: ChatQueue,
        runner: JobRunner,
        settings: WorkerPoolConfig,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        supervisor: TaskSupervisor | None = None,
        retries: RetryCounter | None = None,
    ) -> None:
        """``retries``: where the hand-back's retries are counted (the metrics)."""
        self._stream = stream
        # The claim loop and the backlog log are supervised: a Redis outage is
        # retried, a crash restarts them, and a loop that cannot go on stops the process.
        self._supervisor = supervisor if supervisor is not None else TaskSupervisor()
        self._acks = Acknowledger(stream)
        self._queue = queue
        self._runner = runner
        self._settings = settings
        self._sleep = sleep
        self._retries = retries
        self._slots = _Slots()
        # Chats drained here, with the signal each drain keeps pending until it is done.
        self._draining: dict[str, str] = {}
        # A signal read for a chat while it was drained here: that drain may have released
        # the chat in Redis already (its last script's reply still on its way), so the
        # chat is drained once more for it rather than the signal taken as covered.
        self._again: dict[str, Signal] = {}
        # Signals lost anyway (by mistake, to trimming, to a fail-over) are sent again.
        self._sweep = QueueSweep(
            stream=stream, queue=queue, lease_seconds=settings.lease_seconds, sleep=sleep
        )
        self._stopping = asyncio.Event()
        self._free = asyncio.Event()
        self._free.set()

    @property
    def active(self) -> int:
        """Chats being drained by this process now."""
        return len(self._slots.tasks)

    async def run(self) -> None:
        """Claim and drain until :meth:`stop`; then wait (bounded) for the chats in hand.

        Also returns when the supervisor gives the claim loop up (the process
        stops then): the chats in hand finish their job and are handed back.
        """
        reporting = self._supervisor.spawn("backlog-log", self._report_backlog, stop=self._stopping)
        sweeping = self._supervisor.spawn("queue-sweep", self._sweep.run, stop=self._stopping)
        try:
            await self._supervisor.run("claim-loop", self._claim_and_drain, stop=self._stopping)
        finally:
            for task in (reporting, sweeping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._stopping.set()
        await self._finish()

    async def _report_backlog(self) -> None:
        """Log the queue depth and the oldest wait now and then, while work is waiting."""
        while True:
            await self._sleep(self._settings.backlog_log_seconds)
            backlog = await self._stream.backlog(int(time.time() * 1000))
            if backlog.chats:
                logger.info(
                    "Backlog: %d chat(s) with queued messages, the oldest waiting %.1f s; "
                    "%d drained here now",
                    backlog.chats,
                    backlog.oldest_seconds,
                    self.active,
                )

    async def _claim_and_drain(self) -> None:
        """Read signals and start drains; Redis errors go to the supervisor (but NOGROUP)."""
        await self._ensure_group()
        claim_every = max(self._settings.lease_seconds / 3, 0.5)
        next_claim = 0.0
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            free = self._settings.concurrency - self.active
            if free <= 0:
                self._free.clear()
                await self._wait_stop_or(self._free.wait())
                continue
            try:
                signals: list[Signal] = []
                if loop.time() >= next_claim:
                    next_claim = loop.time() + claim_every
                    signals = await self._stream.claim_idle(
                        int(self._settings.lease_seconds * 1000), free
                    )
                if not signals:
                    signals = await self._stream.read(free, self._settings.read_block_ms)
            except ResponseError as error:
                if "NOGROUP" not in str(error):
                    raise
                # Redis came back without the stream (restarted empty, or failed over
                # to a replica that never saw it): the group is made again.
                logger.warning("The worker group is gone; creating it again")
                await self._ensure_group()
                continue
            for signal in signals:
                self._start(signal)

    async def drain_now(self, conversation_key: str) -> None:
        """Drain one chat here and now, without a signal (tests, tools; not the claim loop)."""
        await self._drain(Signal(signal_id="", conversation_key=conversation_key))

    def stop(self) -> None:
        """Stop claiming; chats in hand finish their current job, then are handed back."""
        self._stopping.set()

    async def _ensure_group(self) -> None:
        # Failures go to the supervisor, which retries the claim loop with back-off.
        await self._stream.ensure_group()

    def _start(self, signal: Signal) -> None:
        drain_signal = self._draining.get(signal.conversation_key)
        if drain_signal == signal.signal_id:
            # The drain's own signal, reclaimed by this worker during a turn longer than
            # the lease: it must stay pending, or nothing is left to reclaim if we die.
            return
        if drain_signal is not None:
            again = self._again.get(signal.conversation_key)
            if again is None:
                self._again[signal.conversation_key] = signal
            elif again.signal_id != signal.signal_id:
                # One more look at the chat covers any number of signals.
                self._ack(signal.signal_id)
            return
        self._draining[signal.conversation_key] = signal.signal_id
        task = asyncio.create_task(self._drain(signal), name=f"drain:{signal.conversation_key}")
        self._slots.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._slots.tasks.discard(task)
        self._free.set()
        if not task.cancelled() and task.exception() is not None:
            logger.error("A chat drain failed", exc_info=task.exception())

    async def _wait_stop_or(self, awaitable: Awaitable[object]) -> None:
        waiter = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in (waiter, stopper):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _finish(self) -> None:
        await self._finish_chats()
        # Acknowledgements still on their way: a few milliseconds, bounded in case Redis
        # is gone (an unacknowledged signal is only claimed again later).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_ACK_FLUSH_SECONDS):
                await self._acks.flush()

    async def _finish_chats(self) -> None:
        tasks = list(self._slots.tasks)
        if not tasks:
            return
        logger.info(
            "Waiting up to %.0f s for %d chat(s) in hand",
            self._settings.shutdown_grace_seconds,
            len(tasks),
        )
        _, pending = await asyncio.wait(tasks, timeout=self._settings.shutdown_grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if pending:
            logger.warning(
                "Shutdown grace ran out: %d chat(s) left queued for another worker", len(pending)
            )

    def _ack(self, signal_id: str) -> None:
        if signal_id:
            self._acks.ack(signal_id)

    async def _drain(self, signal: Signal) -> None:
        key = signal.conversation_key
        try:
            while True:
                await self._drain_once(signal)
                again = self._again.pop(key, None)
                if again is None:
                    return
                self._draining[key] = again.signal_id
                signal = again
        finally:
            # Forgotten in the same step as the last look for a signal read meanwhile
            # (no await between): a signal read from now on starts a drain of its own.
            self._draining.pop(key, None)
            self._again.pop(key, None)

    async def _drain_once(self, signal: Signal) -> None:
        key = signal.conversation_key
        lease = HeldLease(key, secrets.token_hex(16))
        heartbeat: asyncio.Task[None] | None = None
        finished = False
        # Redis went away mid-drain; even a take whose reply was lost may have set our lease.
        interrupted = False
        try:
            state = await self._queue.take(key, lease.token)
            if state is None:
                # Another worker holds the chat: leave the signal pending; if that
                # worker dies, this signal (or its own) is claimed again later.
                return
            heartbeat = asyncio.create_task(self._heartbeat(lease))
            finished = await self._drain_held(state, lease)
        except LeaseLostError:
            logger.warning("Lease of %s lost; another worker takes over", chat_label(key))
        except JobOverrunError as error:
            # Handed back below: the next lease counts the next attempt at once.
            logger.warning("Draining %s stopped: %s", chat_label(key), error)
        except (RedisError, OSError) as error:
            interrupted = True
            logger.warning(
                "Draining %s stopped: Redis unavailable (%s)",
                chat_label(key),
                type(error).__name__,
            )
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
        if finished:
            self._ack(signal.signal_id)
        elif (heartbeat is not None or interrupted) and not lease.lost:
            await self._hand_back(signal, lease)

    async def _drain_held(self, state: ChatState, lease: HeldLease) -> bool:
        """Drain while the lease is ours; ``True`` once the queue is empty and released."""
        key = lease.conversation_key
        next_state: ChatState | None = state
        while next_state is not None:
            state = next_state
            if lease.lost:
                raise LeaseLostError(f"lease of {key} lost")
            for reply in sorted(state.outbox, key=lambda entry: _job_order(entry.job_id)):
                # Committed before a crash or a failed send: deliver it before anything else.
                await self._runner.deliver(reply, lease, blocked=state.blocked)
                await self._queue.delivered(key, lease.token, reply.job_id, keep=True)
            if self._stopping.is_set() and state.head_raw:
                lease.unrun_job_id = state.head.job_id if state.head is not None else ""
                return False
            if not state.head_raw:
                next_state = await self._queue.delivered(key, lease.token, "")
                continue
            outcome = await self._run(state, lease)
            finished = await self._finish_job(state, lease, outcome)
            if finished is not None:
                await self._runner.deliver(finished, lease, blocked=state.blocked)
            summary_due = isinstance(outcome, JobDone) and outcome.summary_due
            next_state = await self._queue.delivered(
                key, lease.token, finished.job_id if finished is not None else "", keep=summary_due
            )
            if summary_due:
                await self._runner.summarise(lease)
                next_state = await self._queue.delivered(key, lease.token, "")
        return True

    async def _run(self, state: ChatState, lease: HeldLease) -> JobOutcome:
        """The runner's run of the head job, under the job's deadline.

        A run that raises or overruns is an attempt without an outcome: its kind is
        noted beside the job's count, and the job stays queued for the next lease.
        """
        deadline = asyncio.timeout(self._settings.job_deadline_seconds)
        try:
            async with deadline:
                return await self._runner.run(state, lease)
        except TimeoutError as error:
            if not deadline.expired():
                await self._note_failure(lease.conversation_key, state, type(error).__name__)
                raise
            job = state.head.job_id if state.head is not None else "?"
            await self._note_failure(lease.conversation_key, state, DEADLINE_EXCEEDED)
            raise JobOverrunError(
                f"job {job} overran its deadline of {self._settings.job_deadline_seconds:g} s"
            ) from error
        except Exception as error:
            await self._note_failure(lease.conversation_key, state, type(error).__name__)
            raise

    async def _finish_job(
        self, state: ChatState, lease: HeldLease, outcome: JobOutcome
    ) -> Delivery | None:
        """Finish the head job from what the runner says happened; the reply to deliver."""
        key = lease.conversation_key
        job = state.head
        if isinstance(outcome, JobDone):
            # The handler's commit popped the job with the session and the reply.
            return outcome.delivery
        if isinstance(outcome, Reply) and job is not None:
            return await self._commit_reply(state, lease, Delivery.of(job, outcome))
        reason = outcome.reason if isinstance(outcome, JobDropped) else "unreadable"
        job_id = job.job_id if job is not None else ""
        logger.debug("Job %s of %s dropped (%s)", job_id, chat_label(key), reason)
        await self._queue.complete(key, lease.token, state.head_raw, job_id, None)
        return None

    async def _commit_reply(self, state: ChatState, lease: HeldLease, entry: Delivery) -> Delivery:
        """Pop the head job with its reply in the outbox; the reply to deliver.

        When the job had been finished before (a turn's commit whose reply was lost
        to a timeout), the outbox holds its real reply: that one is delivered.
        """
        key = lease.conversation_key
        try:
            done_now = await self._queue.complete(
                key, lease.token, state.head_raw, entry.job_id, entry
            )
        except RedisConnectionError:
            await self._outcome_not_stored(state, lease, entry)
            raise
        if done_now:
            return entry
        fresh = await self._queue.take(key, lease.token)
        stored = (
            next((e for e in fresh.outbox if e.job_id == entry.job_id), None) if fresh else None
        )
        return stored or entry

    async def _outcome_not_stored(
        self, state: ChatState, lease: HeldLease, entry: Delivery
    ) -> None:
        """Redis went away (refused, reset) before the job's reply was stored.

        A job Redis keeps runs again and is answered then: telling the customer now
        that it failed (and auditing a failure) would be untrue. Only a job Redis
        lost (restarted empty) leaves the customer to be told here, directly. Redis
        away for longer than the wait tells nothing either: the job (if kept) stays
        queued and is answered, or given up kindly, once Redis is back. Not on a
        timeout: a stalled Redis may still run the turn's own save, and a saved turn
        must never be reported as failed.
        """
        try:
            answered = await self._queue.outstanding(
                lease.conversation_key, state.head_raw, entry.job_id
            )
        except (RedisError, OSError):
            logger.warning(
                "Turn %s: outcome not stored and Redis still away; the customer is not "
                "told, the job runs again once Redis is back",
                entry.turn_id,
            )
            return
        if answered:
            logger.warning(
                "Turn %s: outcome not stored (Redis went away); the job runs again", entry.turn_id
            )
            return
        logger.warning(
            "Turn %s: its job is gone from Redis; telling the customer directly", entry.turn_id
        )
        await self._runner.tell(entry)

    async def _note_failure(self, key: str, state: ChatState, kind: str) -> None:
        """Name the failure of this attempt beside the job's count (a dead letter shows it)."""
        if state.head is None:
            return
        try:
            await self._queue.note_failure(key, state.head.job_id, kind)
        except (RedisError, OSError):
            # Only the kind is lost: the attempt is counted already.
            logger.warning("Could not record the failure of job %s", state.head.job_id)

    async def _heartbeat(self, lease: HeldLease) -> None:
        period = self._settings.lease_seconds / 3
        while True:
            await self._sleep(period)
            try:
                if not await self._queue.renew(lease.conversation_key, lease.token):
                    # No warning here: a beat that lands just after the drain released
                    # the chat finds no lease either. A real loss is logged by the
                    # drain, which sees it at its next step or script.
                    lease.lost = True
                    return
            except (RedisError, OSError) as error:
                # The lease outlives a short blip; the next beat tries again.
                logger.warning(
                    "Heartbeat of %s failed (%s)",
                    chat_label(lease.conversation_key),
                    type(error).__name__,
                )

    async def _hand_back(self, signal: Signal, lease: HeldLease) -> None:
        """Stopping with work left: release the chat and signal it for another worker now.

        Also after Redis went away mid-drain: the token is still ours, so once Redis
        (or the master promoted meanwhile) answers, the chat is released and signalled
        at once instead of waiting for its lease to expire and its signal to be reclaimed.
        """
        key = lease.conversation_key
        try:
            # Both wait out a short outage: the release only if still ours, the signal
            # twice is harmless.
            await self._queue.release(key, lease.token, unrun_job_id=lease.unrun_job_id)
            await until_redis_answers(
                "Handing a chat back",
                lambda: self._stream.signal(key),
                within=self._settings.outage_wait_seconds,
                operation="worker_hand_back",
                counter=self._retries,
            )
            self._ack(signal.signal_id)
        except (RedisError, OSError):
            # The signal stays pending and is claimed after about one lease.
            logger.warning(
                "Could not hand %s back; it is reclaimed later", chat_label(lease.conversation_key)
            )


def _job_order(job_id: str) -> int:
    return int(job_id) if job_id.isdigit() else 0
