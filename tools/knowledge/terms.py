"""Words to index terms: lower case, ``ё`` as ``е``, stop words out, Snowball stems.

Russian words are stemmed with the Snowball Russian stemmer and Latin words
with the English one (PyStemmer, the Snowball project's own binding), so
«вернуть товары» and «Возврат товара» share «товар», and «refunds» finds a
``refund`` tag. Numbers stay as they are. A word is stemmed by the stemmer of
its script whatever the article's language: a Latin brand name in a Russian
article («BrewMaster») is English to the stemmer, which is what it would do
with the same word in an English article. :func:`query_language` tells which
language a question is written in (its script).
"""

import re
import threading

import Stemmer

_WORD = re.compile(r"[a-zа-яё0-9]+")
_CYRILLIC = re.compile(r"[а-я]")
_CYRILLIC_LETTER = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN_LETTER = re.compile(r"[a-z]", re.IGNORECASE)

# Words that say nothing about which article answers: customers write them in every
# question. Kept short on purpose; BM25's idf already discounts what is common. The
# last two Russian lines frame a question («какие условия возврата», «сколько дней
# обычно идёт доставка»): the topic is the other word. Left in, such a word is rare in
# a small help center, so its idf outweighs the topic's: the one article that uses it
# in passing («подскажет ... условия возврата» in the contacts) wins, or no article
# covers enough of the query.
_STOP_WORDS_TEXT = """
    а без бы был была были было в вам вас во вот все всё где да для до его ее её если есть
    же за и из или им их к как ко когда кто ли либо мне меня мой мы на над не нет ни но ну
    о об от по под при про с со так также то тоже у уже чем что чтобы это эта этот я
    вы ваш ваша ваше ваши мою моя мои можно нужно надо хочу хотел хотела подскажите
    пожалуйста здравствуйте добрый день привет скажите сколько какой какая какие какое каких
    какую почему зачем куда откуда чего себе свой своя свои свое своё еще ещё очень просто
    сейчас будет буду могу можете может ли уже
    обычно примерно вообще условия условие условиях правила правило идет идут долго
    узнать интересует расскажите подробнее вопрос случае делать сделать
    a an and are can do does for how i in is it my of on or the to what when where with you
    about am any as at be been by could did didn don doesn from get got has have hello hey hi
    if im isn just me much many need please should so some t s tell thanks there this that
    those these us was we were which who why will would want know your yours our
    usually myself yourself ourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

# Cities a customer names in a question about delivery («сколько идёт доставка в Казань»).
# The articles say «в других городах» / "in other cities" rather than list them, so a city
# the index does not know stands for that word (:meth:`TermAnalyzer.place_term`) instead of
# being an unknown word that outweighs the rest of the question, or a typo of another word
# (Kazan is not «касанием»). One that an article names (Moscow) is matched as itself.
_RUSSIAN_PLACES_TEXT = """
    москва петербург питер спб казань новосибирск екатеринбург новгород самара омск
    челябинск ростов уфа красноярск пермь воронеж волгоград краснодар саратов тюмень
    тольятти ижевск барнаул ульяновск иркутск хабаровск ярославль владивосток махачкала
    томск оренбург кемерово новокузнецк рязань астрахань пенза липецк киров чебоксары
    калининград тула курск ставрополь сочи тверь магнитогорск иваново брянск белгород
    сургут архангельск смоленск калуга чита мурманск вологда якутск петрозаводск
    сыктывкар новороссийск кострома псков севастополь симферополь
"""
_ENGLISH_PLACES_TEXT = """
    moscow petersburg kazan novosibirsk yekaterinburg ekaterinburg novgorod samara omsk
    chelyabinsk rostov ufa krasnoyarsk perm voronezh volgograd krasnodar saratov tyumen
    irkutsk khabarovsk yaroslavl vladivostok tomsk kaliningrad sochi murmansk
"""
# The articles' own word for any city, per script.
_RUSSIAN_CITY = "город"
_ENGLISH_CITY = "city"


def query_language(text: str) -> str | None:
    """``"ru"`` for text mostly in Cyrillic letters, ``"en"`` for Latin, ``None`` without letters.

    By letters, not words: «где мой order» is Russian, «refund for заказ 8041» English;
    a tie (as many letters of each) goes to Russian, the help center's default.
    """
    cyrillic = len(_CYRILLIC_LETTER.findall(text))
    latin = len(_LATIN_LETTER.findall(text))
    if not cyrillic and not latin:
        return None
    return "en" if latin > cyrillic else "ru"


class TermAnalyzer:
    """Turns text into index terms; one instance may be shared by threads.

    A Snowball stemmer keeps state and must not run in two threads at once, so
    calls are serialised by a lock (a stem costs about a microsecond).
    """

    def __init__(self) -> None:
        self._russian = Stemmer.Stemmer("russian")
        self._english = Stemmer.Stemmer("english")
        self._lock = threading.Lock()
        places = {
            self.stem(place): self.stem(_RUSSIAN_CITY) for place in _RUSSIAN_PLACES_TEXT.split()
        }
        places.update(
            (self.stem(place), self.stem(_ENGLISH_CITY)) for place in _ENGLISH_PLACES_TEXT.split()
        )
        self._places = places

    def place_term(self, term: str) -> str | None:
        """The index term of «город» (or "city") when ``term`` is a city's, else ``None``."""
        return self._places.get(term)

    def words(self, text: str) -> list[str]:
        """The words of ``text`` in order, normalised but not stemmed, stop words out."""
        return [
            word for word in _WORD.findall(text.lower().replace("ё", "е")) if word not in STOP_WORDS
        ]

    def stem(self, word: str) -> str:
        """The index term of one normalised word."""
        if word.isdigit():
            return word
        with self._lock:
            if _CYRILLIC.search(word):
                return str(self._russian.stemWord(word))
            return str(self._english.stemWord(word))

    def terms(self, text: str) -> list[str]:
        """The index terms of ``text`` in order (repeats kept: they are term frequencies)."""
        return [self.stem(word) for word in self.words(text)]
