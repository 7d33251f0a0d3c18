"""A job that kills every process running it is given up after ``JOB_MAX_ATTEMPTS``.

Three webhook processes share one Redis; the scripted model hangs on one
question, and the test SIGKILLs whichever process asked it (each process has
its own API key, so the request names its sender). With ``JOB_MAX_ATTEMPTS=2``
the third process to take the job does not run it again: the customer gets the
kind failure message with the incident code, the job is in the dead letters
(``support-audit dead-letters``), and the customer's next message is answered.
"""

import asyncio
import contextlib
import io
import json
from functools import partial
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot import customer_texts
from bot.queue.jobs import turn_id_for
from bot.support_audit.cli import main as audit_cli
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, hang
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    CLAIM_INTERVAL_SECONDS,
    LEASE_SECONDS,
    PREFIX,
    STREAM,
    BotProcess,
    Cluster,
    answer_for,
    asks,
    audit_turns,
    echo,
    post_update,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)

CHAT = 5151
POISON = "вопрос, на котором процесс падает"
NEXT = "а когда вы работаете?"
MAX_ATTEMPTS = 2
# A dead worker's lease expires, its signal idles for a lease, the next claim round takes
# it; a busy 2-core machine adds the rest.
TAKEOVER_WITHIN = 2 * LEASE_SECONDS + CLAIM_INTERVAL_SECONDS + 20


def hang_on(question: str) -> Any:
    """A model that never answers ``question`` (the process asking is killed meanwhile)."""

    def respond(body: Any) -> Reply:
        return hang(120) if asks(body, question) else echo(body)

    return respond


def asked(model: ScriptedOpenAIServer, times: int) -> bool:
    """Whether the model has had ``times`` requests."""
    return len(model.requests) >= times


def asker(model: ScriptedOpenAIServer, processes: list[BotProcess], index: int) -> BotProcess:
    """The process that sent the model's ``index``-th request (named by its API key)."""
    key = model.requests[index].headers.get("authorization", "")
    return next(child for child in processes if key == f"Bearer sk-{child.name}")


async def test_a_job_that_kills_its_process_every_time_is_dead_lettered(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed twice, the job is given up: failure text with the code, then the chat goes on."""
    model.responder = hang_on(POISON)
    cluster.env["JOB_MAX_ATTEMPTS"] = str(MAX_ATTEMPTS)
    # Started together: each start is mostly importing, which the machine's cores share.
    processes = list(
        await asyncio.gather(
            *(
                cluster.start("webhook", name, OPENAI_API_KEY=f"sk-{name}")
                for name in ("p0", "p1", "p2")
            )
        )
    )
    poison = telegram.message_update(CHAT, POISON)
    async with aiohttp.ClientSession() as http:
        assert await post_update(http, processes[0], poison) == 200
        for attempt in range(MAX_ATTEMPTS):
            await wait_until(
                partial(asked, model, attempt + 1),
                TAKEOVER_WITHIN,
                f"attempt {attempt + 1} asks the model",
                cluster.logs,
            )
            await asker(model, processes, attempt).sigkill()

        # Before the fix the last process ran the job a third time and hung like the others.
        incident = turn_id_for(f"tg:{CHAT}", poison["update_id"])
        await telegram.wait_for_texts(CHAT, 1, within=TAKEOVER_WITHIN)
        assert telegram.sent_texts(CHAT) == [customer_texts.unexpected_failure_message(incident)]
        assert len(model.requests) == MAX_ATTEMPTS, "the job did not run again"

        survivor = next(child for child in processes if child.alive)
        update = telegram.message_update(CHAT, NEXT)
        assert await post_update(http, survivor, update) == 200
        await telegram.wait_for_texts(CHAT, 2, within=30)
    assert telegram.sent_texts(CHAT)[1] == answer_for(NEXT)

    # The worker audits a turn right after Telegram took its reply: wait for the entry.
    async def chat_turns() -> list[dict[str, str]]:
        return [t for t in await audit_turns(store) if t["chat_id"] == str(CHAT)]

    deadline = asyncio.get_running_loop().time() + 10
    while len(turns := await chat_turns()) < 2:
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"the second turn was not audited within 10 s\n{cluster.logs()}")
        await asyncio.sleep(0.05)
    assert [(t["turn_id"], t["outcome"], t.get("error_code")) for t in turns][:1] == [
        (incident, "failed", "poison_job")
    ]
    assert [t["outcome"] for t in turns[1:]] == ["answered"]

    monkeypatch.chdir(cluster.tmp_path)
    monkeypatch.setenv("REDIS_URL", cluster.redis_url)
    monkeypatch.setenv("REDIS_KEY_PREFIX", PREFIX)
    monkeypatch.setenv("AUDIT_STREAM", STREAM)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert audit_cli(["dead-letters", "--json"]) == 0
    rows = [json.loads(line) for line in printed.getvalue().splitlines()]
    assert [(r["update_id"], r["turn_id"], r["attempts"], r["error"]) for r in rows] == [
        (poison["update_id"], incident, MAX_ATTEMPTS, "interrupted")
    ]
    assert POISON not in json.dumps(rows, ensure_ascii=False)
    assert "Traceback" not in cluster.logs()
