"""Every Redis script: in one place, its KEYS of one hash slot, its KEYS and ARGV all named."""

import importlib
import pkgutil
import re
from pathlib import Path

from redis.crc import key_slot

import bot.storage.scripts
from bot.storage.keys import RedisKeys
from bot.storage.scripts import (
    admission_lua,
    analysis,
    audit,
    chat,
    csat,
    dead_letters,
    handoff,
    shop,
    work,
)
from bot.storage.scripts.base import LuaScript

ROOT = Path(__file__).resolve().parents[2]


def script_samples(prefix: str, conversation: str, stream: str) -> list[LuaScript]:
    """One call of every script, its keys built the only way the code builds them."""
    keys = RedisKeys(prefix)
    conv = keys.conversation(conversation)
    index = RedisKeys.audit_index(stream)
    work_stream = keys.work_stream
    return [
        chat.Acquire(chat=conv, token="t", lease_ms=1000),
        chat.Commit(
            chat=conv,
            token="t",
            version="1",
            new_version="2",
            data="{}",
            ttl=60,
            job_raw="",
            job_id="",
            outbox_entry="",
            release=True,
            lease_must_be_ours=False,
            answered=False,
            handoff="",
        ),
        chat.Release(chat=conv, token="t", unrun_job_id="7"),
        chat.MoveAside(chat=conv, target=conv.archive("s1"), token="t", ttl=60),
        chat.MoveAside(chat=conv, target=conv.quarantine("20260101T000000Z"), token="", ttl=60),
        chat.Take(chat=conv, token="t", lease_ms=1000, ttl=60),
        chat.Renew(chat=conv, token="t", lease_ms=1000),
        chat.Complete(chat=conv, token="t", job_raw="{}", job_id="7", outbox_entry="", ttl=60),
        chat.Delivered(chat=conv, token="t", job_id="7", keep=False, ttl=60, lease_ms=1000),
        chat.QuarantineOutbox(chat=conv, job_id="7", entry=b"x", ttl=60),
        chat.NoteFailure(chat=conv, job_id="7", kind="timeout", ttl=60),
        chat.Waiting(chat=conv),
        admission_lua.Accept(
            chat=conv,
            update_id=123456789,
            user_id=987654321,
            day="20260101",
            seen_ttl=60,
            job="{}",
            rate_notice="{}",
            daily_notice="{}",
            check_flood=True,
            counts_turn=True,
            burst=5,
            interval_ms=1000.0,
            daily_limit=10,
            day_counter_ttl=60,
            queue_cap=0,
            full_notice="",
            full_mark_ttl=60,
        ),
        admission_lua.StaffFlood(
            seen=keys.staff_seen(-1001234567890, 7),
            bucket=keys.staff_flood(-1001234567890, 555),
            seen_ttl=60,
            burst=5,
            interval_ms=1000.0,
        ),
        work.SignalScript(
            stream=work_stream,
            index=RedisKeys.work_queued(work_stream),
            conversation_key=conversation,
            maxlen=10,
        ),
        work.Stale(index=RedisKeys.work_queued(work_stream), older_than_ms=1, offset=0, count=1),
        work.Forget(index=RedisKeys.work_queued(work_stream), conversation_key="c", score="1"),
        work.Resignal(
            stream=work_stream,
            index=RedisKeys.work_queued(work_stream),
            conversation_key=conversation,
            score="1",
            maxlen=10,
            group="workers",
        ),
        handoff.RecordFailure(chat=conv, turn_id="K7M2QX9PAF", kept=5, ttl=60),
        handoff.Postpone(
            open_handoffs=keys.open_handoffs(-5), conversation_key="c", seen_ms=1, new_ms=2
        ),
        dead_letters.RecordDeadLetter(
            letters=keys.dead_letters,
            order=keys.dead_letter_order,
            turn_id="K7M2QX9PAF",
            record="{}",
            given_up_ms=1,
            kept=10,
        ),
        dead_letters.Redrive(
            chat=conv, turn_id="K7M2QX9PAF", job='{"job_id":"1"}', job_id="1", mark_ttl=60
        ),
        dead_letters.DropDeadLetter(
            letters=keys.dead_letters, order=keys.dead_letter_order, turn_id="K7M2QX9PAF"
        ),
        audit.WriteOnce(
            stream=stream,
            done=RedisKeys.audit_done(stream, "K7M2QX9PAF"),
            index=index,
            maxlen=10,
            done_ttl=60,
            turn_id="K7M2QX9PAF",
            chat="1",
            chats_kept=100,
            trim_batch=500,
            entries=(
                audit.AuditEntryArgs(fields=(("type", "turn"),), rollups=(("entries", "1"),)),
            ),
        ),
        csat.ClaimDue(due=keys.csat_due, now_ms=1, retry_ms=1000, limit=100),
        analysis.BeginAnalysis(chat=conv, version="s1:3", token="t1", ttl=60),
        csat.ForgetDue(due=keys.csat_due, conversation_key=conversation, claimed_ms=1),
        csat.Ask(
            chat=conv,
            now_ms=1,
            min_interval_ms=1000,
            question_id="q1",
            session_id="s1",
            session_turns=3,
            ttl=60,
        ),
        csat.RecordPress(chat=conv, question_id="q1", score=5, job_id="7"),
        shop.ApplyShopWrite(
            orders=keys.shop_orders(conversation),
            receipt_key=keys.shop_done(conversation, "a1b2c3"),
            order_id="8042",
            read="",
            new_order="{}",
            receipt="{}",
            ttl=60,
        ),
    ]


def every_script_class() -> set[type[LuaScript]]:
    found: set[type[LuaScript]] = set()
    for module in pkgutil.iter_modules(bot.storage.scripts.__path__):
        loaded = importlib.import_module(f"bot.storage.scripts.{module.name}")
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, LuaScript) and value is not LuaScript:
                found.add(value)
    return found


def test_every_script_is_sampled_here():
    # A new script must be added to script_samples, with the keys its callers pass.
    assert {
        type(call) for call in script_samples("support", "tg:1", "audit")
    } == every_script_class()


def test_every_script_gets_keys_of_one_hash_slot():
    for prefix in ("support", "a.b-c"):
        for conversation in ("tg:1", "tg:-1001234567890", "console-dev", "x" * 40):
            for stream in ("support:audit", "audit", "a{b}c"):
                for call in script_samples(prefix, conversation, stream):
                    keys = call.keys()
                    slots = {key_slot(key.encode()) for key in keys}
                    assert len(slots) == 1, (type(call).__name__, keys)


def test_every_key_and_argument_the_lua_reads_is_named():
    for call in script_samples("support", "tg:1", "audit"):
        name = type(call).__name__
        keys_read = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", call.SOURCE)}
        argv_read = {int(n) for n in re.findall(r"ARGV\[(\d+)\]", call.SOURCE)}
        # Every KEY given is read (and no other); no literal ARGV index past those given.
        assert keys_read == set(range(1, len(call.keys()) + 1)), name
        assert max(argv_read, default=0) <= len(call.args()), name


def test_no_script_is_registered_or_evaluated_outside_bot_storage_scripts():
    scripts = ROOT / "bot" / "storage" / "scripts"
    outside = []
    for path in sorted((ROOT / "bot").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py")):
        if path.is_relative_to(scripts):
            continue
        source = path.read_text(encoding="utf-8")
        if "register_script(" in source or "redis.call(" in source:
            outside.append(path.relative_to(ROOT).as_posix())
    assert outside == []
