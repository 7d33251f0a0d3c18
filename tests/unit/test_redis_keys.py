"""The keys module: one place that spells keys, and the table in docs/scaling.md says the same."""

import re
from pathlib import Path

import pytest

import bot.storage.keys
from bot.storage.keys import (
    RedisKeys,
    safe_conversation_key,
    telegram_chat_id,
    telegram_conversation,
)

ROOT = Path(__file__).resolve().parents[2]


def _table_keys(text: str) -> list[str]:
    """The first column of every row of the first Markdown table in ``text``."""
    keys: list[str] = []
    in_table = False
    for line in text.splitlines():
        if not line.strip().startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set(cells[0]) <= {"-", " "}:
            continue
        keys.append(cells[0].replace("``", "`").strip("`").split("`")[0])
    return keys[1:]  # the header row


def test_the_documented_key_table_matches_the_keys_module():
    module_table = _table_keys(bot.storage.keys.__doc__ or "")
    scaling = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    section = scaling[scaling.index("`bot/storage/keys.py`; its table:") :]
    assert _table_keys(section) == module_table
    assert len(module_table) >= 13


def test_every_conversation_key_sits_under_the_conversation_hash_tag():
    keys = RedisKeys("support").conversation("tg:42")
    built = [keys.session, keys.lease, keys.queue, keys.outbox, keys.blocked, keys.seen(7)]
    assert all(key.startswith("support:{tg:42}:") for key in built)


@pytest.mark.parametrize("bad", ["", "a b", "x{y}", "ключ", "a" * 129])
def test_a_conversation_key_outside_the_alphabet_is_refused(bad: str):
    with pytest.raises(ValueError, match="invalid conversation key"):
        RedisKeys("support").conversation(bad)


def test_telegram_conversations_round_trip_and_console_names_are_made_safe():
    assert telegram_chat_id(telegram_conversation(-1001234)) == -1001234
    assert telegram_chat_id("console-dev") is None
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", safe_conversation_key("дев ops{1}", "console"))
    assert safe_conversation_key("", "console") == "console"


def test_the_audit_mark_shares_the_streams_slot_even_with_a_tag_of_its_own():
    assert RedisKeys.audit_done("support:audit", "T") == "{support:audit}:done:T"
    assert RedisKeys.audit_done("a{b}c", "T") == "a{b}c:done:T"
