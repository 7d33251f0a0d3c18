"""Customer texts: Russian, kind per failure, incident code, no internals."""

import pytest

from bot import chat_errors, customer_texts
from bot.chat_errors import ChatServiceError
from turn import TurnOutcome

_ERROR_TYPES = [
    cls
    for cls in vars(chat_errors).values()
    if isinstance(cls, type) and issubclass(cls, ChatServiceError)
]


@pytest.mark.parametrize("error_type", _ERROR_TYPES, ids=lambda cls: cls.__name__)
def test_every_failure_kind_has_a_russian_message_with_the_code(error_type) -> None:
    error = error_type("Traceback: KeyError('secret internals')", "K7M2QX9PAF")
    text = customer_texts.failure_message(error, error.turn_id)
    assert "K7M2QX9PAF" in text
    assert "Traceback" not in text
    assert "KeyError" not in text
    assert error_type.__name__ not in text
    assert any("а" <= char <= "я" for char in text.lower())


_FAILURE_KINDS = [
    kind for kind in TurnOutcome if kind not in (TurnOutcome.ANSWERED, TurnOutcome.UNDELIVERED)
]


@pytest.mark.parametrize("kind", _FAILURE_KINDS, ids=str)
def test_every_failure_kind_translated_from_the_loop_has_a_russian_message(kind) -> None:
    error = chat_errors.chat_error_for(
        kind, "Traceback: KeyError('secret internals')", "K7M2QX9PAF"
    )
    text = customer_texts.failure_message(error, error.turn_id)
    assert "K7M2QX9PAF" in text
    assert "Traceback" not in text
    assert "KeyError" not in text
    assert kind.value not in text
    assert any("а" <= char <= "я" for char in text.lower())


def test_kinds_are_told_apart() -> None:
    model_down = chat_errors.ChatServiceError("x", "A", TurnOutcome.MODEL_UNAVAILABLE)
    busy = customer_texts.failure_message(model_down, "A")
    down = customer_texts.failure_message(chat_errors.ChatStorageError("x", "A"), "A")
    too_long = customer_texts.failure_message(chat_errors.MessageTooLongError("x", "A"), "A")
    assert len({busy, down, too_long}) == 3
    assert "повторите" in busy
    assert "временно недоступен" in down
    assert "длинное" in too_long


def test_unknown_subclass_falls_back_to_its_parent_kind() -> None:
    class Unforeseen(chat_errors.ChatStorageError):
        kind = TurnOutcome.UNDELIVERED  # an outcome with no failure message of its own

    assert customer_texts.failure_message(
        Unforeseen("x", "B"), "B"
    ) == customer_texts.failure_message(chat_errors.ChatStorageError("x", "B"), "B")
