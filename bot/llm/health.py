"""Whether the chat model answers: probed at start-up, asked again while it does not.

A wrong key, model or base URL is found at start-up instead of by every customer;
the start does not fail on it (a provider can be down for a minute), ``/healthz``
and the metrics say ``degraded`` and why, and the probe is repeated with growing
pauses until the model answers. Turns report what they meet too: a configuration
fault or an outage seen by a turn degrades the reading (and wakes the probe), an
answered turn restores it.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, get_args

from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
    LLMUnreachableError,
)

logger = logging.getLogger(__name__)

ModelState = Literal["ok", "unknown", "misconfigured", "unreachable", "unavailable", "rate_limited"]
MODEL_STATES: tuple[ModelState, ...] = get_args(ModelState)

Probe = Callable[..., Awaitable[None]]
"""``probe(timeout_seconds=...)``: returns when the model answered, else an LLMClientError."""

# Growing pauses between probes while the model does not answer: doubled, at most this.
MAX_PAUSE_SECONDS = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReading:
    """The model's state now and, unless it answers, why (one line, no secret)."""

    state: ModelState
    reason: str | None = None

    @property
    def degraded(self) -> bool:
        """A known fault ("unknown" is the moment before the first probe has answered)."""
        return self.state not in ("ok", "unknown")


def state_of(error: LLMClientError) -> ModelState:
    """The state a failed request shows (a refused minimal request is a configuration fault)."""
    if isinstance(error, LLMRateLimitError):
        return "rate_limited"
    if isinstance(error, LLMUnreachableError):
        return "unreachable"
    if isinstance(error, LLMUnavailableError | LLMTimeoutError):
        return "unavailable"
    if isinstance(error, LLMRequestError | LLMBadResponseError):
        return "misconfigured"
    return "unavailable"


class ModelHealth:
    """The reading of the chat model's health, kept by a probe task and by the turns.

    ``probe`` ``None`` (the offline demo model, a test's stand-in): always ``ok``.
    """

    def __init__(
        self,
        probe: Probe | None,
        *,
        first_pause_seconds: float = 5.0,
        timeout_seconds: float = 30.0,
    ) -> None:
        self._probe = probe
        self._first_pause = first_pause_seconds
        self._timeout = timeout_seconds
        self._reading = ModelReading(state="ok" if probe is None else "unknown")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def reading(self) -> ModelReading:
        """The state now (for ``/healthz`` and the metrics)."""
        return self._reading

    def start(self) -> None:
        """Probe now, in the background (never fails the start)."""
        if self._probe is not None and self._task is None:
            self._task = asyncio.create_task(self._run(self._probe), name="model-probe")

    async def aclose(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def succeeded(self) -> None:
        """A turn's request was answered: the model works."""
        if self._reading.state != "ok":
            self._set(ModelReading(state="ok"))

    def failed(self, error: LLMClientError) -> None:
        """A turn's request failed: a configuration fault or an outage degrades the reading."""
        if not isinstance(error, LLMConfigurationError | LLMUnavailableError):
            return
        self._set(ModelReading(state=state_of(error), reason=str(error)))
        self._wake.set()

    async def _run(self, probe: Probe) -> None:
        pause = self._first_pause
        while True:
            self._wake.clear()
            try:
                await probe(timeout_seconds=self._timeout)
            except LLMClientError as error:
                self._set(ModelReading(state=state_of(error), reason=str(error)), pause)
            else:
                self._set(ModelReading(state="ok"))
                pause = self._first_pause
                # Answered: asked again only when a turn says the model failed.
                await self._wake.wait()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=pause)
            pause = min(pause * 2, max(MAX_PAUSE_SECONDS, self._first_pause))

    def _set(self, reading: ModelReading, pause: float | None = None) -> None:
        before = self._reading
        self._reading = reading
        if reading == before:
            return
        if reading.state == "ok":
            if before.state != "unknown":
                logger.info("The model answers again")
            return
        logger.warning(
            "The model is %s: %s; the bot keeps serving and asks the model again%s",
            reading.state.replace("_", " "),
            reading.reason,
            f" in {pause:g} s, then less often" if pause is not None else "",
        )
