"""The search index over help-center passages: BM25F over Snowball stems, with typo tolerance.

Each passage is scored with BM25F (Robertson and Zaragoza) over four fields:
the article's title and tags, the passage's heading and its text, the title
weighing most. An article is represented by its best passage, so the results
are distinct articles. A query word the index does not know is matched to
known terms one edit away (a typo: «доставкa», «вазврат») or that it begins
(«верн» → «вернут»), at a lower weight.

Each language has its own index (its own vocabulary and idf: an English word
is rare among Russian articles, which says nothing about English ones). A
search prefers one language, the one asked for or else the question's own
(its script), and falls back to the others when the preferred one finds
nothing (or covers less of the question than another does). Translations of
one article share its id, so the results name each topic once, in the
preferred language when the topic has it.

A hit must cover enough of the query (the idf-weighted share of its terms
that the passage contains): a question about the weather that shares one word
with an article finds nothing rather than a wrong article. The choice of this
engine and its constants is measured in ``bench/knowledge.py`` (``bench/README.md``).
"""

import math
import re
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tools.knowledge.articles import DEFAULT_LANGUAGE, LANGUAGES, Article
from tools.knowledge.terms import TermAnalyzer, query_language

# BM25F constants: the usual k1 and b; title, tags and headings are short, so only the
# passage text is normalised by its length.
K1 = 1.2
TEXT_B = 0.75
FIELD_WEIGHTS = {"title": 2.0, "tags": 2.0, "heading": 1.5, "text": 1.0}
# A query word matched only by a typo or prefix counts less than an exact one.
FUZZY_WEIGHT = 0.6
# Shortest query term tried for typos and prefixes: shorter ones match too much.
FUZZY_MIN_LENGTH = 4
# Shortest query term tried for a typo (one edit away): a short stem one letter from another
# is as often a different word as a misspelt one («казан», Kazan, is not «касан», a touch).
TYPO_MIN_LENGTH = 6
# Least idf-weighted share of the query a hit must contain (bench/README.md).
MIN_COVERAGE = 0.3
# How strongly the covered share of the query scales the score (0: not at all).
COORDINATION = 1.0
SNIPPET_CHARS = 600
# The weight of a query word no article contains, as a share of the highest idf.
UNKNOWN_WEIGHT = 1.0

_BLANK_LINES = re.compile(r"\n\s*\n+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """One result: the best passage of an article, with its score and query coverage.

    ``lang`` is the article's language: the preferred one, or another when the topic
    has no article in the preferred language.
    """

    article_id: str
    title: str
    url: str | None
    heading: str
    snippet: str
    score: float
    coverage: float
    lang: str


@dataclass(frozen=True, slots=True)
class _Entry:
    article: Article
    heading: str
    text: str
    # The passage's place in its article: a translation's passage at the same place.
    position: int


_FIELDS = tuple(FIELD_WEIGHTS)
_TEXT = _FIELDS.index("text")
# Term frequencies per field packed in one integer, a byte each (capped at 255).
_TF_CAP = 255


@dataclass(slots=True)
class _Builder:
    analyzer: TermAnalyzer
    entries: list[_Entry] = field(default_factory=list)
    # term -> (passage numbers, packed field frequencies): flat arrays keep the peak low.
    frequencies: dict[str, tuple["array[int]", "array[int]"]] = field(default_factory=dict)
    text_lengths: "array[int]" = field(default_factory=lambda: array("I"))
    document_frequency: Counter[str] = field(default_factory=Counter)

    def add(self, article: Article) -> None:
        title = self.analyzer.terms(article.title)
        tags = self.analyzer.terms(" ".join(article.tags))
        seen: set[str] = set()
        for position, passage in enumerate(article.passages):
            number = len(self.entries)
            self.entries.append(_Entry(article, passage.heading, passage.text, position))
            text = self.analyzer.terms(passage.text)
            self.text_lengths.append(len(text))
            counts: dict[str, list[int]] = {}
            fields = (title, tags, self.analyzer.terms(passage.heading), text)
            for field_number, terms in enumerate(fields):
                for term in terms:
                    counts.setdefault(term, [0, 0, 0, 0])[field_number] += 1
            for term, tfs in counts.items():
                numbers, packed = self.frequencies.setdefault(term, (array("I"), array("I")))
                numbers.append(number)
                packed.append(sum(min(tf, _TF_CAP) << (8 * i) for i, tf in enumerate(tfs)))
            seen.update(counts)
        self.document_frequency.update(seen)


class _LanguageIndex:
    """The index of one language's articles."""

    def __init__(
        self,
        *,
        analyzer: TermAnalyzer,
        entries: Sequence[_Entry],
        postings: dict[str, tuple["array[int]", "array[float]"]],
        idf: dict[str, float],
        article_count: int,
    ) -> None:
        self._analyzer = analyzer
        self._entries = tuple(entries)
        self._postings = postings
        self._idf = idf
        self._unknown_idf = UNKNOWN_WEIGHT * math.log(1 + (article_count + 0.5) / 0.5)
        self._vocabulary = sorted(postings)
        self._neighbours = _deletion_neighbourhoods(self._vocabulary)
        self.article_count = article_count
        self.articles = {entry.article.article_id: entry.article for entry in self._entries}

    @classmethod
    def build(cls, articles: Iterable[Article], analyzer: TermAnalyzer) -> "_LanguageIndex":
        """Index ``articles`` (their ids are assumed distinct)."""
        builder = _Builder(analyzer)
        count = 0
        for article in articles:
            builder.add(article)
            count += 1
        average_text = max(1.0, sum(builder.text_lengths) / max(1, len(builder.text_lengths)))
        field_weights = [FIELD_WEIGHTS[name] for name in _FIELDS]
        # Two flat arrays per term (passages, saturated weights): a tenth of a dict's memory.
        postings: dict[str, tuple[array[int], array[float]]] = {}
        for term, (numbers, packed) in builder.frequencies.items():
            weights: array[float] = array("d")
            for number, tfs in zip(numbers, packed, strict=True):
                length_norm = 1 - TEXT_B + TEXT_B * builder.text_lengths[number] / average_text
                pseudo = 0.0
                for i, weight in enumerate(field_weights):
                    tf = (tfs >> (8 * i)) & _TF_CAP
                    if tf:
                        pseudo += weight * tf / (length_norm if i == _TEXT else 1.0)
                weights.append(pseudo * (K1 + 1) / (K1 + pseudo))
            postings[term] = (numbers, weights)
        # idf over articles, not passages: how an author splits an article changes nothing.
        idf = {
            term: math.log(1 + (count - df + 0.5) / (df + 0.5))
            for term, df in builder.document_frequency.items()
        }
        return cls(
            analyzer=builder.analyzer,
            entries=builder.entries,
            postings=postings,
            idf=idf,
            article_count=count,
        )

    @property
    def passage_count(self) -> int:
        """How many passages the index holds."""
        return len(self._entries)

    def search(self, query: str, top_k: int) -> list[tuple[_Entry, float, float]]:
        """The best ``top_k`` passages of distinct articles: (passage, score, coverage)."""
        words = list(dict.fromkeys(self._analyzer.words(query)))
        if not words or top_k <= 0:
            return []
        scores: dict[int, float] = defaultdict(float)
        covered: dict[int, float] = defaultdict(float)
        # Passages reached by a word of the question's topic, not only by a city's name.
        topical: set[int] = set()
        total_weight = 0.0
        for word in words:
            term = self._analyzer.stem(word)
            matches = self._matches(term)
            if not matches and term.isdigit():
                # A number no article has is an order number or a sum, not the topic: it
                # neither finds a passage nor makes the rest of the question count less.
                continue
            # A city, named by an article or not, is where, never what: no topic of its own.
            is_place = self._analyzer.place_term(term) is not None
            best_idf = max((self._idf[t] for t, _ in matches), default=self._unknown_idf)
            total_weight += best_idf
            reached: dict[int, float] = {}
            for candidate, weight in matches:
                idf = self._idf[candidate] * weight
                numbers, weights = self._postings[candidate]
                for number, saturated in zip(numbers, weights, strict=True):
                    reached[number] = max(reached.get(number, 0.0), idf * saturated)
            for number, value in reached.items():
                scores[number] += value
                covered[number] += best_idf
            if not is_place:
                topical.update(reached)
        best: dict[str, tuple[float, int]] = {}
        for number, raw in scores.items():
            coverage = covered[number] / total_weight
            if coverage < MIN_COVERAGE or number not in topical:
                # «погода в Казани» shares only the city with the delivery articles.
                continue
            # Lucene's old coordination factor: a passage with more of the query ranks higher.
            score = raw * coverage**COORDINATION
            article_id = self._entries[number].article.article_id
            if article_id not in best or score > best[article_id][0]:
                best[article_id] = (score, number)
        ranked = sorted(best.values(), key=lambda item: (-item[0], item[1]))[:top_k]
        return [
            (self._entries[number], score, covered[number] / total_weight)
            for score, number in ranked
        ]

    def _matches(self, term: str) -> list[tuple[str, float]]:
        """Index terms standing for ``term``: itself, or typo and prefix neighbours."""
        if term in self._postings:
            return [(term, 1.0)]
        place = self._analyzer.place_term(term)
        if place is not None:
            # A city no article names: what the articles say of cities, never a look-alike.
            return [(place, FUZZY_WEIGHT)] if place in self._postings else []
        if len(term) < FUZZY_MIN_LENGTH or term.isdigit():
            # Numbers are exact: 4000 is not 400.
            return []
        found: set[str] = set()
        if len(term) >= TYPO_MIN_LENGTH:
            found.update(
                candidate
                for key in (term, *_deletions(term))
                for candidate in self._neighbours.get(key, ())
                if _within_one_edit(term, candidate)
            )
        # A known stem that begins the word: «бракованный» is about «брак».
        found.update(
            term[:end] for end in range(FUZZY_MIN_LENGTH, len(term)) if term[:end] in self._postings
        )
        start = bisect_left(self._vocabulary, term)
        for candidate in self._vocabulary[start:]:
            if not candidate.startswith(term):
                break
            found.add(candidate)
        return [(candidate, FUZZY_WEIGHT) for candidate in sorted(found)]


class SearchIndex:
    """An immutable index of articles; build it with :meth:`build`, query it with :meth:`search`.

    Searching only reads, so one index serves any number of concurrent turns;
    a changed directory gets a new index, swapped in whole.
    """

    def __init__(self, indexes: Mapping[str, _LanguageIndex]) -> None:
        self._indexes = dict(indexes)
        self.article_count = sum(index.article_count for index in self._indexes.values())
        self.passage_count = sum(index.passage_count for index in self._indexes.values())
        # What the model may cite: every indexed article's URL (citations are checked).
        self.article_urls = frozenset(
            article.url
            for index in self._indexes.values()
            for article in index.articles.values()
            if article.url is not None
        )

    @classmethod
    def build(
        cls, articles: Iterable[Article], analyzer: TermAnalyzer | None = None
    ) -> "SearchIndex":
        """Index ``articles``, each language apart (ids are assumed distinct in a language)."""
        by_language: dict[str, list[Article]] = defaultdict(list)
        for article in articles:
            by_language[article.lang].append(article)
        shared = analyzer or TermAnalyzer()
        return cls(
            {
                language: _LanguageIndex.build(found, shared)
                for language, found in by_language.items()
            }
        )

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages that have articles."""
        return tuple(sorted(self._indexes))

    def search(self, query: str, top_k: int = 3, *, language: str | None = None) -> list[Hit]:
        """The best ``top_k`` articles for ``query``, best first; ``[]`` if nothing is relevant.

        ``language`` is the customer's (``"en"``, ``"en-US"``); without it, or when
        the help center does not know it, the question's own language counts. That
        language's articles are searched first; the others only when it finds nothing
        or covers only part of the question, and they win only by covering more.
        """
        preferred = preferred_language(query, language)
        order = (preferred, *(other for other in LANGUAGES if other != preferred))
        best: list[tuple[_Entry, float, float]] = []
        for searched in order:
            index = self._indexes.get(searched)
            if index is None:
                continue
            found = index.search(query, top_k)
            # Another language only when it covers more of the question: a partial match
            # in the customer's language («headphones» in a warranty article) must not
            # hide the article that answers in the other one.
            if found and (not best or found[0][2] > best[0][2]):
                best = found
            if best and best[0][2] >= 1.0:
                break
        return [self._hit(entry, score, coverage, preferred) for entry, score, coverage in best]

    def _hit(self, entry: _Entry, score: float, coverage: float, preferred: str) -> Hit:
        article, heading, text = entry.article, entry.heading, entry.text
        translated = self._translation(article.article_id, preferred)
        if translated is not None and translated is not article:
            # Found in another language, written in the customer's too: theirs. Translations
            # keep the original's headings, so the passage at the same place says the same.
            same_place = len(translated.passages) == len(article.passages)
            passage = translated.passages[entry.position if same_place else 0]
            article, heading, text = translated, passage.heading, passage.text
        return Hit(
            article_id=article.article_id,
            title=article.title,
            url=article.url,
            heading=heading,
            snippet=snippet(heading, text),
            score=round(score, 3),
            coverage=round(coverage, 3),
            lang=article.lang,
        )

    def _translation(self, article_id: str, language: str) -> Article | None:
        index = self._indexes.get(language)
        return None if index is None else index.articles.get(article_id)


def preferred_language(query: str, language: str | None = None) -> str:
    """The language a search prefers: ``language`` if the help center knows it, else the query's.

    ``language`` may be a Telegram ``language_code`` (``"en"``, ``"pt-br"``): its
    first part counts. A query without letters prefers the default language.
    """
    if language is not None:
        base = language.split("-", 1)[0].strip().lower()
        if base in LANGUAGES:
            return base
    return query_language(query) or DEFAULT_LANGUAGE


def snippet(heading: str, text: str, limit: int = SNIPPET_CHARS) -> str:
    """The passage as the model reads it: heading and text, cut at a word under ``limit``."""
    body = _BLANK_LINES.sub("\n", text.strip())
    full = f"{heading}\n{body}" if heading else body
    if len(full) <= limit:
        return full
    cut = full[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def _deletions(term: str) -> set[str]:
    return {term[:i] + term[i + 1 :] for i in range(len(term))}


def _deletion_neighbourhoods(vocabulary: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each term and each of its one-letter deletions, mapped to the terms that give it.

    Two words one edit apart (a letter replaced, added, dropped or two swapped)
    share a key here, so a typo's candidates are a few dictionary look-ups.
    """
    table: dict[str, list[str]] = defaultdict(list)
    for term in vocabulary:
        if len(term) < FUZZY_MIN_LENGTH - 1:
            continue
        table[term].append(term)
        for key in _deletions(term):
            table[key].append(term)
    return {key: tuple(terms) for key, terms in table.items()}


def _within_one_edit(first: str, second: str) -> bool:
    """Whether the two differ by one replacement, insertion, deletion or adjacent swap."""
    if first == second:
        return True
    if abs(len(first) - len(second)) > 1:
        return False
    if len(first) == len(second):
        diffs = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b]
        if len(diffs) == 1:
            return True
        return (
            len(diffs) == 2
            and diffs[1] == diffs[0] + 1
            and first[diffs[0]] == second[diffs[1]]
            and first[diffs[1]] == second[diffs[0]]
        )
    shorter, longer = sorted((first, second), key=len)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))
