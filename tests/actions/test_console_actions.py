"""The console shows the card and asks [д/н]; the offline demo model proposes the actions.

A real ``python -m bot console`` process over a real Redis, as a developer runs it.
"""

import os
import subprocess
import sys

import redis

from bot.testing.redis_server import RedisServer


def run_console(redis_url: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LLM_BACKEND": "offline",
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": "console-actions",
        "AUDIT_STREAM": "console-actions:audit",
        "STREAMING": "off",
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", "console", "--session", "dev"],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        check=False,
    )


def test_the_three_actions_are_proposed_confirmed_or_declined_in_the_console(
    redis_server: RedisServer,
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    result = run_console(
        redis_server.url,
        "отмените заказ 8042\nда\nГде заказ 8042?\n"
        "хочу вернуть клавиатуру из заказа 8043\nн\n"
        "поменяйте адрес доставки заказа 8041 на Казань, ул. Баумана, 5\n/exit\n",
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert (
        "[Карточка] Отменить заказ 8042: наушники, чехол для наушников. "
        "Деньги вернутся на карту в течение 5 дней." in out
    )
    # «да» answers the card: nobody is sent to a button the console does not have.
    assert "нажмите кнопку «Подтвердить»" not in out
    assert "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней." in out
    assert "Заказ 8042: Отменён." in out
    assert "[Карточка] Оформить возврат из заказа 8043: клавиатура." in out
    assert "Возврат не оформлен: вы отказались." in out
    # 8041 is with the courier: the rule goes back to the model, no card.
    assert "Адрес доставки заказа 8041 изменить нельзя" in out
    # The 8042 card, the 8043 card, and each once more as settled.
    assert out.count("[Карточка]") == 2 + 2
    entries = client.xrange("console-actions:audit") or []
    events = [
        fields.get(b"event", b"")
        for _, fields in entries
        if fields is not None and fields.get(b"type") == b"action"
    ]
    assert events == [b"proposed", b"confirmed", b"executed", b"proposed", b"declined"]
    client.close()
