"""The help center by language: each article's ``lang``, translations, the preferred language."""

import pytest

from bot.settings import DEMO_HELP_CENTER
from tools.knowledge.articles import ArticleError, collect_articles, parse_article, read_articles
from tools.knowledge.index import SearchIndex, preferred_language
from tools.knowledge.terms import query_language

# The most asked topics that ship in English too (docs/features.md, the help center; issue 46
# added the damaged, the incomplete and the defective delivery).
ENGLISH_TOPICS = {
    "returns-how",
    "refunds",
    "delivery-cost",
    "delivery-times",
    "delivery-regions",
    "delivery-pickup",
    "payment-methods",
    "payment-installments",
    "payment-failed",
    "warranty",
    # Issue 46: what an English customer's parcel may come with («arrived damaged», "wrong item").
    "damaged-parcel",
    "missing-item",
    "defective-item",
}


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    """The demo help center, both languages."""
    return SearchIndex.build(read_articles(DEMO_HELP_CENTER).articles)


def test_an_article_without_lang_is_russian_and_a_suffix_names_the_language() -> None:
    russian = parse_article("# Оплата\n\nКартой.", source="payment.md")
    english = parse_article("# Payment\n\nBy card.", source="payment.en.md")
    assert (russian.article_id, russian.lang) == ("payment", "ru")
    assert (english.article_id, english.lang) == ("payment", "en")
    assert {passage.lang for passage in english.passages} == {"en"}


def test_front_matter_lang_sets_the_language() -> None:
    article = parse_article(
        "---\nid: pay\nlang: en\n---\n# Payment\n\nBy card.", source="anything.md"
    )
    assert (article.article_id, article.lang) == ("pay", "en")


@pytest.mark.parametrize(
    ("text", "source", "problem"),
    [
        ("---\nlang: de\n---\n# Zahlung\n\nMit Karte.", "pay.md", "lang 'de' must be one of"),
        ("---\nlang: ru\n---\n# Payment\n\nBy card.", "pay.en.md", "contradicts"),
    ],
)
def test_a_wrong_lang_is_refused_with_one_line(text: str, source: str, problem: str) -> None:
    with pytest.raises(ArticleError, match=problem) as error:
        parse_article(text, source=source)
    assert "\n" not in str(error.value)


def test_translations_share_an_id_but_a_twin_in_one_language_is_a_problem() -> None:
    found = collect_articles(
        [
            ("pay.md", "# Оплата\n\nКартой."),
            ("pay.en.md", "# Payment\n\nBy card."),
            ("pay-copy.md", "---\nid: pay\n---\n# Оплата\n\nНаличными."),
        ]
    )
    assert [(a.article_id, a.lang) for a in found.articles] == [("pay", "ru"), ("pay", "en")]
    assert [p.source for p in found.problems] == ["pay-copy.md"]
    assert found.problems[0].problem.startswith("duplicate id 'pay' in lang 'ru'")


def test_the_demo_ships_the_most_asked_topics_in_english_as_translations() -> None:
    found = read_articles(DEMO_HELP_CENTER)
    assert found.problems == ()
    english = {a.article_id: a for a in found.articles if a.lang == "en"}
    russian = {a.article_id: a for a in found.articles if a.lang == "ru"}
    assert set(english) == ENGLISH_TOPICS
    for article_id, article in english.items():
        original = russian[article_id]
        # Same structure: a passage found in one language has its place in the other.
        assert len(article.passages) == len(original.passages), article_id
        assert article.url is not None
        assert article.url != original.url


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("Как вернуть товар?", "ru"),
        ("How do I return an item?", "en"),
        ("где мой order", "ru"),
        ("refund for заказ 8041", "en"),
        ("8041", None),
    ],
)
def test_the_question_s_language_is_its_script(query: str, language: str | None) -> None:
    assert query_language(query) == language


def test_a_telegram_language_code_is_preferred_when_the_help_center_knows_it() -> None:
    assert preferred_language("Как вернуть товар?", "en-US") == "en"
    assert preferred_language("Как вернуть товар?", "de") == "ru"
    assert preferred_language("How do I return an item?", None) == "en"
    assert preferred_language("8041", None) == "ru"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do I return an item?", "returns-how"),
        ("When will I get my refund?", "refunds"),
        ("How much is delivery?", "delivery-cost"),
        ("How long does delivery take?", "delivery-times"),
        ("Do you ship to Kazakhstan?", "delivery-regions"),
        ("Can I pay in installments?", "payment-installments"),
        ("My card payment failed", "payment-failed"),
        ("What is the warranty on a coffee machine?", "warranty"),
    ],
)
def test_an_english_question_finds_the_english_article(
    index: SearchIndex, query: str, expected: str
) -> None:
    hits = index.search(query)
    assert hits, query
    assert (hits[0].article_id, hits[0].lang) == (expected, "en")
    assert hits[0].url is not None
    assert "/en/" in hits[0].url
    assert all(hit.lang == "en" for hit in hits)


def test_a_russian_question_finds_the_russian_article(index: SearchIndex) -> None:
    hits = index.search("Как вернуть товар, если он не подошёл?")
    assert (hits[0].article_id, hits[0].lang) == ("returns-how", "ru")
    assert hits[0].title == "Как вернуть товар"
    assert all(hit.lang == "ru" for hit in hits)


def test_an_english_question_on_a_russian_only_topic_falls_back_to_russian(
    index: SearchIndex,
) -> None:
    hits = index.search("How do I delete my account?")
    assert (hits[0].article_id, hits[0].lang) == ("account-delete", "ru")


def test_a_russian_customer_gets_an_english_only_topic_in_english() -> None:
    built = SearchIndex.build(
        collect_articles(
            [
                ("returns.md", "# Возврат\n\nВернуть товар можно за 14 дней."),
                ("rental.en.md", "# Renting a coffee machine\n\nRent one for a month."),
            ]
        ).articles
    )
    hits = built.search("rent a coffee machine", language="ru")
    assert [(hit.article_id, hit.lang) for hit in hits] == [("rental", "en")]


def test_a_topic_found_in_another_language_is_given_in_the_preferred_one(
    index: SearchIndex,
) -> None:
    """An English question from a Russian customer: the Russian article, same passage."""
    english = index.search("How do I start a return? My orders, return an item", language="en")
    russian = index.search("How do I start a return? My orders, return an item", language="ru")
    assert (english[0].article_id, english[0].lang) == ("returns-how", "en")
    assert (russian[0].article_id, russian[0].lang) == ("returns-how", "ru")
    assert english[0].heading == "How to start a return"
    assert russian[0].heading == "Как оформить возврат"
    assert russian[0].url == "https://help.shop.example/returns/how"


def test_a_question_no_language_answers_finds_nothing(index: SearchIndex) -> None:
    assert index.search("What is the weather like in Paris tomorrow?") == []
    assert index.search("Какая завтра погода в Париже?") == []
