"""Article files as they come: huge, oddly named; and the search kept off the event loop."""

import json
import logging
import threading
import tracemalloc
from pathlib import Path

import pytest

from bot.settings import DEMO_SHOP_DATA
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
from tools.knowledge.articles import MAX_ARTICLE_BYTES, read_articles
from tools.knowledge.library import HelpCenter
from tools.shop_data import ShopData
from turn import ToolCall, TurnContext

HUGE_BYTES = 106 * 1024 * 1024


def test_a_huge_file_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    (tmp_path / "payment.md").write_text("# Оплата\n\nКартой.", encoding="utf-8")
    huge = tmp_path / "export.md"
    with huge.open("wb") as file:
        file.write(b"# \xd0\x92\xd1\x8b\xd0\xb3\xd1\x80\xd1\x83\xd0\xb7\xd0\xba\xd0\xb0\n\n")
        # Sparse: 106 MB on paper, nothing on the disk.
        file.truncate(HUGE_BYTES)

    tracemalloc.start()
    try:
        found = read_articles(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert [article.article_id for article in found.articles] == ["payment"]
    [problem] = found.problems
    assert problem.source == "export.md"
    assert problem.problem.startswith("too long")
    # A read of the limit and a byte, not of the file.
    assert peak < 4 * MAX_ARTICLE_BYTES, peak


def test_a_line_break_in_a_file_name_never_splits_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "payment.md").write_text("# Оплата\n\nКартой.", encoding="utf-8")
    (tmp_path / "fake\nERROR forged line\u202e.md").write_text("без заголовка", encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="tools.knowledge.library"):
        HelpCenter.load(tmp_path)

    [record] = [r for r in caplog.records if "skipped" in r.getMessage()]
    line = record.getMessage()
    assert "\n" not in line
    assert "\u202e" not in line
    assert "fake\\nERROR forged line\\u202e.md" in line


async def test_a_search_runs_in_a_worker_thread_not_on_the_event_loop(
    articles_dir: Path,
) -> None:
    center = HelpCenter.load(articles_dir)
    threads: list[int] = []
    center.observe(lambda _results, _seconds: threads.append(threading.get_ident()))
    executor = ToolExecutor(
        build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA), help_center=center)
    )
    call = ToolCall(
        id="call_1",
        name=SEARCH_HELP_CENTER_TOOL_NAME,
        arguments=json.dumps({"query": "как вернуть деньги"}, ensure_ascii=False),
    )
    try:
        done = await executor.execute(
            call, TurnContext(conversation_key="c1", chat_id="c1", user_id=1, turn_id="t1")
        )
    finally:
        executor.close()

    assert json.loads(done.content)["ok"] is True
    assert threads
    assert threading.get_ident() not in threads
