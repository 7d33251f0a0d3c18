"""The task supervisor: retries Redis outages quietly, restarts crashes, gives up when it must."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.ops.supervision import (
    FailureKind,
    SupervisionPolicy,
    TaskFailure,
    TaskSupervisor,
    classify,
    describe,
)

NOREPLICAS = "NOREPLICAS Not enough good replicas to write."
HEALTHY_AFTER = 0.05
"""Real seconds a body must run to count as healthy (the only real wait in these tests)."""


class FakeTime:
    """A clock that the fake sleep advances: back-off pauses cost no real time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def supervisor(
    time: FakeTime,
    failures: list[TaskFailure] | None = None,
    **policy: float,
) -> TaskSupervisor:
    settings: dict[str, float] = {
        "backoff_first_seconds": 0.2,
        "backoff_max_seconds": 1.0,
        "healthy_after_seconds": HEALTHY_AFTER,
        "max_restarts": 3,
        "restart_window_seconds": 60.0,
    }
    settings.update(policy)
    return TaskSupervisor(
        policy=SupervisionPolicy(**settings),  # type: ignore[arg-type]
        clock=time.clock,
        sleep=time.sleep,
        on_failure=None if failures is None else failures.append,
    )


def scripted(
    *steps: BaseException | None, then: Callable[[], Awaitable[None]] | None = None
) -> tuple[Callable[[], Awaitable[None]], list[int]]:
    """A body that raises ``steps`` in turn, then runs ``then``.

    ``None`` is a healthy run: the body runs long enough to be healthy, then fails
    with the step after it (in the same run).
    """
    calls = [0]
    position = [0]

    async def body() -> None:
        calls[0] += 1
        if position[0] < len(steps):
            step = steps[position[0]]
            position[0] += 1
            if step is None:
                await asyncio.sleep(HEALTHY_AFTER * 3)
                step = steps[position[0]]
                position[0] += 1
            assert step is not None
            raise step
        if then is not None:
            await then()

    return body, calls


async def soon(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (a few iterations; fails otherwise)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    pytest.fail("the supervisor did not get there")


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


@pytest.mark.parametrize(
    "error",
    [
        ResponseError(NOREPLICAS),
        ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's ..."),
        ResponseError("BUSY Redis is busy running a script."),
        # redis-py strips these codes off the message and keeps them in status_code.
        ReadOnlyError("You can't write against a read only replica.", status_code="READONLY"),
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'.", status_code="OOM"),
        BusyLoadingError("Redis is loading the dataset in memory", status_code="LOADING"),
        TryAgainError("Multiple keys request during rehashing of slot", status_code="TRYAGAIN"),
        ClusterDownError("The cluster is down", status_code="CLUSTERDOWN"),
        MasterDownError("Link with MASTER is down", status_code="MASTERDOWN"),
        RedisConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused."),
        RedisTimeoutError("Timeout reading from socket"),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
    ids=describe,
)
def test_redis_outages_are_transient(error: Exception) -> None:
    assert classify(error) is FailureKind.TRANSIENT


def test_other_errors_are_unexpected_or_fatal() -> None:
    assert classify(ResponseError("WRONGTYPE Operation against a key")) is FailureKind.UNEXPECTED
    assert classify(ResponseError("ERR unknown command")) is FailureKind.UNEXPECTED
    assert classify(RuntimeError("bug")) is FailureKind.UNEXPECTED
    assert classify(AuthenticationError("invalid password")) is FailureKind.FATAL
    assert classify(NoPermissionError("no permission", status_code="NOPERM")) is FailureKind.FATAL


def test_an_error_is_described_by_its_kind_never_its_text() -> None:
    assert describe(ResponseError(NOREPLICAS)) == "ResponseError NOREPLICAS"
    assert (
        describe(ReadOnlyError("secret text", status_code="READONLY")) == "ReadOnlyError READONLY"
    )
    assert describe(RuntimeError("customer text")) == "RuntimeError"


async def test_an_outage_is_logged_once_and_retried_with_growing_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime()
    tasks = supervisor(time)
    done = asyncio.Event()

    async def then() -> None:
        done.set()

    outage = [ResponseError(NOREPLICAS) for _ in range(5)]
    body, calls = scripted(*outage, then=then)
    with caplog.at_level(logging.DEBUG, logger="bot.ops.supervision"):
        await tasks.run("claim-loop", body)

    assert done.is_set()
    assert calls[0] == 6
    assert time.pauses == [0.2, 0.4, 0.8, 1.0, 1.0]
    warnings = messages(caplog, logging.WARNING)
    assert len(warnings) == 1, warnings
    assert "claim-loop" in warnings[0]
    assert "ResponseError NOREPLICAS" in warnings[0]
    assert not messages(caplog, logging.ERROR)
    assert tasks.failure is None


async def test_a_new_kind_of_outage_is_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    time = FakeTime()
    tasks = supervisor(time)
    readonly = ReadOnlyError("You can't write against a read only replica.", status_code="READONLY")
    body, _ = scripted(ResponseError(NOREPLICAS), ResponseError(NOREPLICAS), readonly, readonly)
    with caplog.at_level(logging.WARNING, logger="bot.ops.supervision"):
        await tasks.run("claim-loop", body)
    warnings = messages(caplog, logging.WARNING)
    assert [("NOREPLICAS" in w, "READONLY" in w) for w in warnings] == [
        (True, False),
        (False, True),
    ]


async def test_the_back_off_starts_over_once_the_task_has_run_well(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime()
    tasks = supervisor(time)
    error = ResponseError(NOREPLICAS)
    # Three failures, a healthy run, then a new outage.
    body, _ = scripted(error, error, error, None, error, error)
    with caplog.at_level(logging.INFO, logger="bot.ops.supervision"):
        await tasks.run("claim-loop", body)
    assert time.pauses == [0.2, 0.4, 0.8, 0.2, 0.4]
    assert len(messages(caplog, logging.WARNING)) == 2
    infos = messages(caplog, logging.INFO)
    assert any("claim-loop works again after 3 retries" in line for line in infos), infos


async def test_an_unexpected_error_is_logged_with_its_traceback_and_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime()
    failures: list[TaskFailure] = []
    tasks = supervisor(time, failures)
    body, calls = scripted(RuntimeError("a bug"))
    with caplog.at_level(logging.ERROR, logger="bot.ops.supervision"):
        await tasks.run("handoff-sweeper", body)
    assert calls[0] == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert errors[0].exc_info is not None
    assert isinstance(errors[0].exc_info[1], RuntimeError)
    assert "handoff-sweeper failed (RuntimeError); restarting" in errors[0].getMessage()
    assert failures == []
    assert tasks.failure is None


async def test_a_task_that_keeps_failing_is_given_up_and_reported() -> None:
    time = FakeTime()
    failures: list[TaskFailure] = []
    tasks = supervisor(time, failures, max_restarts=3)
    seen_down: list[dict[str, str]] = []

    async def always_fails() -> None:
        seen_down.append(tasks.down())
        raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    await tasks.run("claim-loop", always_fails)

    # Three restarts are allowed; the fourth failure within the window gives up.
    assert len(seen_down) == 4
    assert time.pauses == [0.2, 0.4, 0.8]
    assert len(failures) == 1
    assert failures[0].task == "claim-loop"
    assert "4 failures within 60 s" in failures[0].reason
    assert "ResponseError WRONGTYPE" in failures[0].reason
    assert tasks.failure == failures[0]
    assert list(tasks.down()) == ["claim-loop"]
    assert tasks.down()["claim-loop"].startswith("failed: ")


async def test_failures_spread_wider_than_the_window_never_exhaust_the_restarts() -> None:
    time = FakeTime()
    failures: list[TaskFailure] = []
    tasks = supervisor(time, failures, max_restarts=2, restart_window_seconds=10.0)
    runs = [0]

    async def fails_every_minute() -> None:
        runs[0] += 1
        if runs[0] > 6:
            return
        time.now += 60
        raise RuntimeError("rare bug")

    await tasks.run("polling", fails_every_minute)
    assert runs[0] == 7
    assert failures == []


async def test_a_fatal_error_gives_up_at_once(caplog: pytest.LogCaptureFixture) -> None:
    time = FakeTime()
    failures: list[TaskFailure] = []
    tasks = supervisor(time, failures)
    body, calls = scripted(AuthenticationError("invalid username-password pair"))
    with caplog.at_level(logging.ERROR, logger="bot.ops.supervision"):
        await tasks.run("claim-loop", body)
    assert calls[0] == 1
    assert time.pauses == []
    assert failures == [
        TaskFailure(task="claim-loop", reason="AuthenticationError: a restart cannot mend it")
    ]
    # One line for the operator, without the server's text.
    errors = messages(caplog, logging.ERROR)
    assert len(errors) == 1
    assert "username-password" not in errors[0]


async def test_a_task_is_down_while_it_waits_to_restart_and_up_once_it_runs() -> None:
    release = asyncio.Event()
    tasks = TaskSupervisor(
        policy=SupervisionPolicy(backoff_first_seconds=0.0, healthy_after_seconds=HEALTHY_AFTER),
        sleep=lambda _: release.wait(),
    )
    runs = [0]
    running = asyncio.Event()

    async def body() -> None:
        runs[0] += 1
        if runs[0] == 1:
            raise RuntimeError("bug")
        running.set()
        await asyncio.Event().wait()

    task = tasks.spawn("claim-loop", body)
    await soon(lambda: bool(tasks.down()))
    assert tasks.down() == {"claim-loop": "restarting: RuntimeError"}
    release.set()
    await running.wait()
    assert tasks.down() == {}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tasks.states() == {}


async def test_a_transient_outage_does_not_mark_the_task_down() -> None:
    release = asyncio.Event()
    tasks = TaskSupervisor(sleep=lambda _: release.wait())
    body, _ = scripted(ResponseError(NOREPLICAS))
    task = tasks.spawn("claim-loop", body)
    await soon(lambda: bool(tasks.states()))
    assert tasks.states() == {"claim-loop": "retrying: ResponseError NOREPLICAS"}
    assert tasks.down() == {}
    release.set()
    await task


async def test_stop_ends_a_back_off_at_once_and_nothing_restarts() -> None:
    never = asyncio.Event()
    tasks = TaskSupervisor(sleep=lambda _: never.wait())
    stop = asyncio.Event()
    body, calls = scripted(RuntimeError("bug"), RuntimeError("bug"))
    task = tasks.spawn("backlog-log", body, stop=stop)
    await soon(lambda: bool(tasks.down()))
    stop.set()
    async with asyncio.timeout(5):
        await task
    assert calls[0] == 1

    body, calls = scripted(RuntimeError("bug"))
    task = tasks.spawn("polling", body)
    await soon(lambda: bool(tasks.down()))
    tasks.stop()
    async with asyncio.timeout(5):
        await task
    assert calls[0] == 1


async def test_cancelling_the_supervised_run_cancels_the_task() -> None:
    tasks = TaskSupervisor()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def body() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = tasks.spawn("polling", body)
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_a_name_is_supervised_once_at_a_time() -> None:
    tasks = TaskSupervisor()
    started = asyncio.Event()

    async def body() -> None:
        started.set()
        await asyncio.Event().wait()

    task = tasks.spawn("claim-loop", body)
    await started.wait()
    with pytest.raises(ValueError, match="already supervised"):
        await tasks.run("claim-loop", body)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
