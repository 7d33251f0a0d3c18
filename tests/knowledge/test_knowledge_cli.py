"""``python -m bot knowledge check|search`` as a support lead runs them."""

import os
import subprocess
import sys
from pathlib import Path

from tests.knowledge.conftest import write_article

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "knowledge", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def test_check_passes_the_shipped_demo_help_center() -> None:
    done = _run("check")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "43 articles" in done.stderr
    assert "(by language: en 13, ru 30)" in done.stderr


def test_check_prints_one_line_per_problem_and_exits_1(tmp_path: Path) -> None:
    write_article(tmp_path, "good.md", "# Оплата\n\nКартой.")
    write_article(tmp_path, "twin.md", "---\nid: good\n---\n# Ещё оплата\n\nНаличными.")
    write_article(tmp_path, "untitled.md", "Текст без заголовка.")
    write_article(tmp_path, "empty.md", "# Только заголовок\n")
    write_article(tmp_path, "long.md", "# Длинная\n\n" + "слово " * 5000)
    write_article(tmp_path, "front.md", "---\nauthor: я\n---\n# Статья\n\nТекст.")
    done = _run("check", env={"KNOWLEDGE_DIR": str(tmp_path)})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 5, lines
    by_file = {Path(line.split(": ", 1)[0]).name: line.split(": ", 1)[1] for line in lines}
    assert by_file["twin.md"].startswith("duplicate id 'good'")
    assert by_file["untitled.md"].startswith("no title")
    assert by_file["empty.md"].startswith("empty")
    assert by_file["long.md"].startswith("too long")
    assert by_file["front.md"].startswith("front matter line 2")
    assert "1 articles, 1 passages, 5 problem(s)" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_of_a_missing_directory_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = _run("check", "--dir", str(tmp_path / "nope"))
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0
    assert "cannot be read" in done.stderr


def test_search_shows_what_the_bot_would_find_with_scores(tmp_path: Path) -> None:
    done = _run("search", "как вернуть деньги")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("1. refunds [ru]  score ")
    assert "«Когда вернутся деньги»" in first
    assert "https://help.shop.example/returns/refunds" in first

    write_article(tmp_path, "rent.md", "# Аренда кофемашин\n\nКофемашину можно взять в аренду.")
    done = _run("search", "аренда кофемашины", "--dir", str(tmp_path), "--top", "1")
    assert done.stdout.splitlines()[0].startswith("1. rent [ru]  score ")

    done = _run("search", "рецепт борща")
    assert done.returncode == 0
    assert done.stdout.startswith("Nothing relevant found")


def test_bad_knowledge_settings_are_one_line_and_exit_2() -> None:
    done = _run("check", env={"KNOWLEDGE_TOP_K": "0"})
    assert done.returncode == 2
    assert done.stderr.startswith("error: KNOWLEDGE_TOP_K")


def test_search_takes_the_customer_s_language() -> None:
    """An English question, as an English and as a Russian-speaking customer gets it."""
    english = _run("search", "when will I get my refund", "--top", "1")
    russian = _run("search", "when will I get my refund", "--top", "1", "--lang", "ru")
    unknown = _run("search", "refund", "--lang", "de")

    assert english.stdout.splitlines()[0].startswith("1. refunds [en]  score ")
    assert "https://help.shop.example/en/returns/refunds" in english.stdout
    assert russian.stdout.splitlines()[0].startswith("1. refunds [ru]  score ")
    assert "«Когда вернутся деньги»" in russian.stdout
    assert unknown.returncode == 2
    assert "invalid choice: 'de'" in unknown.stderr
