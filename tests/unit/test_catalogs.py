"""The catalogs: every customer text in every language, with the same placeholders."""

from pathlib import Path
from string import Formatter

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po

from bot import customer_texts
from bot.app import open_catalogs
from bot.language.catalogs import DEFAULT_LOCALES_DIR, CatalogError, Catalogs
from bot.ops.startup import StartupError
from bot.settings import SettingsError
from bot.testing.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
# Where scripts/i18n extracts from (keep in step with its SOURCES).
SOURCES = (
    "bot/customer_texts.py",
    "bot/staff_texts.py",
    "tools/order_actions.py",
    "tools/support_hours.py",
)


def _marked() -> set[str]:
    """Every message marked ``N_(...)`` in the sources, as pybabel extracts them."""
    found: set[str] = set()
    for source in SOURCES:
        for _line, message, _comments, _context in extract_from_file(
            "python", str(ROOT / source), keywords={"N_": None}
        ):
            assert isinstance(message, str)
            found.add(message)
    return found


def _catalogs() -> dict[str, Catalog]:
    found = {}
    for path in sorted(DEFAULT_LOCALES_DIR.glob("*/LC_MESSAGES/messages.po")):
        with path.open("rb") as po_file:
            found[path.parent.parent.name] = read_po(po_file)
    return found


def _placeholders(text: str) -> set[str]:
    return {name for _literal, name, _spec, _conv in Formatter().parse(text) if name is not None}


def test_ru_and_en_catalogs_are_shipped() -> None:
    assert {"ru", "en"} <= set(_catalogs())


@pytest.mark.parametrize("language", sorted(_catalogs()))
def test_every_marked_message_is_translated_with_the_same_placeholders(language: str) -> None:
    catalog = _catalogs()[language]
    marked = _marked()
    assert marked, "no message is marked N_ in the sources"
    missing = sorted(message for message in marked if catalog.get(message) is None)
    assert missing == [], f"{language}: run scripts/i18n update and translate {missing}"
    for message in marked:
        entry = catalog.get(message)
        assert entry is not None
        assert isinstance(entry.string, str)
        assert entry.string.strip(), f"{language}: {message!r} is not translated"
        assert not entry.fuzzy, f"{language}: {message!r} is fuzzy"
        assert _placeholders(entry.string) == _placeholders(message), (
            f"{language}: placeholders of {message!r} differ"
        )


def test_the_russian_catalog_shows_the_source_texts_exactly() -> None:
    ru = Catalogs().texts("ru")
    for message in _marked():
        assert ru.gettext(message) == message


def test_english_texts_come_from_the_catalog() -> None:
    en = Catalogs().texts("en")
    assert en.gettext(customer_texts.CONFIRM_LABEL) == "Confirm"
    assert en.name == "English"
    assert Catalogs().texts("en").name_ru == "английский"
    failure = customer_texts.unexpected_failure_message("ABC123", en.gettext)
    assert failure.startswith("Something went wrong.")
    assert "Incident code: ABC123." in failure


def test_a_language_without_a_catalog_is_a_settings_problem_of_one_line() -> None:
    with pytest.raises(SettingsError) as raised:
        make_settings(LANGUAGES="ru,en,kk", DEFAULT_LANGUAGE="ru")
    assert len(raised.value.problems) == 1
    assert raised.value.problems[0].startswith("LANGUAGES: no catalog for kk (catalogs: en, ru;")


def test_catalogs_opened_without_one_stop_the_start_with_one_line() -> None:
    settings = make_settings(LANGUAGES="ru,en", DEFAULT_LANGUAGE="ru")
    with pytest.raises(StartupError) as raised:
        open_catalogs(
            settings.model_copy(
                update={"language": settings.language.model_copy(update={"languages": "ru,en,kk"})}
            )
        )
    message = str(raised.value)
    assert "\n" not in message
    assert "no catalog for kk" in message
    assert isinstance(raised.value.__cause__, CatalogError)


def test_the_default_language_must_be_enabled() -> None:
    with pytest.raises(SettingsError) as raised:
        make_settings(LANGUAGES="ru", DEFAULT_LANGUAGE="en")
    assert any("DEFAULT_LANGUAGE" in line for line in raised.value.problems)


def test_languages_are_codes() -> None:
    with pytest.raises(SettingsError) as raised:
        make_settings(LANGUAGES="ru,en-GB")
    assert any("LANGUAGES" in line for line in raised.value.problems)
    settings = make_settings(LANGUAGES=" RU , en ,ru")
    assert settings.language.codes == ("ru", "en")
