"""Splitting answers over Telegram's limit: boundaries in order of preference, nothing lost."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.telegram.text_split import (
    TELEGRAM_TEXT_LIMIT,
    split_spans,
    split_text,
    utf16_length,
    utf16_units,
)

_FRAGMENTS = st.sampled_from([*"абвгд xyz.!?\n\t,", "😀", "ё", "  ", "\n\n", ". ", "слово "])
_TEXTS = st.lists(_FRAGMENTS, max_size=200).map("".join)


def _assert_valid(text: str, limit: int) -> None:
    spans = split_spans(text, limit)
    previous_end = 0
    for start, end in spans:
        piece = text[start:end]
        assert 0 < utf16_length(piece) <= limit
        assert piece == piece.strip()
        assert text[previous_end:start].strip() == ""  # only whitespace dropped between pieces
        previous_end = end
    assert text[previous_end:].strip() == ""


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS, limit=st.integers(min_value=2, max_value=60))
def test_pieces_fit_keep_order_and_lose_only_whitespace(text: str, limit: int) -> None:
    """Every piece fits, pieces are in order, and only whitespace falls between them."""
    _assert_valid(text, limit)


@given(text=st.text(st.characters(codec=None, exclude_categories=())))
def test_length_counts_units_as_telegram_does_lone_surrogates_included(text: str) -> None:
    """The codec's count (what the splitter uses) is the per-character count."""
    assert utf16_length(text) == sum(utf16_units(char) for char in text)


def test_short_text_is_one_piece_and_blank_text_none() -> None:
    assert split_text("  Заказ в пути.  ") == ["Заказ в пути."]
    assert split_text(" \n\t ") == []


def test_paragraph_break_preferred_over_sentence_and_word() -> None:
    text = "Первый абзац. Ещё предложение.\n\nВторой абзац тут. И ещё одно."
    assert split_text(text, 45) == [
        "Первый абзац. Ещё предложение.",
        "Второй абзац тут. И ещё одно.",
    ]


def test_sentence_end_preferred_over_word_when_no_paragraph_fits() -> None:
    text = "Одно предложение тут. Второе предложение длиннее первого."
    assert split_text(text, 40) == ["Одно предложение тут.", "Второе предложение длиннее первого."]


def test_word_boundary_when_no_sentence_end_fits() -> None:
    text = "слово " * 10
    pieces = split_text(text, 20)
    assert all(piece.split() == ["слово"] * len(piece.split()) for piece in pieces)
    assert " ".join(pieces).split() == text.split()


def test_hard_cut_only_without_any_space() -> None:
    assert split_text("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]


def test_astral_characters_count_twice() -> None:
    pieces = split_text("😀" * 10, 4)
    assert pieces == ["😀😀"] * 5


def test_ten_thousand_characters_fit_in_three_messages_at_paragraphs() -> None:
    paragraph = ("Это предложение ответа. " * 40).strip()
    text = "\n\n".join([paragraph] * 10)
    assert len(text) > 9000
    pieces = split_text(text)
    assert all(utf16_length(piece) <= TELEGRAM_TEXT_LIMIT for piece in pieces)
    assert all(piece.endswith(".") for piece in pieces)
    assert "\n\n".join(pieces) == text


def test_limit_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_spans("abc", 1)
