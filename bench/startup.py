"""``python -m bench.startup``: start-up time of two source trees, interleaved (bench/README.md).

Each tree is a plain copy of the project at a commit
(``git archive <commit> | tar -x -C DIR``). Its processes run in an empty
directory with that tree first on ``PYTHONPATH`` (ahead of the editable
install), the same venv, against a private redis-server and the fake Bot API
of this process. Per round and tree, in alternating order:

- ``settings_error_s``: exec to exit of ``python -m bot polling`` with no token
  and a bad ``REDIS_URL`` (exit 2);
  (``_cpu_s``: its CPU time);
- ``settings_error_import_ms`` and ``_modules``: what that process spent importing
  (the sum of ``-X importtime``'s self times) and how many modules;
- ``start_import_ms`` and ``start_modules``: the same for ``import bot.telegram.process``;
- ``first_get_updates_s``: exec to the first ``getUpdates`` of ``python -m bot polling``
  (``LLM_BACKEND=openai``: the SDK is imported as in production), ``_cpu_s``: its
  CPU time by then;
- ``redis_down_s``, ``token_rejected_s``, ``staff_refused_s``: exec to the exit (just
  after its one ``error:`` line) of ``python -m bot polling`` (``LLM_BACKEND=openai``)
  with ``REDIS_URL`` on a closed port, with a token the fake Bot API answers 401 to,
  and with a ``STAFF_CHAT_ID`` that is no forum (exit 1 each); ``_cpu_s``: CPU time.
  On a shared machine wall times swing; CPU times and module counts much less.
"""

import argparse
import asyncio
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.ops import event_loop
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.telegram_server import TEST_TOKEN, FakeTelegramServer

_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL")


def _env(tree: Path, **extra: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    env["PYTHONPATH"] = str(tree)
    env.update(extra)
    return env


def _imports(stderr: str) -> tuple[float, int]:
    """``-X importtime``'s sum of self times (ms) and the number of modules imported."""
    total = 0
    count = 0
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            total += int(line.split(":", 1)[1].split("|", 1)[0])
            count += 1
    return total / 1000, count


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """User plus system CPU seconds of a running process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _check_tree(tree: Path, workdir: Path) -> None:
    """The tree, not the editable install, is what the processes import."""
    found = subprocess.run(
        [sys.executable, "-c", "import bot; print(bot.__file__)"],
        cwd=workdir,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not found.startswith(str(tree)):
        raise SystemExit(f"{tree}: the processes import {found}, not this tree")


def _settings_error(tree: Path, workdir: Path) -> dict[str, float]:
    env = _env(tree, LLM_BACKEND="offline", REDIS_URL="http://localhost:6379/0")
    cpu_before = _children_cpu()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot", "polling"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    cpu = _children_cpu() - cpu_before
    if result.returncode != 2:
        raise SystemExit(f"{tree}: expected exit 2, got {result.returncode}")
    import_ms, modules = _imports(result.stderr)
    return {
        "settings_error_s": elapsed,
        "settings_error_cpu_s": cpu,
        "settings_error_import_ms": import_ms,
        "settings_error_modules": modules,
    }


def _start_up_failure(
    tree: Path, workdir: Path, name: str, telegram: FakeTelegramServer, redis_url: str
) -> dict[str, float]:
    """Exec to exit of a polling process that must fail its start-up with exit 1."""
    env = _env(
        tree,
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        REDIS_URL=redis_url,
        HEALTH_PORT="0",
    )
    if name == "redis_down":
        env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    elif name == "token_rejected":
        env["TELEGRAM_BOT_TOKEN"] = "987654321:AAH-a-token-the-server-does-not-know-0002"  # noqa: S105 - fake
    else:
        env["STAFF_CHAT_ID"] = "-1001234567890"
    cpu_before = _children_cpu()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "bot", "polling"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if result.returncode != 1 or len(errors) != 1:
        raise SystemExit(f"{tree} {name}: exit {result.returncode}, {result.stderr[-500:]}")
    return {f"{name}_s": elapsed, f"{name}_cpu_s": _children_cpu() - cpu_before}


def _start_imports(tree: Path, workdir: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import bot.telegram.process"],
        cwd=workdir,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    import_ms, modules = _imports(result.stderr)
    return {"start_import_ms": import_ms, "start_modules": modules}


async def _first_get_updates(
    tree: Path, workdir: Path, telegram: FakeTelegramServer, redis_url: str
) -> dict[str, float]:
    env = _env(
        tree,
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        REDIS_URL=redis_url,
        HEALTH_PORT="0",
        LOG_LEVEL="WARNING",
    )
    before = telegram.received("getUpdates")
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "polling",
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        while telegram.received("getUpdates") == before:
            if process.returncode is not None:
                raise SystemExit(f"{tree}: the bot exited with {process.returncode}")
            await asyncio.sleep(0.02)
        return {
            "first_get_updates_s": time.perf_counter() - started,
            "first_get_updates_cpu_s": _process_cpu(process.pid),
        }
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await process.wait()


async def _bench(trees: dict[str, Path], rounds: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    redis = RedisServer()
    redis.start()
    telegram = FakeTelegramServer()
    await telegram.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
            workdir = Path(scratch)
            for tree in trees.values():
                _check_tree(tree, workdir)
            for index in range(rounds):
                order = list(trees.items())
                if index % 2:
                    order.reverse()
                for name, tree in order:
                    figures = results[name]
                    measured = {
                        **await asyncio.to_thread(_settings_error, tree, workdir),
                        **await asyncio.to_thread(_start_imports, tree, workdir),
                        **await _first_get_updates(tree, workdir, telegram, redis.url),
                    }
                    for failure in ("redis_down", "token_rejected", "staff_refused"):
                        measured |= await asyncio.to_thread(
                            _start_up_failure, tree, workdir, failure, telegram, redis.url
                        )
                    for key, value in measured.items():
                        figures.setdefault(key, []).append(value)
                    print(
                        f"round {index + 1} {name}: "
                        + ", ".join(f"{key}={values[-1]:.3f}" for key, values in figures.items())
                    )
    finally:
        await telegram.close()
        redis.close()
    return results


def main() -> None:
    """Parse ``--tree NAME=DIR`` (two of them, before first) and ``--rounds``; print medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.startup")
    parser.add_argument("--tree", action="append", required=True, help="NAME=DIR, twice")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {
        name: Path(path).resolve() for name, _, path in (item.partition("=") for item in args.tree)
    }
    results = event_loop.run(_bench(trees, args.rounds))
    names = list(trees)
    print("median of " + str(args.rounds) + " rounds: " + " | ".join(names) + " | ratio")
    for key in results[names[0]]:
        medians = [statistics.median(results[name][key]) for name in names]
        ratio = f"{medians[-1] / medians[0]:.2f}x" if len(medians) == 2 else ""
        print(f"{key}: " + " | ".join(f"{m:.3f}" for m in medians) + f" | {ratio}")


if __name__ == "__main__":
    main()
