"""Every text the customer sees from the bot itself (not the model's answers), in Russian.

Russian is the source language of the catalogs: a text wrapped in :func:`N_` is a
msgid that ``scripts/i18n`` extracts into ``bot/locales/<lang>/LC_MESSAGES/messages.po``,
and the front ends show it through the conversation's
:class:`~bot.language.catalogs.Texts` (``texts.gettext(GREETING)``), the terminal
console's own texts included.

One module so the texts can be reviewed together and a second language added in
one place: Telegram's greeting, help and notices, failure texts, the handoff's
messages, the confirmation cards' buttons and verdicts, the drafts' labels while
tools run, and what the terminal console prints around the answers.

What stays elsewhere, on purpose: a write tool's own card and outcome texts (the
order's number, items and address in a sentence) live in its module under
``tools/``, which sits below ``bot/`` and defines a tool in one file; texts the
model reads (tool descriptions, history notes, prompts) are model input, not
customer text; texts for support staff in their topics live in ``bot/handoff/``.

Failure texts never contain exception text, class names or traces: only a kind
message chosen by the failure's ``kind`` and the incident code (the turn id)
that support staff look up in the audit stream.
"""

from collections.abc import Callable
from typing import Final

from bot.chat_errors import ChatServiceError
from bot.language.texts import Texts
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
from tools.human_agent import REQUEST_HUMAN_AGENT_TOOL_NAME
from tools.order_actions import (
    CANCEL_ORDER_TOOL_NAME,
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
    REQUEST_RETURN_TOOL_NAME,
)
from tools.order_status import GET_ORDER_STATUS_TOOL_NAME
from tools.product_search import SEARCH_PRODUCTS_TOOL_NAME
from tools.return_policy import GET_RETURN_POLICY_TOOL_NAME
from tools.support_hours import GET_SUPPORT_HOURS_TOOL_NAME
from turn import TurnOutcome


def N_(message: str) -> str:
    """Marks ``message`` for the catalogs (pybabel's ``-k N_``); translated where shown."""
    return message


Translate = Callable[[str], str]
"""A catalog's ``gettext`` (:meth:`bot.language.catalogs.Texts.gettext`)."""


def _as_is(message: str) -> str:
    return message


def shown(texts: Texts | None, message: str) -> str:
    """``message`` as the customer reads it: in ``texts``' language (``None``: the source's)."""
    return texts.gettext(message) if texts is not None else message


def gettext_of(texts: Texts | None) -> Translate:
    """``texts``' ``gettext``; the source texts as they are without a catalog."""
    return texts.gettext if texts is not None else _as_is


GREETING = N_(
    "Здравствуйте! Я бот поддержки магазина.\n\n"
    "Я могу:\n"
    "• подсказать статус заказа по его номеру;\n"
    "• найти товар в каталоге и назвать цену;\n"
    "• рассказать об условиях возврата;\n"
    "• подсказать часы работы поддержки.\n\n"
    "Просто напишите свой вопрос, например: «Где мой заказ 1234?»"
)

HELP = N_(
    "Команды:\n"
    "/start — что умеет бот\n"
    "/help — эта справка\n"
    "/new — начать новый разговор (бот забудет предыдущую переписку)\n"
    "/operator — позвать сотрудника поддержки\n"
    "/language — язык бота (Language)\n\n"
    "Вопросы пишите обычным текстом."
)

NEW_CONVERSATION = N_("Начинаем новый разговор. Предыдущую переписку я больше не учитываю.")

NON_TEXT = N_("Пока я понимаю только текстовые сообщения. Пожалуйста, напишите вопрос текстом.")

LANGUAGE_CHANGED = N_("Хорошо, дальше я пишу по-русски.")
"""``/language ru``: the confirmation, in the language chosen (each catalog says its own)."""
LANGUAGE_CHOICES = N_("Выберите язык бота:\n{choices}")
"""``/language`` alone: one ``/language <code> — <name>`` line per enabled language."""
LANGUAGE_UNKNOWN = N_("Такого языка у бота нет. Выберите один из этих:\n{choices}")
"""``/language xx`` for a language that is not enabled."""

# What the bot answers to a message it does not read (``bot/telegram/handlers/other.py``):
# one short line fitting what was sent, never a failed turn.
STICKER = N_("Спасибо! 🙂 Напишите, пожалуйста, текстом, чем я могу помочь.")
LOCATION = N_(
    "Геоточку я не обрабатываю. Если вопрос о доставке, напишите адрес и номер заказа текстом."
)
CONTACT = N_("Контакты я не сохраняю. Напишите, пожалуйста, ваш вопрос текстом.")
POLL = N_("Опросы я не читаю. Напишите, пожалуйста, ваш вопрос текстом.")
DOCUMENT = N_(
    "Файлы я не открываю. Опишите, пожалуйста, вопрос текстом: номер заказа и что случилось."
)
VIDEO = N_("Видео я не смотрю. Опишите, пожалуйста, словами, что случилось, и номер заказа.")
FORWARDED_POST = N_(
    "Вижу пересланный пост из канала, но читать его я не буду. "
    "Напишите, пожалуйста, что вы хотите узнать."
)
# Voice messages and photos the bot could not take (``bot/telegram/handlers/voice.py``,
# ``photo.py``): a short kind request to write instead; no turn.
VOICE_OFFLINE = N_(
    "В демо-режиме голосовые сообщения не распознаются. Пожалуйста, напишите текстом."
)
VOICE_TOO_LONG = N_(
    "Это голосовое слишком длинное для меня. Пожалуйста, запишите покороче "
    "или напишите вопрос текстом."
)
VOICE_TOO_LARGE = N_(
    "Этот файл слишком большой для меня. Пожалуйста, запишите короткое голосовое "
    "или напишите вопрос текстом."
)
"""A recording larger than its length could make it, or over the download limit: no turn."""
VOICE_TRANSCRIPT_TOO_LONG = N_(
    "В этом голосовом слишком много слов для одного сообщения. Пожалуйста, запишите "
    "покороче или напишите вопрос текстом."
)
"""A voice message heard, but its words are over ``MESSAGE_MAX_CHARS``: no turn."""
VOICE_NOT_HEARD = N_(
    "Не получилось разобрать голосовое сообщение. Пожалуйста, напишите вопрос текстом."
)
PHOTO = N_("Фотографии я не смотрю. Пожалуйста, опишите словами, что на фото, и номер заказа.")
PHOTO_OPERATOR = N_(
    "Фотографии я не смотрю. Опишите, пожалуйста, словами, что на фото, и номер заказа. "
    "Если фото нужно показать сотруднику поддержки, отправьте /operator."
)
PHOTO_CAPTION_TOO_LONG = N_(
    "Подпись к фото слишком длинная. Пожалуйста, пришлите фото с короткой подписью, "
    "а подробности напишите отдельным сообщением."
)
"""A photo whose caption is over ``MESSAGE_MAX_CHARS`` (with ``VISION=on``): no turn."""
PHOTO_TOO_LARGE = N_(
    "Это изображение слишком большое для меня. Пожалуйста, пришлите его обычным фото "
    "или опишите вопрос текстом."
)
# Read by the model (not the customer) after an album's images, in the conversation's
# language, when the turn's total (``IMAGE_TURN_MAX_BYTES``) left some out or took them smaller:
# the model's answer says so (``bot/telegram/handlers/photo.py``).
IMAGES_LEFT_OUT = N_(
    "(Вы видите {shown} из {sent} изображений, которые прислал покупатель: остальные "
    "не поместились в одно сообщение. Скажите покупателю об этом и попросите прислать "
    "остальные отдельным сообщением.)"
)
IMAGES_REDUCED = N_(
    "({reduced} из этих изображений показаны уменьшенными, чтобы все поместились в одно "
    "сообщение. Если мелкие детали не видны, попросите покупателя прислать нужное фото "
    "отдельно.)"
)
PHOTO_NOT_SEEN = N_(
    "Не получилось открыть это изображение. Пожалуйста, пришлите его ещё раз "
    "или опишите вопрос текстом."
)

RATE_LIMITED = N_(
    "Вы пишете слишком часто. Пожалуйста, подождите несколько секунд и отправьте сообщение ещё раз."
)

DAILY_LIMIT = N_(
    "На сегодня лимит вопросов исчерпан. Пожалуйста, напишите завтра, мы обязательно ответим."
)

QUEUE_FULL = N_(
    "Я ещё не ответил на ваши предыдущие сообщения. Пожалуйста, дождитесь ответа "
    "и потом напишите снова."
)

UNREADABLE = N_(
    "Не получилось прочитать это сообщение. Пожалуйста, отправьте его ещё раз обычным текстом."
)

# Descriptions of the commands for the menu (``set_my_commands``).
COMMANDS: tuple[tuple[str, str], ...] = (
    ("start", N_("Что умеет бот")),
    ("help", N_("Справка по командам")),
    ("new", N_("Начать новый разговор")),
)
LINK_COMMAND: tuple[str, str] = ("link", N_("Привязать аккаунт магазина"))
"""In the menu too while account linking is on (``ACCOUNT_LINK_TOOL``)."""

_FAILURE_BY_KIND: dict[TurnOutcome, str] = {
    TurnOutcome.BAD_INPUT: N_(
        "Не получилось разобрать сообщение. Попробуйте сформулировать вопрос иначе."
    ),
    TurnOutcome.EMPTY_MESSAGE: N_("Сообщение пустое. Напишите, пожалуйста, ваш вопрос текстом."),
    TurnOutcome.MESSAGE_TOO_LONG: N_(
        "Сообщение слишком длинное. Пожалуйста, сократите его и отправьте ещё раз."
    ),
    TurnOutcome.MODEL_UNAVAILABLE: N_(
        "Сейчас я перегружен и не успел ответить. Пожалуйста, повторите вопрос через минуту."
    ),
    # Not "overloaded": a wrong key or model is fixed by the shop, not by waiting a minute.
    TurnOutcome.MODEL_MISCONFIGURED: N_(
        "Сейчас я не могу ответить из-за ошибки в настройках бота. Пожалуйста, напишите позже."
    ),
    # Not "overloaded" either: nothing answered at all (an outage, or a wrong address).
    TurnOutcome.MODEL_UNREACHABLE: N_(
        "Сейчас я не могу связаться с сервисом, который готовит ответы. "
        "Пожалуйста, повторите вопрос через несколько минут."
    ),
    TurnOutcome.BAD_REQUEST: N_(
        "Запрос получился слишком длинным для обработки. Сократите вопрос "
        "или начните новый разговор командой /new."
    ),
    TurnOutcome.MODEL_ERROR: N_(
        "Не получилось подготовить ответ. Пожалуйста, переформулируйте вопрос "
        "или попробуйте ещё раз."
    ),
    TurnOutcome.TOOL_FAILURE: N_(
        "Не удалось получить нужные данные. Пожалуйста, попробуйте ещё раз чуть позже."
    ),
    TurnOutcome.LIMIT: N_(
        "Вопрос оказался слишком сложным для одного ответа. "
        "Попробуйте разбить его на несколько простых вопросов."
    ),
    TurnOutcome.DEADLINE: N_(
        "Ответ готовился слишком долго, и я его прервал. Пожалуйста, повторите вопрос через минуту."
    ),
    TurnOutcome.STORAGE_UNAVAILABLE: N_(
        "Сервис временно недоступен. Пожалуйста, попробуйте ещё раз через несколько минут."
    ),
    TurnOutcome.BUSY: N_(
        "Я ещё отвечаю на ваше предыдущее сообщение. Пожалуйста, подождите немного "
        "и повторите вопрос."
    ),
}

_UNEXPECTED = N_("Что-то пошло не так. Пожалуйста, попробуйте ещё раз чуть позже.")


INCIDENT_CODE = N_("Код обращения: {code}. Назовите его поддержке, если проблема повторится.")


def with_incident_code(text: str, code: str, gettext: Translate = _as_is) -> str:
    """``text`` followed by the incident code the customer can quote to support."""
    return f"{text}\n\n{gettext(INCIDENT_CODE).format(code=code)}"


def failure_message(
    error: ChatServiceError, incident_code: str, gettext: Translate = _as_is
) -> str:
    """The message for ``error``'s kind (else its nearest class's known kind) with the code."""
    classes = type(error).__mro__
    for kind in (error.kind, *(getattr(cls, "default_kind", None) for cls in classes)):
        text = _FAILURE_BY_KIND.get(kind) if isinstance(kind, TurnOutcome) else None
        if text is not None:
            return with_incident_code(gettext(text), incident_code, gettext)
    return with_incident_code(gettext(_UNEXPECTED), incident_code, gettext)


def unexpected_failure_message(incident_code: str, gettext: Translate = _as_is) -> str:
    """The message for a failure nobody foresaw (a bug): still kind, still with the code."""
    return with_incident_code(gettext(_UNEXPECTED), incident_code, gettext)


OPERATOR_WAITING = N_(
    "Я позвал сотрудника поддержки: он ответит здесь, в этом чате. "
    "Пока можно продолжать писать мне."
)
OPERATOR_ALREADY = N_("Сотрудник поддержки уже подключён к разговору и ответит здесь.")
OPERATOR_OFF = N_(
    "Я бот и не могу сам позвать оператора, но сотрудники поддержки на связи в часы работы."
)
"""Without a staff group: ``/operator`` and the offline demo model's answer to «позовите
оператора» both start with it and go on with the hours (:func:`operator_off`)."""


def operator_off(hours: str, gettext: Translate = _as_is) -> str:
    """``/operator`` without a staff group: :data:`OPERATOR_OFF`, then the support hours."""
    return f"{gettext(OPERATOR_OFF)}\n\n{hours}"


FAILED_HANDOFF = N_("Я позвал сотрудника поддержки: он ответит здесь, в этом чате.")
HANDOFF_IDLE_NOTE = N_("Разговор с сотрудником завершён, дальше вам снова отвечает бот.")
"""When a handoff ends because nobody wrote for ``HANDOFF_IDLE_MINUTES``."""

ESCALATION_OFFER = N_(
    "Похоже, что-то пошло не так, и нам очень жаль. "
    "Если хотите, к разговору подключится сотрудник поддержки."
)
"""The offer of a person to an angry, urgent customer, above one button."""
ESCALATION_BUTTON = N_("Позвать сотрудника")
"""The offer's one button."""
ESCALATION_PRESSED = N_("Вы попросили позвать сотрудника.")
"""The offer's text once its button was pressed (the button removed)."""
CSAT_QUESTION = N_("Помогли ли мы вам? Оцените, пожалуйста, от 1 до 5")
"""The satisfaction question, under buttons 1 to 5."""
CSAT_THANKS = N_("Спасибо за оценку!")
"""What the question becomes once answered (and the press's short answer)."""
CSAT_ALREADY = N_("Вы уже оценили, спасибо!")
"""A second press's short answer: nothing changes."""
CSAT_CLOSED = N_("Этот опрос уже закрыт. Спасибо, что заглянули!")
"""A press on an expired or replaced question."""

# Confirmation cards (bot/actions, bot/telegram/action_cards.py, bot/telegram/callbacks.py).

CONFIRM_LABEL = N_("Подтвердить")
"""The card's first button."""
DECLINE_LABEL = N_("Не нужно")
"""The card's second button."""
ACTION_EXPIRED_TEXT = N_("Срок подтверждения истёк")
"""The card's new text (and the press's short answer) once the confirmation expired."""
ACTION_EXPIRED_MESSAGE = N_(
    "Срок подтверждения истёк, ничего не изменено. Если это ещё нужно, напишите мне."
)
"""The message after a press on an expired card."""
ACTION_FAILED_TEXT = N_("Не удалось выполнить действие: ничего не изменено. Попробуйте позже.")
"""The card's text and the message when the action could not run (nothing changed)."""
ACTION_CHECKING_TEXT = N_("⏳ Проверяем, выполнено ли действие")
"""The card's text when a shop's tool may have run but its answer was lost."""
ACTION_CHECKING_MESSAGE = N_(
    "Не удалось сразу узнать, выполнено ли действие. Мы проверим и напишем вам; "
    "нажимать кнопку ещё раз не нужно."
)
"""The message when the outcome is being checked (staff see the action as a dead letter)."""
ACTION_DECLINED_TEXT = N_("Вы отказались, ничего не изменено.")
"""The card's text after a no, when its tool is not offered now (its own words otherwise)."""
ACTION_UNAVAILABLE_TEXT = N_("Не выполнено: магазин сейчас недоступен, ничего не изменено")
"""The card's text when a confirmed action's tool stayed unlisted (its server down)."""
ACTION_UNAVAILABLE_MESSAGE = N_(
    "Не выполнено: магазин сейчас недоступен, ничего не изменено. Попробуйте чуть позже, "
    "напишите мне ещё раз."
)
"""The message then: the call was never sent."""
ACTION_STALE_ANSWER = N_("Уже выполнено или больше не действует")
"""The press's short answer when the action is done, declined or superseded."""
ACTION_FOREIGN_ANSWER = N_("Эта кнопка не для вас")
"""The press's short answer when someone else pressed the customer's card."""
BUTTON_FORGED_ANSWER = N_("Кнопка больше не действует")
"""The press's short answer when its callback data names no action of this bot."""
CARD_SUPERSEDED_TEXT = N_("Предложение заменено новым: смотрите карточку ниже")
"""An older card's new text when a newer proposal replaced it."""
CARD_NOT_DELIVERED = N_(
    "Не получилось показать кнопки подтверждения, поэтому действие не выполнено и ничего "
    "не изменено. Если это ещё нужно, напишите мне ещё раз."
)
"""Said (and kept for the model) when a card could not be delivered: its action is withdrawn."""

# Account linking (bot/accounts/linking.py, bot/telegram/handlers/link.py): the shop's
# customer is found by the phone number of a contact the customer shared themselves.

LINK_BUTTON = N_("📱 Поделиться номером")
"""The reply keyboard's one button (``request_contact``: Telegram sends the customer's own)."""
LINK_PLACEHOLDER = N_("Нажмите кнопку «Поделиться номером»")
"""The message box's placeholder while the button is shown."""
LINK_ASK = N_(
    "Чтобы я видел ваши заказы в магазине, поделитесь номером телефона, на который "
    "оформлен аккаунт: нажмите кнопку «📱 Поделиться номером» внизу. "
    "Номер, написанный текстом, для этого не подходит."
)
"""``/link``: the request for the customer's own contact, with the button."""
LINK_NEEDED = N_(
    "Чтобы ответить про ваши заказы, мне нужно найти ваш аккаунт в магазине. "
    "Поделитесь, пожалуйста, номером телефона: нажмите кнопку «📱 Поделиться номером» внизу."
)
"""When a shop tool needs to know who the customer is and the account is not linked yet."""
LINK_DONE = N_("Готово, аккаунт магазина привязан: теперь я вижу ваши заказы.")
"""The contact was the customer's own and the shop knows the number."""
LINK_NOT_OWN = N_(
    "Это не ваш номер: привязать можно только свой. "
    "Нажмите кнопку «📱 Поделиться номером» внизу, и Telegram отправит ваш."
)
"""A contact shared that belongs to somebody else: nothing is linked."""
LINK_NOT_FOUND = N_(
    "Не нашёл аккаунт магазина с этим номером. Если аккаунт оформлен на другой номер, "
    "напишите об этом здесь, и мы поможем."
)
"""The shop has no customer with the shared number."""
LINK_UNAVAILABLE = N_(
    "Сейчас не получается проверить номер: магазин не отвечает. Попробуйте, пожалуйста, чуть позже."
)
"""The shop could not be asked; nothing is linked, the button stays."""
LINK_PRIVATE_ONLY = N_("Привязать аккаунт магазина можно только в личном чате с ботом.")
"""``/link`` or a contact in a group."""

# Drafts while tools run (bot/telegram/draft_labels.py): the purpose, never the arguments.

DRAFT_TOOL_LABELS: Final[dict[str, str]] = {
    GET_ORDER_STATUS_TOOL_NAME: N_("Проверяю заказ…"),
    SEARCH_PRODUCTS_TOOL_NAME: N_("Ищу в каталоге…"),
    GET_RETURN_POLICY_TOOL_NAME: N_("Смотрю условия возврата…"),
    GET_SUPPORT_HOURS_TOOL_NAME: N_("Смотрю часы работы поддержки…"),
    SEARCH_HELP_CENTER_TOOL_NAME: N_("Ищу в справке…"),
    REQUEST_HUMAN_AGENT_TOOL_NAME: N_("Зову сотрудника…"),
    CANCEL_ORDER_TOOL_NAME: N_("Готовлю отмену заказа…"),
    REQUEST_RETURN_TOOL_NAME: N_("Готовлю возврат…"),
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME: N_("Готовлю смену адреса…"),
}
DRAFT_DEFAULT_LABEL: Final = N_("Проверяю данные…")
"""For a tool without its own label (a name the model made up, a new tool)."""

# The terminal console (bot/console.py, bot/console_answer.py): in the conversation's
# language (``DEFAULT_LANGUAGE`` until the customer's words or ``/language`` decide).

CONSOLE_HELP = N_(
    "Команды: /new — новый диалог, /analyze — анализ обращения, "
    "/operator — позвать сотрудника, /language — язык бота, /help — эта подсказка, "
    "/exit — выход."
)
CONSOLE_GREETING = N_("Чат поддержки (диалог {conversation}).")
"""The console's first line, before :data:`CONSOLE_HELP`."""
CONSOLE_PROMPT = N_("Вы: ")
"""Before each line the customer types."""
CONSOLE_BOT = N_("Бот: ")
"""Before each message of the bot."""
CONSOLE_CARD = N_("[Карточка] ")
"""Before a confirmation card's text."""
CONSOLE_DECISION = N_("{confirm} [д] / {decline} [н]?")
"""Under a card: its two buttons and their keys (yes and no are read in every language)."""
CONSOLE_CARD_WAITING = N_("Карточка ждёт решения; действие не выполнено.")
"""After a message or a command while a card waits, above :data:`CONSOLE_DECISION`."""
CONSOLE_CARD_CLOSED = N_("Новый диалог: карточка закрыта без подтверждения.")
"""``/new`` while a card waits: before the press path's outcome (declined: nothing done)."""
CONSOLE_NEW_CONVERSATION = N_("Начат новый диалог.")
CONSOLE_ANALYSIS = N_("Анализ обращения:")
CONSOLE_NOTHING_TO_ANALYZE = N_("Анализировать пока нечего: в диалоге нет сообщений.")
CONSOLE_ACTION_GONE = N_("Это действие уже не ждёт решения.")
CONSOLE_ANSWER_CUT = N_("(ответ прерван)")
"""After the part of an answer already printed when its turn failed."""


def console_greeting(conversation_key: str, gettext: Translate = _as_is) -> str:
    """The console's first line: which conversation, and the commands."""
    greeting = gettext(CONSOLE_GREETING).format(conversation=conversation_key)
    return f"{greeting} {gettext(CONSOLE_HELP)}"


def console_decision(gettext: Translate = _as_is) -> str:
    """The question under a card: «Подтвердить [д] / Не нужно [н]?» in the catalog's words."""
    return gettext(CONSOLE_DECISION).format(
        confirm=gettext(CONFIRM_LABEL), decline=gettext(DECLINE_LABEL)
    )
