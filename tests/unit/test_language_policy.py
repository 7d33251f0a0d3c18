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


MIXED = ("Где мой заказ с AirPods Pro Max?", "Не работает Samsung Galaxy Watch")


def test_a_message_in_both_scripts_names_no_language() -> None:
    for text in MIXED:
        assert POLICY.of_text(text) is None


def test_a_russian_customer_naming_an_english_product_stays_russian() -> None:
    for text in MIXED:
        assert decide(text, stored="ru") == "ru"
        # A new conversation: Telegram's language decides, else the default.
        assert decide(text, code="ru") == "ru"
        assert decide(text) == "ru"


def test_an_english_customer_naming_a_russian_word_stays_english() -> None:
    assert decide("Please deliver to Казань, Баумана 5", stored="en", code="ru") == "en"


def test_a_message_clearly_in_one_language_still_switches() -> None:
    assert decide("Where is my order 8042?", stored="ru", code="ru") == "en"
    assert decide("Где мой заказ 8042?", stored="en", code="en") == "ru"
    # Links, mentions and commands are nobody's words: the rest is one language.
    assert decide("Где заказ? https://shop.example/orders/8042", stored="en") == "ru"


def test_a_word_written_in_both_scripts_counts_for_its_main_one() -> None:
    assert POLICY.of_text("Не работает Wi-Fi-роутер") == "ru"


def test_a_language_code_with_a_region_names_its_language() -> None:
    assert POLICY.code_of("en-US") == "en"
    assert POLICY.code_of("EN_gb") == "en"
    assert POLICY.code_of(" ru ") == "ru"
    assert POLICY.code_of("de-DE") is None
    assert POLICY.code_of("") is None
    assert POLICY.code_of("english") is None


def test_a_commands_arguments_are_not_the_customers_words() -> None:
    # «/language de-DE» from a Russian conversation: refused in Russian, not in English.
    assert decide("/language de-DE", stored="ru", code="ru") == "ru"
    assert decide("/start promo_spring", code="ru") == "ru"
