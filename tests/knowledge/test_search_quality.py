"""The help center's search on the demo articles: a quality floor and the cases the issue names.

The index is deterministic, so the floor cannot flake: a change that drops
recall@3 or MRR under it made the search worse for customers' real phrasing.
"""

from pathlib import Path

import pytest

from bot.settings import DEMO_HELP_CENTER
from tools.knowledge.articles import read_articles
from tools.knowledge.index import SearchIndex

LABELLED = Path(__file__).with_name("labelled_queries.tsv")


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    articles = read_articles(DEMO_HELP_CENTER)
    assert articles.problems == ()
    return SearchIndex.build(articles.articles)


def _labelled() -> list[tuple[str | None, str]]:
    rows = []
    for line in LABELLED.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expected, query = line.split("\t", 1)
            rows.append((None if expected == "-" else expected, query))
    return rows


def _ids(index: SearchIndex, query: str) -> list[str]:
    return [hit.article_id for hit in index.search(query, 3)]


def test_the_demo_help_center_covers_the_topics_the_issue_lists() -> None:
    articles = read_articles(DEMO_HELP_CENTER).articles
    assert len(articles) >= 25
    ids = {article.article_id for article in articles}
    for needed in (
        "delivery-cost",
        "payment-methods",
        "returns-how",
        "warranty",
        "order-change",
        "account-registration",
        "promo-codes",
        "gift-cards",
        "damaged-parcel",
        "business-customers",
        "contacts",
    ):
        assert needed in ids


def test_every_labelled_query_names_an_existing_article(index: SearchIndex) -> None:
    rows = _labelled()
    assert len([expected for expected, _ in rows if expected]) >= 80
    ids = {article.article_id for article in read_articles(DEMO_HELP_CENTER).articles}
    assert {expected for expected, _ in rows if expected} <= ids


def test_recall_at_3_and_mrr_stay_above_their_floor(index: SearchIndex) -> None:
    answered = [(expected, query) for expected, query in _labelled() if expected]
    ranks = []
    for expected, query in answered:
        found = _ids(index, query)
        ranks.append(found.index(expected) + 1 if expected in found else None)
    recall = sum(rank is not None for rank in ranks) / len(ranks)
    mrr = sum(1 / rank for rank in ranks if rank) / len(ranks)
    # Measured 0.933 and 0.882 (bench/README.md); 0.944 and 0.897 on issue 46's larger set
    # (0.921 and 0.864 before its fixes). The floor leaves room for new articles.
    assert recall >= 0.92, recall
    assert mrr >= 0.87, mrr


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("вернуть товары", "returns-how"),
        ("возврата товаров", "returns-how"),
        ("подарочными сертификатами", "gift-cards"),
        ("оплатить частями", "payment-installments"),
    ],
)
def test_inflected_words_find_the_article(index: SearchIndex, query: str, expected: str) -> None:
    assert expected in _ids(index, query)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("вазврат товара", "returns-how"),
        ("стоимасть доставки", "delivery-cost"),
        ("подарочный сертефикат", "gift-cards"),
        ("промакод не работает", "promo-not-working"),
    ],
)
def test_a_typo_still_finds_the_article(index: SearchIndex, query: str, expected: str) -> None:
    assert expected in _ids(index, query)


def test_an_english_query_finds_the_article_by_its_tags(index: SearchIndex) -> None:
    assert _ids(index, "refund")[0] == "refunds"
    assert "delivery-regions" in _ids(index, "international shipping")


@pytest.mark.parametrize(
    "query",
    [
        "А какие у вас условия возврата?",
        "какие условия возврата",
        "условия вазврата",
        "правила возврата товара",
        "на каких условиях можно вернуть товар",
        "Можно вернуть товар, если он не подошёл?",
    ],
)
def test_return_conditions_find_the_return_article_first(index: SearchIndex, query: str) -> None:
    """Issue 33: «условия» in the contacts' text outweighed «возврат» in every return article."""
    assert _ids(index, query)[0] == "returns-how"


@pytest.mark.parametrize(
    "query",
    [
        "Сколько дней обычно идёт доставка?",
        "сроки доставки",
        "через сколько привезут",
        "сколько дней идет доставка",
    ],
)
def test_delivery_time_questions_find_delivery_times_first(index: SearchIndex, query: str) -> None:
    """Issue 33: «обычно» and «идёт» (framing words) sent these to the order-tracking article."""
    assert _ids(index, query)[0] == "delivery-times"


def test_word_order_does_not_matter(index: SearchIndex) -> None:
    assert _ids(index, "вернуть деньги за заказ") == _ids(index, "за заказ деньги вернуть")


def test_an_unrelated_question_finds_nothing(index: SearchIndex) -> None:
    assert index.search("рецепт борща", 3) == []
    assert index.search("расскажи анекдот", 3) == []
    assert index.search("", 3) == []
    assert index.search("как и что", 3) == []


def test_a_hit_carries_title_url_and_a_short_snippet(index: SearchIndex) -> None:
    hit = index.search("как вернуть деньги", 3)[0]
    assert hit.article_id == "refunds"
    assert hit.title == "Когда вернутся деньги"
    assert hit.url == "https://help.shop.example/returns/refunds"
    assert 0 < len(hit.snippet) <= 600
    assert hit.score > 0


@pytest.mark.parametrize(
    "query",
    [
        "Сколько идёт доставка в Казань?",
        "доставка в казань сколько дней",
        "как долго ждать курьера?",
        "Доставка в Санкт-Петербург сколько дней?",
        "сколько ехать заказу до Екатеринбурга",
        "How long does delivery to Kazan take?",
    ],
)
def test_delivery_to_a_city_finds_delivery_times_first(index: SearchIndex, query: str) -> None:
    """Issue 46: «Казань» matched «касанием» (one letter off) and found the headphones."""
    assert _ids(index, query)[0] == "delivery-times"


def test_a_short_stem_is_not_taken_for_a_typo_of_another_word(index: SearchIndex) -> None:
    assert "headphones-pairing" not in _ids(index, "доставка в Казань")
    # Long words still forgive a letter.
    assert _ids(index, "вазврат товара")[0] == "returns-how"


def test_a_city_alone_is_no_topic(index: SearchIndex) -> None:
    """The weather in a city the delivery articles name is not a question for them."""
    assert index.search("какая погода в москве", 3) == []
    assert index.search("какая погода в казани", 3) == []


def test_a_number_no_article_has_does_not_hide_the_question(index: SearchIndex) -> None:
    assert _ids(index, "почему доставка платная если у меня заказ на 4000")[0] == "delivery-cost"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("My package arrived damaged", "damaged-parcel"),
        ("The box was crushed when it arrived", "damaged-parcel"),
        ("I received the wrong item", "missing-item"),
        ("An item is missing from my order", "missing-item"),
        ("The item stopped working after a week", "defective-item"),
    ],
)
def test_what_went_wrong_with_a_parcel_finds_its_english_article(
    index: SearchIndex, query: str, expected: str
) -> None:
    """Issue 46: these found the warranty's exclusions and the refunds article."""
    hit = index.search(query, 3)[0]
    assert (hit.article_id, hit.lang) == (expected, "en")
