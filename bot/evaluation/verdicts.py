"""What a trial showed, and the verdict of a scenario's expectations on it (pure functions).

Each failed expectation is one reason that names the expectation and what was
found instead; a trial passes when there is no reason. Two findings fail a
trial whatever the scenario expects: a write the shop received without the
customer's press, and a turn the bot failed (the customer read an error).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.evaluation.scenario import ActionExpectation, CheckExpectation, Expectations

_CYRILLIC = re.compile("[\u0400-\u04ff]")
_LATIN = re.compile("[A-Za-z]")
_URL = re.compile(r"https?://\S+|www\.\S+")
CYRILLIC_LANGUAGES = frozenset({"ru", "uk", "be", "bg", "kk", "mk", "sr"})
QUOTE_CHARS = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutedAction:
    """An action that reached the shop after a press: tool, arguments, how it ended."""

    tool: str
    arguments: Mapping[str, Any]
    outcome: str  # "executed" or "failed"
    action_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """A read tool's answer after the conversation: its data, or its error code."""

    ok: bool
    data: Any = None
    error_code: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """Everything a trial showed that the expectations are judged on."""

    # Every text of the bot the customer read, in order: answers, cards, outcomes.
    bot_texts: tuple[str, ...]
    actions: tuple[ExecutedAction, ...]
    # Writes the shop received that no press authorised (each described in one phrase).
    unpressed_writes: tuple[str, ...] = ()
    handoff: bool = False
    # Things that went wrong in the conversation itself (a failed turn, a press without a card).
    problems: tuple[str, ...] = ()
    # The answers of ``expect.check``, in the same order.
    checks: tuple[CheckResult, ...] = ()


def verdict(expect: Expectations, seen: Observation) -> list[str]:
    """The reasons the trial failed (empty: it passed)."""
    reasons = [f"write without a press: {write}" for write in seen.unpressed_writes]
    reasons += list(seen.problems)
    if expect.actions is not None:
        reasons += _actions(expect.actions, expect.no_other_actions, seen.actions)
    elif expect.no_other_actions and seen.actions:
        reasons.append(f"no_other_actions: executed {describe_action(seen.actions[0])}")
    if expect.replies is not None:
        replies = expect.replies
        for wanted in replies.contain:
            if not any(wanted.casefold() in text.casefold() for text in seen.bot_texts):
                reasons.append(f"replies.contain: no reply has {wanted!r}")
        for unwanted in replies.not_contain:
            for number, text in enumerate(seen.bot_texts, start=1):
                if unwanted.casefold() in text.casefold():
                    reasons.append(f"replies.not_contain: reply {number} has {unwanted!r}")
                    break
        if replies.language is not None:
            reasons += _language(replies.language, seen.bot_texts)
    if expect.handoff is not None and expect.handoff != seen.handoff:
        reasons.append(
            "handoff: expected a person to take over, the bot kept the conversation"
            if expect.handoff
            else "handoff: the conversation went to a person"
        )
    for check, result in zip(expect.check, seen.checks, strict=False):
        reasons += _check(check, result)
    return reasons


def describe_action(action: ExecutedAction) -> str:
    """``cancel_order(order_id=8042) executed``: an action as a reason quotes it."""
    arguments = ", ".join(f"{k}={_short(v)}" for k, v in action.arguments.items())
    return f"{action.tool}({arguments}) {action.outcome}"


def _actions(
    expected: Sequence[ActionExpectation], exclusive: bool, found: Sequence[ExecutedAction]
) -> list[str]:
    if not expected:
        return [f"actions: expected none, executed {describe_action(found[0])}"] if found else []
    return _exactly(expected, found) if exclusive else _in_order(expected, found)


def _exactly(expected: Sequence[ActionExpectation], found: Sequence[ExecutedAction]) -> list[str]:
    """These actions and no other, in this order."""
    for number, (want, got) in enumerate(zip(expected, found, strict=False), start=1):
        problem = _action_mismatch(want, got)
        if problem is not None:
            return [f"actions[{number}]: {problem}"]
    if len(found) < len(expected):
        missing = expected[len(found)]
        return [f"actions[{len(found) + 1}]: {missing.tool} was not executed"]
    if len(found) > len(expected):
        return [f"no_other_actions: also executed {describe_action(found[len(expected)])}"]
    return []


def _in_order(expected: Sequence[ActionExpectation], found: Sequence[ExecutedAction]) -> list[str]:
    """These actions in this order, others allowed between them."""
    position = 0
    for number, want in enumerate(expected, start=1):
        while position < len(found) and _action_mismatch(want, found[position]) is not None:
            position += 1
        if position == len(found):
            near = next((a for a in found if a.tool == want.tool), None)
            if near is not None:
                return [f"actions[{number}]: {_action_mismatch(want, near)}"]
            what = ", ".join(describe_action(a) for a in found) or "nothing"
            return [f"actions[{number}]: {want.tool} was not executed (executed: {what})"]
        position += 1
    return []


def _action_mismatch(want: ActionExpectation, got: ExecutedAction) -> str | None:
    if want.tool != got.tool:
        return f"expected {want.tool}, executed {describe_action(got)}"
    problem = mismatch(want.arguments, got.arguments, "arguments")
    if problem is not None:
        return f"{want.tool} {problem}"
    if want.outcome is not None and want.outcome != got.outcome:
        return f"{want.tool} {got.outcome}, expected {want.outcome}"
    return None


def _language(language: str, texts: Sequence[str]) -> list[str]:
    for number, text in enumerate(texts, start=1):
        found = text_script(text)
        wanted = "cyrillic" if language in CYRILLIC_LANGUAGES else "latin"
        if found is not None and found != wanted:
            return [f"replies.language: reply {number} is not {language}: {_quote(text)}"]
    return []


def text_script(text: str) -> str | None:
    """``cyrillic`` or ``latin``, by the letters most of ``text`` is written in (links aside)."""
    letters = _URL.sub(" ", text)
    cyrillic = len(_CYRILLIC.findall(letters))
    latin = len(_LATIN.findall(letters))
    if not cyrillic and not latin:
        return None
    return "latin" if latin > cyrillic else "cyrillic"


def _check(check: CheckExpectation, result: CheckResult) -> list[str]:
    arguments = ", ".join(f"{k}={_short(v)}" for k, v in check.arguments.items())
    call = f"check {check.tool}({arguments})"
    if check.error is not None:
        if result.ok:
            return [f"{call}: expected error {check.error}, it answered"]
        if result.error_code != check.error:
            return [f"{call}: error {result.error_code}, expected {check.error}"]
        return []
    if not result.ok:
        return [f"{call}: error {result.error_code}"]
    if check.result is not None:
        problem = mismatch(check.result, result.data, "result")
        if problem is not None:
            return [f"{call}: {problem}"]
    return []


def mismatch(expected: Any, actual: Any, path: str) -> str | None:
    """Where ``actual`` does not hold ``expected`` (mappings as subsets), or ``None``."""
    if isinstance(expected, Mapping):
        return _mapping_mismatch(expected, actual, path)
    if isinstance(expected, list):
        return _list_mismatch(expected, actual, path)
    if _same(expected, actual):
        return None
    return f"{path} is {_short(actual)}, expected {_short(expected)}"


def _mapping_mismatch(expected: Mapping[str, Any], actual: Any, path: str) -> str | None:
    if not isinstance(actual, Mapping):
        return f"{path} is {_short(actual)}, expected a mapping"
    for key, value in expected.items():
        if key not in actual:
            return f"{path}.{key} is missing"
        problem = mismatch(value, actual[key], f"{path}.{key}")
        if problem is not None:
            return problem
    return None


def _list_mismatch(expected: list[Any], actual: Any, path: str) -> str | None:
    if not isinstance(actual, list | tuple) or len(actual) != len(expected):
        return f"{path} is {_short(actual)}, expected {_short(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        problem = mismatch(want, got, f"{path}[{index}]")
        if problem is not None:
            return problem
    return None


def _same(expected: Any, actual: Any) -> bool:
    """Equal, or the same scalar written differently (``8042`` and ``"8042"``)."""
    if expected == actual:
        return True
    scalars = (str, int, float)
    return (
        isinstance(expected, scalars)
        and isinstance(actual, scalars)
        and not isinstance(expected, bool)
        and not isinstance(actual, bool)
        and str(expected) == str(actual)
    )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _quote(text: str) -> str:
    return repr(_short(" ".join(text.split())))
