"""Scenario files: what a customer does and what must hold afterwards (YAML, validated).

A scenario is read with pydantic models that forbid unknown fields, so a typo
(``no_other_action``) is a malformed scenario, not an expectation silently
skipped. :class:`ScenarioError` is one line naming the file, the field and what
is wrong.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SCENARIO_SUFFIXES = (".yaml", ".yml")
DEFAULT_USER_ID = 424242
"""The Telegram user id of a scenario's customer when the file names none."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptStep(_Strict):
    """One move of a scripted customer: a message, or a press on the card shown last."""

    say: str | None = Field(default=None, min_length=1, max_length=4000)
    press: Literal["confirm", "decline"] | None = None

    @model_validator(mode="after")
    def _one_move(self) -> "ScriptStep":
        if (self.say is None) == (self.press is None):
            raise ValueError("a step is either say: or press:, exactly one of them")
        return self


class CustomerSpec(_Strict):
    """Who the customer is and how they act: a script, or instructions for a model."""

    user_id: int = Field(default=DEFAULT_USER_ID, gt=0)
    script: tuple[ScriptStep, ...] | None = Field(default=None, min_length=1)
    instructions: str | None = Field(default=None, min_length=1)
    max_turns: int = Field(default=8, ge=1, le=50)

    @model_validator(mode="after")
    def _one_way(self) -> "CustomerSpec":
        if (self.script is None) == (self.instructions is None):
            raise ValueError("give either script: or instructions:, exactly one of them")
        return self


class ActionExpectation(_Strict):
    """An action executed at the shop: its tool, arguments (a subset), and how it ended."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    outcome: Literal["executed", "failed"] | None = None


class RepliesExpectation(_Strict):
    """What the bot's replies (answers, cards, outcomes) hold."""

    contain: tuple[str, ...] = ()
    not_contain: tuple[str, ...] = ()
    language: str | None = Field(default=None, pattern=r"^[a-z]{2}$")


class CheckExpectation(_Strict):
    """A read tool called after the conversation, and what its result holds (a subset)."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_answer(self) -> "CheckExpectation":
        if self.result is not None and self.error is not None:
            raise ValueError("expect either result: or error:, not both")
        return self


class Expectations(_Strict):
    """Everything a scenario expects; an expectation left out is not checked."""

    actions: tuple[ActionExpectation, ...] | None = None
    no_other_actions: bool = False
    replies: RepliesExpectation | None = None
    handoff: bool | None = None
    check: tuple[CheckExpectation, ...] = ()


class Scenario(_Strict):
    """One scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,59}$")
    language: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[A-Za-z]{2})?$")
    description: str | None = None
    # The moment the shop and the support hours read as now (a return window, "open now").
    now: datetime | None = None
    # Not run, with this reason (a scenario waiting for a change of the bot).
    skip: str | None = Field(default=None, min_length=1)
    customer: CustomerSpec
    expect: Expectations = Field(default_factory=Expectations)

    @model_validator(mode="after")
    def _aware_now(self) -> "Scenario":
        if self.now is not None and self.now.tzinfo is None:
            raise ValueError("now: needs a time zone, e.g. 2026-12-07T12:00:00+03:00")
        return self


class ScenarioError(ValueError):
    """A malformed scenario file or set; ``str()`` is one line: file, field, what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioFile:
    """A scenario and the file it came from."""

    path: Path
    scenario: Scenario


def scenario_paths(paths: Iterable[Path]) -> list[Path]:
    """Every scenario file under ``paths`` (files as given, directories searched), sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SCENARIO_SUFFIXES)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise ScenarioError(f"{path}: no such file or directory")
    return found


def load_scenario(path: Path) -> Scenario:
    """Read and validate one file; raises :class:`ScenarioError` (one line)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScenarioError(f"{path}: cannot be read: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{path}: not UTF-8 text") from error
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise ScenarioError(f"{path}: not valid YAML{where}: {problem}") from error
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping of fields (name:, customer:, expect:)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{path}: {_first_problem(error)}") from error


def _first_problem(error: ValidationError) -> str:
    problems = error.errors(include_input=False, include_url=False)
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "(file)"
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {message}{more}"


def load_scenarios(paths: Sequence[Path], only: str | None = None) -> list[ScenarioFile]:
    """The scenarios under ``paths`` (only the one named ``only``), names unique in the run."""
    files = [
        ScenarioFile(path=path, scenario=load_scenario(path)) for path in scenario_paths(paths)
    ]
    seen: dict[str, Path] = {}
    for file in files:
        name = file.scenario.name
        if name in seen:
            raise ScenarioError(f"{file.path}: name: {name!r} is also the name in {seen[name]}")
        seen[name] = file.path
    if only is not None:
        files = [file for file in files if file.scenario.name == only]
        if not files:
            raise ScenarioError(f"--only {only}: no scenario of that name under the paths given")
    if not files:
        raise ScenarioError("no scenario files (*.yaml, *.yml) under the paths given")
    return files
