"""The application's features: one per name, found by class, closed and swept by name."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from bot.ops.features import Feature, Features
from bot.ops.periodic import Periodic


class _Idle(Periodic):
    async def sweep(self) -> int:
        return 0


@dataclass(frozen=True, kw_only=True)
class _Swept(Feature):
    name: ClassVar[str] = "swept"
    label: str = ""

    def sweepers(self, period_seconds: float | None = None) -> tuple[Periodic, ...]:
        return (_Idle("idle sweep", period_seconds or 1.0),)


@dataclass(frozen=True, kw_only=True)
class _Quiet(Feature):
    name: ClassVar[str] = "quiet"


def test_a_feature_is_found_by_its_class_and_an_off_one_is_none() -> None:
    features = Features().added(_Quiet()).added(None)

    assert isinstance(features.get(_Quiet), _Quiet)
    assert features.get(_Swept) is None
    assert list(features.by_name()) == ["quiet"]


def test_features_keep_the_order_they_were_built_in() -> None:
    swept, quiet = _Swept(), _Quiet()

    assert list(Features().added(swept).added(quiet)) == [swept, quiet]


def test_a_feature_added_again_replaces_the_one_of_its_name_in_its_place() -> None:
    stand_in = _Swept(label="stand-in")

    features = Features().added(_Swept()).added(_Quiet()).added(stand_in)

    assert [feature.name for feature in features] == ["swept", "quiet"]
    assert features.get(_Swept) is stand_in


def test_one_name_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        Features((_Quiet(), _Quiet()))


def test_each_sweeper_is_fresh_and_named_after_its_feature() -> None:
    features = Features((_Quiet(), _Swept()))

    first = features.sweepers(0.5)
    second = features.sweepers(0.5)

    assert [name for name, _ in first] == ["swept-sweeper"]
    assert first[0][1] is not second[0][1]
