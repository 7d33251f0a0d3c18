"""Keyed pseudonyms of chat ids."""

import pytest

from bot.audit.pseudonym import ChatPseudonymizer, chat_pseudonym, is_pseudonym

KEY = b"0123456789abcdef-key"


def test_pseudonym_is_stable_prefixed_and_64_bits_of_hex() -> None:
    first = chat_pseudonym("100200300", KEY)
    assert first == chat_pseudonym("100200300", KEY)
    assert first.startswith("h:")
    assert len(first) == 2 + 16
    assert is_pseudonym(first)


def test_pseudonym_depends_on_the_key_and_the_chat() -> None:
    pseudonym = chat_pseudonym("100200300", KEY)
    assert pseudonym != chat_pseudonym("100200300", b"another-key-0123456")
    assert pseudonym != chat_pseudonym("100200301", KEY)


def test_pseudonym_matches_the_published_hmac_sha256() -> None:
    """Staff can reproduce a pseudonym with any HMAC-SHA256 tool."""
    # Pinned: hmac.new(KEY, b"42", hashlib.sha256).hexdigest()[:16] (docs/staff-cli.md).
    assert chat_pseudonym("42", KEY) == "h:24e0c29fef8eeb33"


def test_real_ids_are_not_taken_for_pseudonyms() -> None:
    assert not is_pseudonym("100200300")
    assert not is_pseudonym("h:xyz")
    assert not is_pseudonym("h:" + "A" * 16)


def test_pseudonymizer_refuses_a_short_key_and_hides_its_key() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        ChatPseudonymizer(b"short")
    pseudonymizer = ChatPseudonymizer(KEY)
    assert pseudonymizer("7") == chat_pseudonym("7", KEY)
    assert "0123456789" not in repr(pseudonymizer)
