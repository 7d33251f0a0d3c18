"""Which language a conversation is in: the customer's words, the stored one, Telegram's."""

from bot.language.detect import LanguagePolicy

POLICY = LanguagePolicy(languages=("ru", "en"), default="ru")


def decide(
    text: str | None,
    *,
    stored: str | None = None,
    chosen: bool = False,
    code: str | None = None,
    policy: LanguagePolicy = POLICY,
) -> str:
    return policy.decide(stored=stored, chosen=chosen, text=text, telegram_code=code)


def test_english_telegram_writing_english_gets_english() -> None:
    decided = POLICY.decide(
        stored=None, chosen=False, text="Where is my order?", telegram_code="en"
    )
    assert decided == "en"


def test_english_telegram_writing_russian_gets_russian() -> None:
    decided = decide("Где мой заказ?", stored=None, chosen=False, code="en")
    assert decided == "ru"


def test_a_message_without_words_keeps_the_stored_language() -> None:
    assert decide("8042", stored="en", chosen=False, code="ru") == "en"
    assert decide("/start", stored="en", chosen=False, code="ru") == "en"


def test_a_new_conversation_without_words_follows_telegram_then_the_default() -> None:
    assert decide("/start", stored=None, chosen=False, code="en-US") == "en"
    assert decide("/start", stored=None, chosen=False, code="de") == "ru"
    assert decide(None, stored=None, chosen=False, code=None) == "ru"


def test_writing_in_another_enabled_language_changes_it() -> None:
    assert decide("А где заказ?", stored="en", chosen=False, code="en") == "ru"


def test_a_chosen_language_is_kept_whatever_the_customer_writes() -> None:
    assert decide("Где мой заказ?", stored="en", chosen=True, code="ru") == "en"


def test_a_script_shared_by_two_enabled_languages_decides_nothing() -> None:
    policy = LanguagePolicy(languages=("ru", "uk", "en"), default="ru")
    assert decide("Де моє замовлення?", stored="uk", policy=policy) == "uk"
    assert policy.of_text("Where is it?") == "en"


def test_only_enabled_languages_are_decided() -> None:
    russian_only = LanguagePolicy(languages=("ru",), default="ru")
    assert decide("Hello there", code="en", policy=russian_only) == "ru"
