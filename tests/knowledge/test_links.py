"""Links in KNOWLEDGE_DIR: only what stays inside the directory is read.

A real directory on disk with real symbolic links. A link to a file outside
(a ``.env`` with the bot's secrets) must never be indexed: a search would hand
its text to the model, and the model to a customer.
"""

import os
from pathlib import Path

from tools.knowledge.articles import read_articles
from tools.knowledge.library import HelpCenter

SECRET = "sk-live-0123456789abcdef"
ENV_FILE = f"# Настройки бота\n\nOPENAI_API_KEY={SECRET}\nREDIS_PASSWORD=hunter2 токен бота\n"


def _help_center_with_links(tmp_path: Path) -> Path:
    outside = tmp_path / "app"
    outside.mkdir()
    (outside / ".env").write_text(ENV_FILE, encoding="utf-8")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "token.md").write_text(ENV_FILE, encoding="utf-8")
    help_dir = tmp_path / "help"
    help_dir.mkdir()
    (help_dir / "payment.md").write_text("# Оплата\n\nКартой или наличными.", encoding="utf-8")
    # Absolute and relative links out of the directory, a link through a linked folder.
    (help_dir / "settings.md").symlink_to(outside / ".env")
    (help_dir / "relative.md").symlink_to(Path("..") / "app" / ".env")
    (help_dir / "sub").symlink_to(other, target_is_directory=True)
    (help_dir / "through.md").symlink_to(help_dir / "sub" / "token.md")
    # A link that stays inside is an ordinary alias of an article.
    (help_dir / "notes").mkdir()
    (help_dir / "notes" / "card.txt").write_text(
        "---\nid: card\n---\n# Карта\n\nПринимаем карты МИР.", encoding="utf-8"
    )
    (help_dir / "card.md").symlink_to(help_dir / "notes" / "card.txt")
    # A loop of links.
    (help_dir / "loop.md").symlink_to(help_dir / "loop.md")
    return help_dir


def test_links_out_of_the_directory_are_reported_and_never_read(tmp_path: Path) -> None:
    help_dir = _help_center_with_links(tmp_path)

    found = read_articles(help_dir)

    assert sorted(article.article_id for article in found.articles) == ["card", "payment"]
    problems = {problem.source: problem.problem for problem in found.problems}
    for name in ("settings.md", "relative.md", "through.md"):
        assert problems[name] == "links outside the help center directory: not read"
    # The loop is not a file at all: left out like a dangling link, without a crash.
    assert "loop.md" not in {article.source for article in found.articles}
    assert all(SECRET not in problem for problem in problems.values())


def test_a_search_never_returns_what_a_link_points_to_outside(tmp_path: Path) -> None:
    help_dir = _help_center_with_links(tmp_path)

    center = HelpCenter.load(help_dir)

    for query in ("OPENAI_API_KEY", "настройки бота токен", SECRET, "REDIS_PASSWORD"):
        hits = center.search(query, top_k=10)
        assert all(SECRET not in hit.snippet and "hunter2" not in hit.snippet for hit in hits)
        assert all(hit.article_id in {"card", "payment"} for hit in hits)


def test_a_help_center_directory_that_is_itself_a_link_still_reads_its_articles(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real-help"
    real.mkdir()
    (real / "payment.md").write_text("# Оплата\n\nКартой или наличными.", encoding="utf-8")
    linked = tmp_path / "help"
    linked.symlink_to(real, target_is_directory=True)

    found = read_articles(linked)

    assert [article.article_id for article in found.articles] == ["payment"]
    assert found.problems == ()
    assert os.path.islink(linked)
