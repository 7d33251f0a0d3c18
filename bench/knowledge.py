"""``python -m bench.knowledge``: which search engine the help center uses, by the numbers.

Every engine indexes the same passages (``tools.knowledge.articles``) and an
article is represented by its best passage. For the demo help center and for
1,000 articles (the demo ones plus generated ones) it measures, each engine in
a fresh process: recall@3 and MRR on ``tests/knowledge/labelled_queries.tsv``,
how many off-topic queries still found something, search p50/p99, index build
time and the resident memory the engine added (its imports and its index).

The candidates besides ours need packages that are not dependencies; install
them outside the project's venv and point ``--site`` at them::

    .venv/bin/pip install --target /tmp/kbench tantivy bm25s rank-bm25 pymorphy3 pymorphy3-dicts-ru
    .venv/bin/python -m bench.knowledge --site /tmp/kbench

Results go to stdout as a Markdown table (``bench/README.md`` keeps one).
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot.settings import DEMO_HELP_CENTER
from tools.knowledge.articles import Article, Passage, read_articles

LABELLED = Path(__file__).parent.parent / "tests" / "knowledge" / "labelled_queries.tsv"
ENGINES = (
    "ours",
    "ours-no-typos",
    "rank-bm25+pystemmer",
    "bm25s+pystemmer",
    "rank-bm25+pymorphy3",
    "tantivy",
    "tantivy-fuzzy",
)
_WORD = re.compile(r"[a-zа-яё0-9]+")

Search = Callable[[str, int], list[str]]


def labelled_queries(path: Path = LABELLED) -> list[tuple[str | None, str]]:
    """``(expected article id or None, query)`` pairs of the labelled set."""
    rows: list[tuple[str | None, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        expected, query = line.split("\t", 1)
        rows.append((None if expected == "-" else expected, query))
    return rows


def generated_articles(count: int, seed: int = 7) -> list[Article]:
    """``count`` articles of the demo help center's words in random order (deterministic)."""
    demo = read_articles(DEMO_HELP_CENTER).articles
    # Decoys of the Russian articles' words, as before the English ones shipped.
    words = [
        word
        for article in demo
        if article.lang == "ru"
        for passage in article.passages
        for word in _WORD.findall(passage.text.lower())
    ]
    rng = random.Random(seed)
    articles = list(demo)
    for number in range(count - len(demo)):
        article_id = f"generated-{number:04d}"
        passages = tuple(
            Passage(
                article_id=article_id,
                heading=" ".join(rng.choices(words, k=3)) if part else "",
                text=" ".join(rng.choices(words, k=rng.randint(40, 120))),
            )
            for part in range(rng.randint(1, 4))
        )
        articles.append(
            Article(
                article_id=article_id,
                title=" ".join(rng.choices(words, k=4)).capitalize(),
                url=None,
                tags=tuple(rng.choices(words, k=2)),
                passages=passages,
                source=f"{article_id}.md",
            )
        )
    return articles


def _documents(articles: Sequence[Article]) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    for article in articles:
        for passage in article.passages:
            ids.append(article.article_id)
            texts.append(
                f"{article.title} {article.title} {' '.join(article.tags)} "
                f"{passage.heading} {passage.text}"
            )
    return ids, texts


def _best_articles(ids: Sequence[str], ranked: Sequence[int], top_k: int) -> list[str]:
    found: list[str] = []
    for number in ranked:
        if ids[number] not in found:
            found.append(ids[number])
            if len(found) == top_k:
                break
    return found


def _ours(articles: Sequence[Article], *, typos: bool) -> Search:
    from tools.knowledge import index  # noqa: PLC0415 - imported in the measured process

    if not typos:
        index.FUZZY_MIN_LENGTH = 10_000
    built = index.SearchIndex.build(articles)
    return lambda query, top_k: [hit.article_id for hit in built.search(query, top_k)]


def _stems() -> Callable[[str], list[str]]:
    from tools.knowledge.terms import TermAnalyzer  # noqa: PLC0415

    return TermAnalyzer().terms


def _lemmas() -> Callable[[str], list[str]]:
    import pymorphy3  # noqa: PLC0415

    from tools.knowledge.terms import TermAnalyzer  # noqa: PLC0415

    morph = pymorphy3.MorphAnalyzer()
    analyzer = TermAnalyzer()
    cache: dict[str, str] = {}

    def lemma(word: str) -> str:
        if word not in cache:
            cache[word] = morph.parse(word)[0].normal_form
        return cache[word]

    return lambda text: [lemma(word) for word in analyzer.words(text)]


def _rank_bm25(articles: Sequence[Article], terms: Callable[[str], list[str]]) -> Search:
    from rank_bm25 import BM25Okapi  # noqa: PLC0415

    ids, texts = _documents(articles)
    model = BM25Okapi([terms(text) or [""] for text in texts])

    def search(query: str, top_k: int) -> list[str]:
        query_terms = terms(query)
        if not query_terms:
            return []
        scores = model.get_scores(query_terms)
        ranked = sorted((i for i in range(len(ids)) if scores[i] > 0), key=lambda i: -scores[i])
        return _best_articles(ids, ranked, top_k)

    return search


def _bm25s(articles: Sequence[Article]) -> Search:
    import bm25s  # noqa: PLC0415

    terms = _stems()
    ids, texts = _documents(articles)
    retriever = bm25s.BM25()
    retriever.index([terms(text) or [""] for text in texts], show_progress=False)

    def search(query: str, top_k: int) -> list[str]:
        query_terms = terms(query)
        if not query_terms:
            return []
        results, scores = retriever.retrieve(
            [query_terms], k=min(len(ids), top_k * 4), show_progress=False
        )
        ranked = [int(i) for i, s in zip(results[0], scores[0], strict=True) if s > 0]
        return _best_articles(ids, ranked, top_k)

    return search


def _tantivy(articles: Sequence[Article], *, fuzzy: bool) -> Search:
    import tantivy  # noqa: PLC0415

    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("russian"))
        .build()
    )
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("article_id", stored=True, tokenizer_name="raw")
    for name in ("title", "tags", "heading", "text"):
        builder.add_text_field(name, tokenizer_name="ru")
    schema = builder.build()
    index = tantivy.Index(schema)
    index.register_tokenizer("ru", analyzer)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for article in articles:
        for passage in article.passages:
            writer.add_document(
                tantivy.Document(
                    article_id=article.article_id,
                    title=article.title,
                    tags=" ".join(article.tags),
                    heading=passage.heading,
                    text=passage.text,
                )
            )
    writer.commit()
    index.reload()
    searcher = index.searcher()
    fields = ["title", "tags", "heading", "text"]
    boosts = {"title": 3.0, "tags": 2.0, "heading": 1.5, "text": 1.0}
    fuzzy_fields = {name: (False, 1, True) for name in fields} if fuzzy else {}

    def search(query: str, top_k: int) -> list[str]:
        words = _WORD.findall(query.lower())
        if not words:
            return []
        parsed = index.parse_query(
            " ".join(words), fields, field_boosts=boosts, fuzzy_fields=fuzzy_fields
        )
        found: list[str] = []
        for _score, address in searcher.search(parsed, top_k * 4).hits:
            article_id = searcher.doc(address)["article_id"][0]
            if article_id not in found:
                found.append(article_id)
        return found[:top_k]

    return search


def _build(engine: str, articles: Sequence[Article]) -> Search:
    builders: dict[str, Callable[[], Search]] = {
        "ours": lambda: _ours(articles, typos=True),
        "ours-no-typos": lambda: _ours(articles, typos=False),
        "rank-bm25+pystemmer": lambda: _rank_bm25(articles, _stems()),
        "bm25s+pystemmer": lambda: _bm25s(articles),
        "rank-bm25+pymorphy3": lambda: _rank_bm25(articles, _lemmas()),
        "tantivy": lambda: _tantivy(articles, fuzzy=False),
        "tantivy-fuzzy": lambda: _tantivy(articles, fuzzy=True),
    }
    return builders[engine]()


def _rss_kib() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def measure(engine: str, article_count: int, rounds: int) -> dict[str, Any]:
    """One engine on the demo set (``article_count`` 0) or on that many articles."""
    articles = (
        list(read_articles(DEMO_HELP_CENTER).articles)
        if article_count == 0
        else generated_articles(article_count)
    )
    queries = labelled_queries()
    before = _rss_kib()
    started = time.perf_counter()
    search = _build(engine, articles)
    build_seconds = time.perf_counter() - started
    memory_kib = _rss_kib() - before
    hits = 0
    reciprocal = 0.0
    answered = 0
    off_topic_found = 0
    timings: list[float] = []
    for round_number in range(rounds):
        for expected, query in queries:
            started = time.perf_counter()
            found = search(query, 3)
            timings.append(time.perf_counter() - started)
            if round_number:
                continue
            if expected is None:
                off_topic_found += bool(found)
                continue
            answered += 1
            if expected in found:
                hits += 1
                reciprocal += 1 / (found.index(expected) + 1)
    timings.sort()
    return {
        "engine": engine,
        "articles": len(articles),
        "recall_at_3": hits / answered,
        "mrr": reciprocal / answered,
        "off_topic_found": off_topic_found,
        "off_topic": len(queries) - answered,
        "p50_ms": timings[len(timings) // 2] * 1000,
        "p99_ms": timings[int(len(timings) * 0.99)] * 1000,
        "build_ms": build_seconds * 1000,
        "memory_mib": memory_kib / 1024,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every engine in its own process and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge")
    parser.add_argument("--site", help="directory with the candidate packages (pip --target)")
    parser.add_argument("--engines", nargs="*", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--sizes", nargs="*", type=int, default=[0, 1000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", nargs=2, metavar=("ENGINE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.rounds)))
        return 0
    environment = dict(os.environ)
    if args.site:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [args.site, os.getcwd()]))
    columns = ["engine", "articles", "recall@3", "MRR", "off-topic found"]
    columns += ["p50 ms", "p99 ms", "build ms", "memory MiB"]
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|")
    for size in args.sizes:
        for engine in args.engines:
            command = [sys.executable, "-m", "bench.knowledge", "--rounds", str(args.rounds)]
            done = subprocess.run(
                [*command, "--one", engine, str(size)],
                capture_output=True,
                text=True,
                env=environment,
                check=False,
            )
            if done.returncode != 0:
                reason = (done.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"| {engine} | {size or 'demo'} | {reason} |||||||")
                continue
            row = json.loads(done.stdout)
            print(
                f"| {row['engine']} | {row['articles']} | {row['recall_at_3']:.3f} "
                f"| {row['mrr']:.3f} | {row['off_topic_found']}/{row['off_topic']} "
                f"| {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['build_ms']:.0f} "
                f"| {row['memory_mib']:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
