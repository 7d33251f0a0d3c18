"""Analyses conversations that went idle, in every process with workers (supervised).

It claims conversations due for an early analysis (``{analysis}:soon``, an
upset customer) and then idle ones (``{analysis}:due``)
(:meth:`bot.analysis.schedule.AnalysisSchedule.claim`, one script, so of two
sweepers only one claims a conversation) and analyses
each outside any chat lease; :class:`~bot.analysis.idle_analysis.IdleAnalysis` makes
sure one idle is analysed once even when a claim is retried by another process.
"""

import asyncio

from bot.analysis.idle_analysis import IdleAnalysis
from bot.analysis.schedule import AnalysisSchedule
from bot.ops.periodic import Periodic
from bot.storage.keys import telegram_chat_id

RETRY_SECONDS = 60.0
"""How long after a claim a conversation still due is claimed again (a process died)."""

DEFAULT_CONCURRENCY = 16
"""Analyses one process runs at once (``ANALYSIS_CONCURRENCY``): each mostly waits on the model."""


class AnalysisSweeper(Periodic):
    """Claims due conversations every ``period_seconds`` and analyses each once per idle."""

    def __init__(
        self,
        *,
        schedule: AnalysisSchedule,
        analysis: IdleAnalysis,
        period_seconds: float | None = None,
        retry_seconds: float = RETRY_SECONDS,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._schedule = schedule
        self._analysis = analysis
        self._concurrency = concurrency
        idle = schedule.idle_seconds
        super().__init__("analysis sweep", period_seconds or min(5.0, max(idle / 4, 0.05)))
        self._retry = max(retry_seconds, self._period, analysis.timeout_seconds + 5.0)

    async def sweep(self) -> int:
        """Analyse every due conversation, early ones first, ``concurrency`` at a time (each
        waits on the model); returns how many were claimed."""
        slots = asyncio.Semaphore(self._concurrency)

        async def analyse(conversation_key: str, claimed_ms: int, *, early: bool) -> None:
            async with slots:
                chat = telegram_chat_id(conversation_key)
                await self._analysis.run(
                    conversation_key, str(chat) if chat is not None else conversation_key
                )
                await self._schedule.forget(conversation_key, claimed_ms, early=early)

        claimed = 0
        for early in (True, False):
            due = await self._schedule.claim(self._retry, early=early)
            await asyncio.gather(*(analyse(key, ms, early=early) for key, ms in due))
            claimed += len(due)
        return claimed
