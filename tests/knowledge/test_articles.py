"""Parsing articles: front matter, defaults, passages, and every kind of broken article."""

from pathlib import Path

import pytest

from tools.knowledge.articles import ArticleError, parse_article, read_articles


def test_front_matter_gives_id_url_and_tags() -> None:
    article = parse_article(
        "---\nid: returns\nurl: https://help.example/returns\ntags: возврат, refund\n---\n"
        "# Возврат товара\n\nВернуть товар можно за 14 дней.\n",
        source="anything.md",
    )
    assert article.article_id == "returns"
    assert article.url == "https://help.example/returns"
    assert article.tags == ("возврат", "refund")
    assert article.title == "Возврат товара"


def test_without_front_matter_the_file_name_is_the_id() -> None:
    article = parse_article("# Оплата\n\nКартой или наличными.", source="payment.md")
    assert article.article_id == "payment"
    assert article.url is None
    assert article.tags == ()


def test_a_long_article_is_split_into_passages_at_its_headings() -> None:
    article = parse_article(
        "# Доставка\n\nВступление.\n\n## Курьер\n\nПривезёт завтра.\n\n"
        "### Интервалы\n\nУтро или вечер.\n\n## Пункты выдачи\n\nХранение 7 дней.\n",
        source="delivery.md",
    )
    assert [(p.heading, p.text) for p in article.passages] == [
        ("", "Вступление."),
        ("Курьер", "Привезёт завтра."),
        ("Интервалы", "Утро или вечер."),
        ("Пункты выдачи", "Хранение 7 дней."),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Просто текст без заголовка.", "no title"),
        ("# Заголовок\n\n", "empty"),
        ("---\nid: a\n# Заголовок\n\nТекст.", "not closed"),
        ("---\ntitle: Другое\n---\n# Заголовок\n\nТекст.", "front matter line 2"),
        ("---\nid: Плохой id\n---\n# Заголовок\n\nТекст.", "id"),
        ("---\nurl: ftp://x\n---\n# Заголовок\n\nТекст.", "url"),
        ("# Заголовок\n\n" + "слово " * 5000, "too long"),
    ],
)
def test_a_broken_article_is_refused_with_one_line(text: str, problem: str) -> None:
    with pytest.raises(ArticleError, match=problem) as error:
        parse_article(text, source="broken.md")
    assert "\n" not in str(error.value)


def test_a_directory_skips_and_reports_broken_and_duplicate_articles(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Первая\n\nТекст.", encoding="utf-8")
    (tmp_path / "b.md").write_text("---\nid: a\n---\n# Вторая\n\nТекст.", encoding="utf-8")
    (tmp_path / "c.md").write_text("без заголовка", encoding="utf-8")
    (tmp_path / "d.md").write_bytes(b"# \xff\xfe")
    (tmp_path / "notes.txt").write_text("# Не статья\n\nТекст.", encoding="utf-8")
    found = read_articles(tmp_path)
    assert [article.article_id for article in found.articles] == ["a"]
    assert [(p.source, p.problem.split(" ")[0]) for p in found.problems] == [
        ("b.md", "duplicate"),
        ("c.md", "no"),
        ("d.md", "not"),
    ]
