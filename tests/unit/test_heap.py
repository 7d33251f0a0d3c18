"""Setting start-up's objects aside from garbage collection (bot.ops.heap)."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from bot.ops.heap import YOUNG_THRESHOLD, settle_start_up_heap


class _Node:
    """An object that can sit in a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfreeze_after() -> Iterator[None]:
    """The test process's heap and thresholds are given back to the collector afterwards."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("unfreeze_after")
def test_start_up_objects_set_aside_young_ones_collected_less_often_garbage_freed() -> None:
    start_up_cycle = _Node()
    start_up_cycle.other = start_up_cycle
    start_up_garbage = _Node()
    start_up_garbage.other = start_up_garbage
    garbage_ref = weakref.ref(start_up_garbage)
    del start_up_garbage

    frozen = settle_start_up_heap()

    # Garbage left by start-up is collected first, not kept for the life of the process.
    assert garbage_ref() is None
    assert frozen == gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert not any(obj is start_up_cycle for gen in range(3) for obj in gc.get_objects(gen))

    turn_cycle = _Node()
    turn_cycle.other = turn_cycle
    turn_ref = weakref.ref(turn_cycle)
    del turn_cycle
    gc.collect()
    # What the turns allocate after start-up is collected as before.
    assert turn_ref() is None
