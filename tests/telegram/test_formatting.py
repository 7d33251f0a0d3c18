"""Model Markdown becomes entities that stay valid after splitting."""

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.telegram.formatting import FormattedText, markdown_to_entities, split_formatted
from bot.telegram.text_split import utf16_length


def _entities_inside(piece: FormattedText) -> bool:
    length = utf16_length(piece.text)
    return all(
        entity.offset >= 0 and entity.length > 0 and entity.offset + entity.length <= length
        for entity in piece.entities
    )


def test_bold_becomes_an_entity_without_markup() -> None:
    formatted = markdown_to_entities("Заказ **1234** в пути 🚚.")
    assert "**" not in formatted.text
    bold = [entity for entity in formatted.entities if entity.type == "bold"]
    assert len(bold) == 1
    start = bold[0].offset
    assert formatted.text.encode("utf-16-le")[2 * start : 2 * (start + 4)].decode("utf-16-le") == (
        "1234"
    )


def test_plain_text_keeps_its_words() -> None:
    formatted = markdown_to_entities("Мы работаем с 9 до 18 (МСК), без выходных!")
    assert formatted.text.strip() == "Мы работаем с 9 до 18 (МСК), без выходных!"


def test_entities_crossing_a_cut_are_clipped_to_both_pieces() -> None:
    formatted = markdown_to_entities("**" + ("жирный текст " * 30).strip() + "**")
    pieces = split_formatted(formatted, 100)
    assert len(pieces) > 1
    assert all(_entities_inside(piece) for piece in pieces)
    assert all(any(entity.type == "bold" for entity in piece.entities) for piece in pieces)


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(
            [
                "**жирный**",
                "_курсив_",
                "`код`",
                "[ссылка](https://example.com)",
                "обычный",
                "😀",
                "\n\n",
                "- пункт\n",
                "# Заголовок\n",
                "ё.",
            ]
        ),
        max_size=120,
    ),
    limit=st.integers(min_value=10, max_value=200),
)
def test_split_pieces_always_have_valid_entities(words: list[str], limit: int) -> None:
    """Whatever the Markdown, each piece fits and its entities lie inside its text."""
    pieces = split_formatted(markdown_to_entities(" ".join(words)), limit)
    for piece in pieces:
        assert 0 < utf16_length(piece.text) <= limit
        assert _entities_inside(piece)
