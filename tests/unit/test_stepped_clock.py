"""The tests' controlled clock (bot/testing/clock.py): time passes when the test says so."""

import asyncio

import pytest

from bot.testing.clock import SteppedClockLoop, run_with_stepped_clock


def test_spending_time_runs_the_timers_due_by_then_and_no_later_ones() -> None:
    async def main(clock: SteppedClockLoop) -> list[str]:
        fired: list[str] = []
        clock.call_later(3600, fired.append, "an hour")
        clock.call_later(7200, fired.append, "two hours")
        await clock.spend(3600 + 60)
        return fired

    assert run_with_stepped_clock(main) == ["an hour"]


def test_a_timeout_passed_while_spending_cuts_the_spender() -> None:
    async def main(clock: SteppedClockLoop) -> bool:
        async def within_a_minute(*steps: float) -> None:
            async with asyncio.timeout(60):
                for seconds in steps:
                    await clock.spend(seconds)

        with pytest.raises(TimeoutError):
            await within_a_minute(59, 2)
        # Not cut before its time either.
        await within_a_minute(59)
        return True

    assert run_with_stepped_clock(main)


def test_time_cannot_be_spent_backwards() -> None:
    async def main(clock: SteppedClockLoop) -> None:
        await clock.spend(-1)

    with pytest.raises(ValueError, match="negative"):
        run_with_stepped_clock(main)
