"""A deterministic local model for demos and offline tests: no network, no key.

It reads the customer's words, asks for the tool a real model would pick (an
order number, a product, a question about hours or the catalogue, a question
for the help center), asks for what is missing (an order number) instead of
guessing, and after the tool results writes a short answer from their JSON. It
speaks Russian and, to a customer who writes English, English: the same rules
over each language's words (:data:`LEXICONS`). Its model name is
``offline-demo`` so that nobody mistakes it for a real model;
:data:`OFFLINE_MODEL_DESCRIPTION` says what it is in one line.

It learns the tools from the registry's names (:meth:`OfflineDemoKnowledge.learn`):
a shipped tool named in :data:`DEMO_TOOL_ROLES` gets its rules; any other
registered tool is called when the customer's message names it (``get_weather
Москва``), with arguments filled from its schema, and its result is retold as
JSON (a write tool's as the usual "press the button" line).
"""

import itertools
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.llm.streaming import tell_text
from bot.llm.tokens import estimate_messages_tokens, estimate_text_tokens
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
from tools.knowledge.terms import STOP_WORDS, query_language
from tools.order_actions import (
    CANCEL_ORDER_TOOL_NAME,
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME,
    REQUEST_RETURN_TOOL_NAME,
)
from tools.order_status import GET_ORDER_STATUS_TOOL_NAME
from tools.product_search import SEARCH_PRODUCTS_TOOL_NAME
from tools.return_policy import GET_RETURN_POLICY_TOOL_NAME
from tools.support_hours import GET_SUPPORT_HOURS_TOOL_NAME
from turn import ToolCall, Usage

OFFLINE_MODEL_NAME = "offline-demo"

OFFLINE_MODEL_DESCRIPTION = (
    "Model: offline-demo, a deterministic keyword demo (not a language model): it maps "
    "words to the demo shop's tools. For a real model set OPENAI_API_KEY (LLM_BACKEND=openai)."
)
"""What this model is, in one line: for a front end's banner (the console's)."""

# Order numbers of the demo shop are four digits; «заказ на 4000», «4000 ₽», "4000 rub",
# "$4000" are sums.
_ORDER_NUMBER = re.compile(
    r"(?<!\d)(?<!на )(?<!сумму )(?<!\$)(\d{4})(?!\d)(?!\s*(?:₽|р\.|руб|rub|\$))"
)
_WORD = re.compile(r"[a-zа-яё0-9]+")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
# The summary request's material starts so (bot.engine.summary); a turn's last step
# has no tools too.
_SUMMARY_MATERIAL_START = "<previous_summary>"


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Lexicon:
    """One language's words the rules look for (in normalised text) and the texts it writes.

    The rules are the same in every language (:meth:`OfflineChatModel._plan`); only
    the words that trigger them and the words of the answer differ.
    """

    hours: re.Pattern[str]
    person: re.Pattern[str]
    order: re.Pattern[str]
    # «Где мой заказ?» without a number: the order's state is asked for, the number missing.
    tracking: re.Pattern[str]
    order_state: re.Pattern[str]
    search: re.Pattern[str]
    returns: re.Pattern[str]
    cancel: re.Pattern[str]
    address: re.Pattern[str]
    change: re.Pattern[str]
    want: re.Pattern[str]
    # Matched in the customer's own text (not normalised): the new address keeps its case.
    new_address: re.Pattern[str]
    confirm: re.Pattern[str]
    greeting: re.Pattern[str]
    thanks: re.Pattern[str]
    # A message that only says goodbye («пока», "bye"): the whole of it, not a word in it.
    goodbye: re.Pattern[str]
    ask_order_number: str
    ask_order_number_to_cancel: str
    ask_order_number_and_address: str
    nothing_mapped: str
    press_the_button: str
    hello: str
    you_are_welcome: str
    bye: str
    bot_cannot_call_a_person: str
    cancel_reason: str
    return_reason: str
    check_the_card: str
    done: str
    result: str
    unreadable: str
    service_failed: str
    order_line: str
    estimate: str
    # The order's state by its status code; a code not here is told in the shop's words.
    order_states: Mapping[str, str]
    no_policy: str
    policy: str
    nothing_in_catalogue: str
    in_catalogue: str
    in_stock: str
    out_of_stock: str
    no_article: str
    article: str
    open_now: str
    closed_now: str
    schedule: str
    day_off: str
    # The shop's weekday names (Russian) in this language.
    days: Mapping[str, str]
    # Product words of this language as the shop's catalogue names them (Russian).
    products: tuple[tuple[re.Pattern[str], str], ...]
    # The shop's product words (its return policies) in this language.
    product_names: Mapping[str, str]
    # A tool's refusal by its error code, with the order number asked about; a code not
    # here is told in the tool's own words (the shop's language).
    errors: Mapping[str, str]
    # The shop's return conditions (its own words) in this language.
    conditions: Mapping[str, str]


RUSSIAN = _Lexicon(
    hours=_words(
        r"час[аы]? работы|график|режим работы|когда (?:вы )?работа|открыт|выходн"
        r"|(?:до|во) ?скольк\w* (?:вы )?(?:работа|открыва)|работа\w* ли (?:вы|поддержк)"
        r"|(?:вы|поддержка|операторы?) работа"
    ),
    person=_words(r"оператор|человек|сотрудник|менеджер|живой"),
    order=_words(r"заказ|посылк"),
    tracking=_words(r"отсле[дж]|трек"),
    order_state=_words(
        r"(?:где|что с)\s+(?:\w+\s+)?(?:заказ|посылк)|статус"
        r"|(?:когда|када|кагда)\b.*\b(?:привез|доставят|придет|приедет|получу|будет|отправ)"
    ),
    search=_words(
        r"сколько стоит|цен[аыу]|наличи|найд|найти|подобрать|купить|каталог|ищу|посоветуй|выбрать"
    ),
    returns=_words(r"верну|возвра|сдать|сдам"),
    cancel=_words(r"отмен"),
    address=_words(r"адрес"),
    change=_words(r"измен|помен|смен|исправ|друг|нов"),
    want=_words(r"хочу|оформ|прошу|нужно|надо"),
    new_address=re.compile(r"адрес[а-яё]*\b.*?\sна\s+(.{5,300})$", re.IGNORECASE | re.DOTALL),
    confirm=_words(r"^\s*(да|подтверждаю|согласен|согласна|ок|окей)\b"),
    greeting=_words(r"^(здравствуй|привет|добр|hello|hi)"),
    thanks=_words(r"спасибо|благодар"),
    goodbye=_words(
        r"^\W*(?:пока(?:[ -]пока)?|до свидания|до встречи|всего (?:доброго|хорошего))\W*$"
    ),
    ask_order_number="Подскажите, пожалуйста, номер заказа: четыре цифры, например 8041.",
    ask_order_number_to_cancel=(
        "Чтобы отменить заказ, напишите, пожалуйста, номер заказа: четыре цифры, например 8042."
    ),
    ask_order_number_and_address=(
        "Чтобы изменить адрес доставки, напишите, пожалуйста, номер заказа и новый адрес, "
        "например: «поменяйте адрес доставки заказа 8042 на ул. Ленина, 5»."
    ),
    nothing_mapped=(
        "Это демо-режим: я отвечаю по ключевым словам, без языковой модели. Могу подсказать "
        "статус заказа (напишите номер из четырёх цифр), условия возврата, доставки и оплаты, "
        "найти товар в каталоге или назвать часы работы поддержки."
    ),
    press_the_button="Чтобы подтвердить действие, нажмите кнопку «Подтвердить» на карточке выше.",
    hello="Здравствуйте! Чем могу помочь?",
    you_are_welcome="Пожалуйста! Если появятся вопросы, пишите.",
    bye="До свидания! Если появятся вопросы, пишите.",
    bot_cannot_call_a_person=(
        "Я бот и не могу сам позвать оператора, но сотрудники поддержки на связи в часы работы."
    ),
    cancel_reason="клиент попросил отменить заказ",
    return_reason="клиент хочет вернуть товар",
    check_the_card="Проверьте, пожалуйста, карточку ниже и нажмите «Подтвердить», если всё верно.",
    done="Готово.",
    result="Результат: ",
    unreadable="Не удалось прочитать ответ сервиса.",
    service_failed="Сервис не смог ответить на этот вопрос.",
    order_line="Заказ {order_id}: {state}.",
    estimate=" Ожидаемая дата доставки: {date}.",
    order_states={},
    no_policy=(
        "Для товара «{product}» отдельных условий возврата нет: "
        "уточните их у сотрудников поддержки в часы работы."
    ),
    policy="Товар «{product}» можно вернуть в течение {days} дней. {conditions}",
    nothing_in_catalogue="В каталоге ничего не нашлось.",
    in_catalogue="Нашлось в каталоге:\n",
    in_stock="в наличии",
    out_of_stock="нет в наличии",
    no_article=(
        "В справочном центре нет статьи об этом, и гадать я не буду. Сотрудники "
        "поддержки ответят на этот вопрос в этом чате в рабочие часы."
    ),
    article="Вот что сказано в статье {source}:\n{snippet}",
    open_now="Сейчас поддержка работает.",
    closed_now="Сейчас поддержка закрыта.",
    schedule="{state} График ({timezone}): {days}.",
    day_off="выходной",
    days={},
    products=(),
    product_names={},
    errors={},
    conditions={},
)
"""The Russian words and texts: the demo shop's own language."""

ENGLISH = _Lexicon(
    hours=_words(
        r"(?:opening|working|business|support|office) hours|\bhours\b|are you open"
        r"|(?:you|support|operators?) (?:open|work)|what time do you|\bopen (?:on|today|now)"
        r"|\bweekends?\b"
    ),
    person=_words(r"\boperator|\bhuman\b|\bperson\b|\bagent\b|\bmanager\b|\bstaff\b|live chat"),
    order=_words(r"\border|\bparcel|\bpackage|\bshipment"),
    tracking=_words(r"\btrack"),
    order_state=_words(
        r"(?:where|what about|what's up with|what happened to)\s+(?:is\s+|are\s+)?(?:\w+\s+)?"
        r"(?:order|parcel|package|shipment)|status"
        r"|\bwhen\b.*\b(?:arriv|deliver|come|get it|get my order|ship|be here)"
    ),
    search=_words(
        r"how much (?:is|are|does|do)|\bprice|\bcost|in stock|\bavailable|\bfind|looking for"
        r"|\bbuy\b|catalog|recommend|\bchoose|do you (?:have|sell)"
    ),
    returns=_words(r"\breturn|send (?:\w+ )?back|\brefund"),
    cancel=_words(r"\bcancel"),
    address=_words(r"\baddress"),
    change=_words(r"\bchang|\bupdat|\bedit\b|\bcorrect|\bnew\b|different|another|\bfix"),
    want=_words(r"\bwant\b|would like|i'd like|\bplease\b|\bneed\b|\bstart\b|\blike to\b"),
    new_address=re.compile(r"address\b.*?\s(?:to)\s+(.{5,300})$", re.IGNORECASE | re.DOTALL),
    confirm=_words(r"^\s*(yes|yep|confirm|confirmed|ok|okay|sure|agreed?)\b"),
    greeting=_words(r"^(hello|hi|hey|good (?:morning|afternoon|evening))\b"),
    thanks=_words(r"\bthank|\bthx\b|\bcheers\b"),
    goodbye=_words(
        r"^\W*(?:(?:good ?)?bye(?:[ -]bye)?|see you(?: later| soon)?|have a (?:nice|good) day)\W*$"
    ),
    ask_order_number="Please tell me the order number: four digits, for example 8041.",
    ask_order_number_to_cancel=(
        "To cancel an order, please write the order number: four digits, for example 8042."
    ),
    ask_order_number_and_address=(
        "To change the delivery address, please write the order number and the new address, "
        'for example: "change the delivery address of order 8042 to 5 Lenin St".'
    ),
    nothing_mapped=(
        "This is demo mode: I answer by keywords, without a language model. I can tell you "
        "an order's status (write its four-digit number), the terms of returns, delivery and "
        "payment, find a product in the catalogue or give you the support hours."
    ),
    press_the_button="To confirm the action, press the confirm button on the card above.",
    hello="Hello! How can I help?",
    you_are_welcome="You're welcome! If you have more questions, just write.",
    bye="Goodbye! If you have more questions, just write.",
    bot_cannot_call_a_person=(
        "I'm a bot and cannot call an operator myself, but support staff are available "
        "during working hours."
    ),
    cancel_reason="the customer asked to cancel the order",
    return_reason="the customer wants to return the item",
    check_the_card=(
        "Please check the card below and press the confirm button if everything is right."
    ),
    done="Done.",
    result="Result: ",
    unreadable="I could not read the service's answer.",
    service_failed="The service could not answer this question.",
    order_line="Order {order_id}: {state}.",
    estimate=" Expected delivery date: {date}.",
    order_states={
        "processing": "being packed at the warehouse",
        "in_transit": "handed over to the delivery service",
        "ready_for_pickup": "waiting at the pick-up point",
        "delivered": "delivered",
        "cancelled": "cancelled",
        "return_requested": "a return has been requested",
    },
    no_policy=(
        'The "{product}" has no return terms of its own: please ask support staff '
        "during working hours."
    ),
    policy='The "{product}" can be returned within {days} days. {conditions}',
    nothing_in_catalogue="Nothing was found in the catalogue.",
    in_catalogue="Found in the catalogue:\n",
    in_stock="in stock",
    out_of_stock="out of stock",
    no_article=(
        "The help center has no article about this, and I won't guess. Support staff "
        "will answer this question in this chat during working hours."
    ),
    article="Here is what the article {source} says:\n{snippet}",
    open_now="Support is open now.",
    closed_now="Support is closed now.",
    schedule="{state} Schedule ({timezone}): {days}.",
    day_off="closed",
    days={
        "понедельник": "Monday",
        "вторник": "Tuesday",
        "среда": "Wednesday",
        "четверг": "Thursday",
        "пятница": "Friday",
        "суббота": "Saturday",
        "воскресенье": "Sunday",
    },
    products=(
        (_words(r"\b(?:coffee (?:machine|maker)|espresso machine)s?\b"), "кофемашина"),
        (_words(r"\b(?:headphones?|earphones?|headsets?|earbuds?)\b"), "наушники"),
        (_words(r"\bkeyboards?\b"), "клавиатура"),
        (_words(r"\bkettles?\b"), "чайник"),
    ),
    product_names={
        "кофемашина": "coffee machine",
        "наушники": "headphones",
        "клавиатура": "keyboard",
        "чайник": "kettle",
        "электрический чайник": "electric kettle",
    },
    errors={
        "order_not_found": (
            "Order {order_id} was not found. Please check the number: four digits, "
            "for example 8041."
        ),
        "not_cancellable": "Order {order_id} cannot be cancelled at this stage.",
        "not_returnable": "A return for order {order_id} is not possible at this stage.",
        "address_not_changeable": (
            "The delivery address of order {order_id} can no longer be changed."
        ),
    },
    conditions={
        "Товар должен сохранить комплектность и не иметь следов использования.": (
            "The item must be complete, with all its parts, and show no signs of use."
        ),
        "Возврат возможен при сохранении упаковки и товарного вида.": (
            "It can be returned if the packaging and the item's look are kept."
        ),
        "Нужны комплектность и отсутствие механических повреждений.": (
            "It must be complete, with no mechanical damage."
        ),
    },
)
"""The English words and texts: a customer who writes English is answered in English.

The demo shop's data (product names, return conditions, tool errors) stays in
its own language, Russian; English product words are put into the catalogue's
words first, as a real model would when it calls a Russian shop's tools.
"""

LEXICONS: Mapping[str, _Lexicon] = {"ru": RUSSIAN, "en": ENGLISH}
"""The languages the demo model speaks, by code; another language is answered in Russian."""

# What it may have asked for: a number sent in reply completes that request.
_ASKS = frozenset(
    text
    for lexicon in LEXICONS.values()
    for text in (
        lexicon.ask_order_number,
        lexicon.ask_order_number_to_cancel,
        lexicon.ask_order_number_and_address,
    )
)


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("ё", "е").split())


def _stem(word: str) -> str:
    return word[:5] if len(word) > 5 else word


class Role(StrEnum):
    """What a shipped tool does for the demo model's rules."""

    ORDER_STATUS = "order_status"
    RETURN_POLICY = "return_policy"
    PRODUCT_SEARCH = "product_search"
    SUPPORT_HOURS = "support_hours"
    HELP_CENTER = "help_center"
    CANCEL_ORDER = "cancel_order"
    REQUEST_RETURN = "request_return"
    CHANGE_ADDRESS = "change_address"


Describe = Callable[[dict[str, Any], _Lexicon], str]


def _describe_data(data: dict[str, Any], words: _Lexicon) -> str:
    """A tool the demo has no words for: its result's data as JSON."""
    return words.result + json.dumps(data, ensure_ascii=False)[:1500]


def _describe_proposal(data: dict[str, Any], words: _Lexicon) -> str:
    if data.get("status") == "awaiting_confirmation":
        return words.check_the_card
    return words.done


def _describe_order(data: dict[str, Any], words: _Lexicon) -> str:
    state = words.order_states.get(str(data.get("status")), data["status_text"])
    line = words.order_line.format(order_id=data["order_id"], state=state)
    if data.get("delivery_estimate"):
        line += words.estimate.format(date=data["delivery_estimate"])
    return line


def _describe_return_policy(data: dict[str, Any], words: _Lexicon) -> str:
    product = _product_in(words, data["product"])
    if not data.get("found"):
        return words.no_policy.format(product=product)
    conditions = str(data["conditions"])
    return words.policy.format(
        product=product,
        days=data["return_days"],
        conditions=words.conditions.get(conditions, conditions),
    )


def _product_in(words: _Lexicon, product: str) -> str:
    """The shop's product word in the customer's language, when the model knows it."""
    return words.product_names.get(product, product)


def _describe_products(data: dict[str, Any], words: _Lexicon) -> str:
    items = data.get("items") or []
    if not items:
        return words.nothing_in_catalogue
    lines = [
        f"• {item['name']} — {item['price_rub']} ₽, "
        + (words.in_stock if item["in_stock"] else words.out_of_stock)
        for item in items[:3]
    ]
    return words.in_catalogue + "\n".join(lines)


def _describe_articles(data: dict[str, Any], words: _Lexicon) -> str:
    results = data.get("results") or []
    if not results:
        return words.no_article
    top = results[0]
    title = f"«{top['title']}»" if top.get("lang", "ru") == "ru" else f'"{top["title"]}"'
    source = title + (f" ({top['url']})" if top.get("url") else "")
    return words.article.format(source=source, snippet=top["snippet"])


def _describe_hours(data: dict[str, Any], words: _Lexicon) -> str:
    days = [
        f"{words.days.get(day['day'], day['day'])}: {day['opens']}–{day['closes']}"
        if day["opens"]
        else f"{words.days.get(day['day'], day['day'])}: {words.day_off}"
        for day in data.get("schedule", [])
    ]
    state = words.open_now if data.get("open_now") else words.closed_now
    return words.schedule.format(state=state, timezone=data.get("timezone"), days="; ".join(days))


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoToolRole:
    """A shipped tool the demo model has rules for: its role and how it retells a result."""

    role: Role
    describe: Describe


DEMO_TOOL_ROLES: Mapping[str, DemoToolRole] = {
    GET_ORDER_STATUS_TOOL_NAME: DemoToolRole(role=Role.ORDER_STATUS, describe=_describe_order),
    GET_RETURN_POLICY_TOOL_NAME: DemoToolRole(
        role=Role.RETURN_POLICY, describe=_describe_return_policy
    ),
    SEARCH_PRODUCTS_TOOL_NAME: DemoToolRole(role=Role.PRODUCT_SEARCH, describe=_describe_products),
    GET_SUPPORT_HOURS_TOOL_NAME: DemoToolRole(role=Role.SUPPORT_HOURS, describe=_describe_hours),
    SEARCH_HELP_CENTER_TOOL_NAME: DemoToolRole(role=Role.HELP_CENTER, describe=_describe_articles),
    # The write tools (actions the customer confirms), when the application offers them.
    CANCEL_ORDER_TOOL_NAME: DemoToolRole(role=Role.CANCEL_ORDER, describe=_describe_proposal),
    REQUEST_RETURN_TOOL_NAME: DemoToolRole(role=Role.REQUEST_RETURN, describe=_describe_proposal),
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME: DemoToolRole(
        role=Role.CHANGE_ADDRESS, describe=_describe_proposal
    ),
}
"""The one table of the shipped tools the demo model has rules for: tool name -> its role.

A registered tool not named here needs no entry: the model calls it when the
customer's message names it (see the module's docstring). Nothing else keeps
a copy of it: the tool of a role and the retelling of a result are looked up here.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineDemoKnowledge:
    """What the demo model knows of the shop, handed over by the composition root.

    The tools it may ask for (``tools``, as registered; ``write_tools`` among them
    are the ones the customer confirms), the products that have a return policy,
    and the catalogue's texts (names and categories) it recognises in a question.
    With a help-center tool, a question no rule covers goes to the help center.
    Build it with :meth:`learn`.
    """

    return_policy_products: tuple[str, ...]
    catalogue_texts: tuple[str, ...]
    tools: tuple[str, ...] = ()
    write_tools: frozenset[str] = frozenset()

    @classmethod
    def learn(
        cls,
        tool_names: Iterable[str],
        *,
        write_tools: Iterable[str] = (),
        return_policy_products: tuple[str, ...],
        catalogue_texts: tuple[str, ...],
    ) -> "OfflineDemoKnowledge":
        """The knowledge of a registry's tools: each shipped one in its role, the rest by name."""
        return cls(
            return_policy_products=return_policy_products,
            catalogue_texts=catalogue_texts,
            tools=tuple(tool_names),
            write_tools=frozenset(write_tools),
        )

    def tool(self, role: Role) -> str | None:
        """The registered tool playing ``role``, if any (the first, in registry order)."""
        return next(
            (
                name
                for name in self.tools
                if (shipped := DEMO_TOOL_ROLES.get(name)) is not None and shipped.role == role
            ),
            None,
        )

    def unknown_tools(self) -> tuple[str, ...]:
        """The tools it has no rule for: called only when the customer's message names them."""
        return tuple(name for name in self.tools if name not in DEMO_TOOL_ROLES)

    def describer(self, name: str) -> Describe | None:
        """How a result of the registered tool ``name`` is retold (``None``: not registered)."""
        if name not in self.tools:
            return None
        if (shipped := DEMO_TOOL_ROLES.get(name)) is not None:
            return shipped.describe
        return _describe_proposal if name in self.write_tools else _describe_data


_Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class _Plan:
    """The tools to call in order, or what to ask the customer for instead."""

    calls: tuple[_Call, ...] = ()
    ask: str | None = None


class OfflineChatModel:
    """Speaks the same client interface as the OpenAI client, deterministically."""

    def __init__(self, knowledge: OfflineDemoKnowledge) -> None:
        self._tools = knowledge
        self._policy_products = list(knowledge.return_policy_products)
        self._catalogue_words = frozenset(
            _stem(word)
            for text in knowledge.catalogue_texts
            for word in _WORD.findall(_normalise(text))
            if len(word) >= 4
        )
        self._unknown = frozenset(knowledge.unknown_tools())
        self._ids = itertools.count(1)

    @property
    def knowledge(self) -> OfflineDemoKnowledge:
        """What this model was told of the shop."""
        return self._tools

    @property
    def model_name(self) -> str:
        """Always ``offline-demo``."""
        return OFFLINE_MODEL_NAME

    @property
    def description(self) -> str:
        """What this model is, in one line (:data:`OFFLINE_MODEL_DESCRIPTION`)."""
        return OFFLINE_MODEL_DESCRIPTION

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        """Ask for the next planned tool, or answer from the tool results.

        ``on_text`` is told the whole answer at once: this model writes it in one go.
        """
        return tell_text(self._generate(messages, tools, tool_choice), on_text)

    def _generate(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
    ) -> LLMResult:
        user_text, called, results = _current_turn(messages)
        if not tools and user_text.startswith(_SUMMARY_MATERIAL_START):
            return self._result(messages, text=_summarise(messages), tool_calls=())
        words = _customer_language(messages)
        offered = {tool["function"]["name"] for tool in tools}
        if tool_choice == "auto" and offered:
            request = _answered_request(messages, user_text)
            plan = self._named_plan(user_text, tools) or self._plan(request, offered, words)
            for name, arguments in plan.calls:
                if name in offered and name not in called:
                    call = ToolCall(
                        id=f"call_offline_{next(self._ids)}",
                        name=name,
                        arguments=json.dumps(arguments, ensure_ascii=False),
                    )
                    return self._result(messages, text=None, tool_calls=(call,))
            if plan.ask is not None and not results:
                return self._result(messages, text=plan.ask, tool_calls=())
        if not results and words.confirm.search(user_text.lower()) and _awaits_button(messages):
            # A typed «да» executes nothing: the application said a card waits for its button.
            return self._result(messages, text=words.press_the_button, tool_calls=())
        return self._result(
            messages, text=_answer(user_text, results, self._tools, words), tool_calls=()
        )

    def _plan(self, user_text: str, offered: Collection[str], words: _Lexicon) -> _Plan:
        asked = _normalise(user_text)
        # Product words in the shop's own (the catalogue's) words: «coffee machine» is
        # «кофемашина» to the demo shop.
        text = asked
        for pattern, shop_word in words.products:
            text = pattern.sub(shop_word, text)
        write = self._write_plan(text, user_text, words)
        if write is not None and write[0] in offered:
            # One action at a time, and nothing else in that turn.
            return _Plan((write,))
        tool = self._tools.tool
        calls: list[_Call] = []
        order = _ORDER_NUMBER.search(text)
        if order is not None and (status_tool := tool(Role.ORDER_STATUS)):
            calls.append((status_tool, {"order_id": order.group(1)}))
        product = self._product(text)
        if words.returns.search(text) and product and (policy_tool := tool(Role.RETURN_POLICY)):
            calls.append((policy_tool, {"product": product}))
        if (words.hours.search(text) or words.person.search(text)) and (
            hours_tool := tool(Role.SUPPORT_HOURS)
        ):
            calls.append((hours_tool, {}))
        found = _WORD.findall(text)
        significant = [word for word in found if len(word) >= 4 and word not in STOP_WORDS]
        mentioned = [_stem(word) for word in significant if _stem(word) in self._catalogue_words]
        help_center = tool(Role.HELP_CENTER)
        # The catalogue for a question about buying, or for product names alone; a question
        # about a product's warranty or care is one for the help center.
        wants_catalogue = words.search.search(text) is not None or (
            not calls and (len(mentioned) == len(significant) or help_center is None)
        )
        if mentioned and wants_catalogue and (search_tool := tool(Role.PRODUCT_SEARCH)):
            calls.append((search_tool, {"query": " ".join(dict.fromkeys(mentioned))}))
        if calls:
            return _Plan(tuple(calls))
        if order is None and (ask := self._missing_order_number(text, offered, words)) is not None:
            return _Plan(ask=ask)
        question = [word for word in found if len(word) >= 3]
        small_talk = (
            words.greeting.search(text) or words.thanks.search(text) or words.goodbye.search(text)
        ) and len(question) <= 3
        if help_center is not None and len(question) >= 2 and not small_talk:
            # No rule fits: what the shop's own articles say (policies, how-to questions),
            # asked in the customer's words and language.
            return _Plan(((help_center, {"query": asked[:300]}),))
        return _Plan()

    def _missing_order_number(
        self, text: str, offered: Collection[str], words: _Lexicon
    ) -> str | None:
        """What to ask for when the customer wants something of an order but gave no number."""
        tool = self._tools.tool
        if words.cancel.search(text) and tool(Role.CANCEL_ORDER) in offered:
            return words.ask_order_number_to_cancel
        if (
            words.address.search(text)
            and words.change.search(text)
            and tool(Role.CHANGE_ADDRESS) in offered
        ):
            return words.ask_order_number_and_address
        about_an_order = words.order.search(text) and words.order_state.search(text)
        if (about_an_order or words.tracking.search(text)) and tool(Role.ORDER_STATUS) in offered:
            return words.ask_order_number
        return None

    def _policy_product(self, text: str) -> str | None:
        """A product with a return policy that ``text`` names."""
        return next((p for p in self._policy_products if _stem(p) in text), None)

    def _product(self, text: str) -> str | None:
        """The product the customer names: one with a policy, else words of the catalogue.

        Never a generic word («товар», «деньги»): only what the shop's catalogue or its
        return policies name, as the customer wrote it («электрический чайник»).
        """
        policy = self._policy_product(text)
        if policy is not None:
            return policy
        run: list[str] = []
        for word in _WORD.findall(text):
            if len(word) >= 4 and _stem(word) in self._catalogue_words:
                run.append(word)
            elif run:
                break
        return " ".join(run) or None

    def _named_plan(self, user_text: str, tools: Sequence[ToolDefinition]) -> _Plan | None:
        """An offered tool without a rule, named in the message, with arguments from the rest."""
        words = user_text.split()
        for tool in tools:
            name = tool["function"]["name"]
            if name in self._unknown and name in words:
                rest = " ".join(word for word in words if word != name)
                schema = tool["function"].get("parameters") or {}
                return _Plan(((name, _arguments_from_text(schema, rest)),))
        return None

    def _write_plan(self, text: str, user_text: str, words: _Lexicon) -> _Call | None:
        """A plain request to cancel, return or re-address an order, as its write tool's call."""
        order = _ORDER_NUMBER.search(text)
        if order is None:
            return None
        order_id = order.group(1)
        tool = self._tools.tool
        address = words.new_address.search(user_text)
        if address is not None and (change_tool := tool(Role.CHANGE_ADDRESS)) is not None:
            return (change_tool, {"order_id": order_id, "address": address.group(1).strip(" .")})
        if words.cancel.search(text) and (cancel_tool := tool(Role.CANCEL_ORDER)) is not None:
            return (cancel_tool, {"order_id": order_id, "reason": words.cancel_reason})
        product = self._policy_product(text)
        if (
            words.returns.search(text)
            and words.want.search(text)
            and product is not None
            and (return_tool := tool(Role.REQUEST_RETURN)) is not None
        ):
            return (
                return_tool,
                {"order_id": order_id, "items": [product], "reason": words.return_reason},
            )
        return None

    def _result(
        self, messages: Sequence[Message], text: str | None, tool_calls: tuple[ToolCall, ...]
    ) -> LLMResult:
        prompt_tokens = estimate_messages_tokens(messages)
        completion_tokens = estimate_text_tokens(text or "") + sum(
            estimate_text_tokens(call.arguments) for call in tool_calls
        )
        return LLMResult(
            text=text,
            refusal=None,
            finish_reason="tool_calls" if tool_calls else "stop",
            tool_calls=tool_calls,
            model=OFFLINE_MODEL_NAME,
            response_id=f"offline-{next(self._ids)}",
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
        )

    async def close(self) -> None:
        """Nothing to release."""


def _customer_language(messages: Sequence[Message]) -> _Lexicon:
    """The words of the language the customer writes: their last message with letters.

    A message without letters («8041») keeps the language of the one before it.
    """
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, str):
            continue
        if (language := query_language(content)) is not None:
            return LEXICONS.get(language, RUSSIAN)
    return RUSSIAN


def _awaits_button(messages: Sequence[Message]) -> bool:
    return any(
        message.get("role") == "developer" and "ждёт решения клиента" in str(message.get("content"))
        for message in messages
    )


def _answered_request(messages: Sequence[Message], user_text: str) -> str:
    """The customer's request, with the one it completes when the last answer asked for more.

    «Хочу отменить заказ» was answered «напишите номер заказа»; «8042» then means
    «хочу отменить заказ 8042». A message without a number, or after any other
    answer, stands as it is.
    """
    users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    if len(users) < 2 or _ORDER_NUMBER.search(user_text) is None:
        # Only a number answers the question: anything else is a message of its own.
        return user_text
    previous = messages[users[-2] + 1 : users[-1]]
    asked = any(
        message.get("role") == "assistant" and str(message.get("content") or "") in _ASKS
        for message in previous
    )
    if not asked:
        return user_text
    return f"{messages[users[-2]].get('content') or ''} {user_text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class _ToolResult:
    """One tool result of the turn: the tool, what it was asked and its decoded content."""

    name: str
    arguments: Mapping[str, Any]
    payload: Any


def _current_turn(messages: Sequence[Message]) -> tuple[str, set[str], list[_ToolResult]]:
    """The last user text, the tools called since, and their decoded results."""
    last_user = max(
        (i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1
    )
    user_text = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
    calls_by_id: dict[str, tuple[str, Mapping[str, Any]]] = {}
    results: list[_ToolResult] = []
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or ():
            function = call["function"]
            calls_by_id[call["id"]] = (function["name"], _decoded(function.get("arguments")))
        if message.get("role") == "tool":
            name, arguments = calls_by_id.get(str(message.get("tool_call_id")), ("", {}))
            try:
                payload = json.loads(str(message.get("content")))
            except json.JSONDecodeError:
                payload = None
            results.append(_ToolResult(name=name, arguments=arguments, payload=payload))
    return user_text, {name for name, _ in calls_by_id.values()}, results


def _decoded(arguments: object) -> Mapping[str, Any]:
    try:
        value = json.loads(str(arguments))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _answer(
    user_text: str,
    results: list[_ToolResult],
    knowledge: OfflineDemoKnowledge,
    words: _Lexicon,
) -> str:
    text = _normalise(user_text)
    if not results:
        # Small talk is answered as such: the demo's disclaimer is for what it cannot map.
        if words.thanks.search(text):
            return words.you_are_welcome
        if words.goodbye.search(text):
            return words.bye
        if words.greeting.search(text):
            return words.hello
        if words.order.search(text):
            return words.ask_order_number
        # The one answer that says what this model is: it could not map the message.
        return words.nothing_mapped
    parts = [_describe(knowledge.describer(result.name), result, words) for result in results]
    if words.person.search(text):
        # The customer asked for a person: say when people answer, not just the timetable.
        parts.insert(0, words.bot_cannot_call_a_person)
    return "\n\n".join(part for part in parts if part)


def _describe(describe: Describe | None, result: _ToolResult, words: _Lexicon) -> str:
    payload = result.payload
    if not isinstance(payload, dict):
        return words.unreadable
    if not payload.get("ok"):
        error = payload.get("error") or {}
        refusal = words.errors.get(str(error.get("code")))
        if refusal is not None:
            # In the customer's language: the tool's own words are the shop's.
            return refusal.format(order_id=result.arguments.get("order_id", ""))
        return str(error.get("message") or words.service_failed)
    return describe(payload.get("data") or {}, words) if describe else words.done


def _arguments_from_text(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for a tool the demo has no rule for, from the customer's words.

    A string field gets the text (at most 300 characters), a number the first
    number in it, a boolean true, an enum its first value; other fields are left
    out, and the executor's refusal is retold like any tool error.
    """
    properties: Mapping[str, Any] = schema.get("properties") or {}
    number = _NUMBER.search(text)
    arguments: dict[str, Any] = {}
    for field_name in schema.get("required") or list(properties):
        field = properties.get(field_name) or {}
        kinds = field.get("type")
        kind = next((k for k in kinds if k != "null"), None) if isinstance(kinds, list) else kinds
        if field.get("enum"):
            arguments[field_name] = field["enum"][0]
        elif kind == "string":
            arguments[field_name] = text[:300]
        elif kind == "integer" and number is not None:
            arguments[field_name] = int(float(number.group().replace(",", ".")))
        elif kind == "number" and number is not None:
            arguments[field_name] = float(number.group().replace(",", "."))
        elif kind == "boolean":
            arguments[field_name] = True
    return arguments


def _summarise(messages: Sequence[Message]) -> str:
    """Summary mode (no tools): keep the customer's recent questions, shortened."""
    text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    questions = [
        line[len("Клиент:") :].strip()[:80]
        for line in text.splitlines()
        if line.startswith("Клиент:")
    ]
    if not questions:
        return "Клиент обращался в поддержку."
    return "Клиент спрашивал: " + "; ".join(questions[-6:]) + "."
