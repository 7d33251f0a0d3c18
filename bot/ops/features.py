"""What a feature is to the composition root, and the application's features together.

A feature (the handoff, the satisfaction question, the request analysis, ...) is
one frozen object built by a function in its own folder; it holds its services,
says what it needs closed (:meth:`Feature.aclose`) and which sweepers a process
with workers runs for it (:meth:`Feature.sweepers`). The composition root lists
the features it builds; :class:`Features` keeps them in that order, finds one by
its class and hands the front ends one name per feature.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from bot.ops.periodic import Periodic


@dataclass(frozen=True, kw_only=True)
class Feature:
    """One feature of the application; by default nothing to close and no sweeper.

    ``name`` is the feature's one name: the workflow data key its handlers declare
    (``csat: CsatFeature | None``), and the name of its sweepers' tasks.
    """

    name: ClassVar[str]

    def sweepers(self, period_seconds: float | None = None) -> tuple[Periodic, ...]:
        """Fresh sweepers for one process (``period_seconds``: tests sweep often)."""
        return ()

    async def aclose(self) -> None:
        """Close what the feature opened (the composition root calls it in reverse order)."""
        return


FeatureT = TypeVar("FeatureT", bound=Feature)


@dataclass(frozen=True)
class Features:
    """The features that are on, in the order they were built (each class at most once)."""

    items: tuple[Feature, ...] = ()

    def __post_init__(self) -> None:
        names = [feature.name for feature in self.items]
        if len(set(names)) != len(names):
            raise ValueError(f"a feature listed twice: {names}")

    def __iter__(self) -> Iterator[Feature]:
        return iter(self.items)

    def get(self, kind: type[FeatureT]) -> FeatureT | None:
        """The feature of class ``kind``; ``None`` when it is off."""
        for feature in self.items:
            if isinstance(feature, kind):
                return feature
        return None

    def added(self, feature: Feature | None) -> "Features":
        """These features and ``feature`` (``None``: a feature that is off, nothing added).

        A feature of the same name is replaced in its place (a test's stand-in).
        """
        if feature is None:
            return self
        if feature.name in self.by_name():
            return Features(
                tuple(feature if each.name == feature.name else each for each in self.items)
            )
        return Features((*self.items, feature))

    def by_name(self) -> dict[str, Feature]:
        """One name per feature that is on: what the front ends hand to handlers."""
        return {feature.name: feature for feature in self.items}

    def sweepers(self, period_seconds: float | None = None) -> list[tuple[str, Periodic]]:
        """Every sweeper of the features that are on, named ``<feature>-sweeper``."""
        return [
            (f"{feature.name}-sweeper", sweeper)
            for feature in self.items
            for sweeper in feature.sweepers(period_seconds)
        ]
