"""A deterministic local model for demos and offline tests: no network, no key.

It reads the customer's words, asks for the tool a real model would pick (an
order number, a product, a question about hours or the catalogue, a question
for the help center), asks for what is missing (an order number) instead of
guessing, and after the tool results writes a short Russian answer from their
JSON. Its model name is ``offline-demo`` so that nobody mistakes it for a real
model; :data:`OFFLINE_MODEL_DESCRIPTION` says what it is in one line.

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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.llm.streaming import tell_text
from bot.llm.tokens import estimate_messages_tokens, estimate_text_tokens
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
from tools.knowledge.analysis import STOP_WORDS
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

# Order numbers of the demo shop are four digits; «заказ на 4000», «4000 ₽» are sums.
_ORDER_NUMBER = re.compile(r"(?<!\d)(?<!на )(?<!сумму )(\d{4})(?!\d)(?!\s*(?:₽|р\.|руб))")
_HOURS_WORDS = re.compile(
    r"час[аы]? работы|график|режим работы|когда (?:вы )?работа|открыт|выходн"
    r"|(?:до|во) ?скольк\w* (?:вы )?(?:работа|открыва)|работа\w* ли (?:вы|поддержк)"
    r"|(?:вы|поддержка|операторы?) работа"
)
_PERSON_WORDS = re.compile(r"оператор|человек|сотрудник|менеджер|живой")
_ORDER_WORDS = re.compile(r"заказ|посылк")
# «Где мой заказ?» without a number: the order's state is asked for, and the number is missing.
_TRACKING_WORDS = re.compile(r"отсле[дж]|трек")
_ORDER_STATE_WORDS = re.compile(
    r"(?:где|что с)\s+(?:\w+\s+)?(?:заказ|посылк)|статус"
    r"|(?:когда|када|кагда)\b.*\b(?:привез|доставят|придет|приедет|получу|будет|отправ)"
)
_SEARCH_WORDS = re.compile(
    r"сколько стоит|цен[аыу]|наличи|найд|найти|подобрать|купить|каталог|ищу|посоветуй|выбрать"
)
_RETURN_WORDS = re.compile(r"верну|возвра|сдать|сдам")
_CANCEL_WORDS = re.compile(r"отмен")
_ADDRESS_WORDS = re.compile(r"адрес")
_CHANGE_WORDS = re.compile(r"измен|помен|смен|исправ|друг|нов")
_WANT_WORDS = re.compile(r"хочу|оформ|прошу|нужно|надо")
_NEW_ADDRESS = re.compile(r"адрес[а-яё]*\b.*?\sна\s+(.{5,300})$", re.IGNORECASE | re.DOTALL)
_CONFIRM_WORDS = re.compile(r"^\s*(да|подтверждаю|согласен|согласна|ок|окей)\b")
_GREETING = re.compile(r"^(здравствуй|привет|добр|hello|hi)")
_THANKS = re.compile(r"спасибо|благодар")
_WORD = re.compile(r"[a-zа-яё0-9]+")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
# The summary request's material starts so (bot.engine.summary); a turn's last step
# has no tools too.
_SUMMARY_MATERIAL_START = "<previous_summary>"

ASK_ORDER_NUMBER = "Подскажите, пожалуйста, номер заказа: четыре цифры, например 8041."
ASK_ORDER_NUMBER_TO_CANCEL = (
    "Чтобы отменить заказ, напишите, пожалуйста, номер заказа: четыре цифры, например 8042."
)
ASK_ORDER_NUMBER_AND_ADDRESS = (
    "Чтобы изменить адрес доставки, напишите, пожалуйста, номер заказа и новый адрес, "
    "например: «поменяйте адрес доставки заказа 8042 на ул. Ленина, 5»."
)
_ASKS = (ASK_ORDER_NUMBER, ASK_ORDER_NUMBER_TO_CANCEL, ASK_ORDER_NUMBER_AND_ADDRESS)
NOTHING_MAPPED = (
    "Это демо-режим: я отвечаю по ключевым словам, без языковой модели. Могу подсказать "
    "статус заказа (напишите номер из четырёх цифр), условия возврата, доставки и оплаты, "
    "найти товар в каталоге или назвать часы работы поддержки."
)
PRESS_THE_BUTTON = "Чтобы подтвердить действие, нажмите кнопку «Подтвердить» на карточке выше."


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


def _describe_data(data: dict[str, Any]) -> str:
    """A tool the demo has no words for: its result's data as JSON."""
    return "Результат: " + json.dumps(data, ensure_ascii=False)[:1500]


def _describe_proposal(data: dict[str, Any]) -> str:
    if data.get("status") == "awaiting_confirmation":
        return "Проверьте, пожалуйста, карточку ниже и нажмите «Подтвердить», если всё верно."
    return "Готово."


def _describe_order(data: dict[str, Any]) -> str:
    line = f"Заказ {data['order_id']}: {data['status_text']}."
    if data.get("delivery_estimate"):
        line += f" Ожидаемая дата доставки: {data['delivery_estimate']}."
    return line


def _describe_return_policy(data: dict[str, Any]) -> str:
    if not data.get("found"):
        return (
            f"Для товара «{data['product']}» отдельных условий возврата нет: "
            "уточните их у сотрудников поддержки в часы работы."
        )
    return (
        f"Товар «{data['product']}» можно вернуть в течение {data['return_days']} дней. "
        f"{data['conditions']}"
    )


def _describe_products(data: dict[str, Any]) -> str:
    items = data.get("items") or []
    if not items:
        return "В каталоге ничего не нашлось."
    lines = [
        f"• {item['name']} — {item['price_rub']} ₽, "
        + ("в наличии" if item["in_stock"] else "нет в наличии")
        for item in items[:3]
    ]
    return "Нашлось в каталоге:\n" + "\n".join(lines)


def _describe_articles(data: dict[str, Any]) -> str:
    results = data.get("results") or []
    if not results:
        return (
            "В справочном центре нет статьи об этом, и гадать я не буду. Сотрудники "
            "поддержки ответят на этот вопрос в этом чате в рабочие часы."
        )
    top = results[0]
    source = f"«{top['title']}»" + (f" ({top['url']})" if top.get("url") else "")
    return f"Вот что сказано в статье {source}:\n{top['snippet']}"


def _describe_hours(data: dict[str, Any]) -> str:
    days = [
        f"{day['day']}: {day['opens']}–{day['closes']}"
        if day["opens"]
        else f"{day['day']}: выходной"
        for day in data.get("schedule", [])
    ]
    state = "Сейчас поддержка работает." if data.get("open_now") else "Сейчас поддержка закрыта."
    return f"{state} График ({data.get('timezone')}): " + "; ".join(days) + "."


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoToolRole:
    """A shipped tool the demo model has rules for: its role and how it retells a result."""

    role: Role
    describe: Callable[[dict[str, Any]], str]


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
customer's message names it (see the module's docstring).
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineDemoKnowledge:
    """What the demo model knows of the shop, handed over by the composition root.

    The tools it may ask for (``tools``, as registered; ``write_tools`` among them
    are the ones the customer confirms), the shipped tool in each role, the
    products that have a return policy, and the catalogue's texts (names and
    categories) it recognises in a question. With a help-center tool, a question
    no rule covers goes to the help center. Build it with :meth:`learn`.
    """

    return_policy_products: tuple[str, ...]
    catalogue_texts: tuple[str, ...]
    tools: tuple[str, ...] = ()
    write_tools: frozenset[str] = frozenset()
    roles: Mapping[Role, str] = field(default_factory=dict)

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
        names = tuple(tool_names)
        return cls(
            return_policy_products=return_policy_products,
            catalogue_texts=catalogue_texts,
            tools=names,
            write_tools=frozenset(write_tools),
            roles={DEMO_TOOL_ROLES[name].role: name for name in names if name in DEMO_TOOL_ROLES},
        )

    def tool(self, role: Role) -> str | None:
        """The registered tool playing ``role``, if any."""
        return self.roles.get(role)

    def unknown_tools(self) -> tuple[str, ...]:
        """The tools it has no rule for: called only when the customer's message names them."""
        return tuple(name for name in self.tools if name not in DEMO_TOOL_ROLES)


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
        self._describers: dict[str, Callable[[dict[str, Any]], str]] = {
            name: _describe_proposal if name in knowledge.write_tools else _describe_data
            for name in self._unknown
        }
        for name in knowledge.roles.values():
            self._describers[name] = DEMO_TOOL_ROLES[name].describe
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
        offered = {tool["function"]["name"] for tool in tools}
        if tool_choice == "auto" and offered:
            request = _answered_request(messages, user_text)
            plan = self._named_plan(user_text, tools) or self._plan(request, offered)
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
        if not results and _CONFIRM_WORDS.search(user_text.lower()) and _awaits_button(messages):
            # A typed «да» executes nothing: the application said a card waits for its button.
            return self._result(messages, text=PRESS_THE_BUTTON, tool_calls=())
        return self._result(
            messages, text=_answer(user_text, results, self._describers), tool_calls=()
        )

    def _plan(self, user_text: str, offered: Collection[str]) -> _Plan:
        text = _normalise(user_text)
        write = self._write_plan(text, user_text)
        if write is not None and write[0] in offered:
            # One action at a time, and nothing else in that turn.
            return _Plan((write,))
        tool = self._tools.tool
        calls: list[_Call] = []
        order = _ORDER_NUMBER.search(text)
        if order is not None and (status_tool := tool(Role.ORDER_STATUS)):
            calls.append((status_tool, {"order_id": order.group(1)}))
        product = self._product(text)
        if _RETURN_WORDS.search(text) and product and (policy_tool := tool(Role.RETURN_POLICY)):
            calls.append((policy_tool, {"product": product}))
        if (_HOURS_WORDS.search(text) or _PERSON_WORDS.search(text)) and (
            hours_tool := tool(Role.SUPPORT_HOURS)
        ):
            calls.append((hours_tool, {}))
        words = _WORD.findall(text)
        significant = [word for word in words if len(word) >= 4 and word not in STOP_WORDS]
        mentioned = [_stem(word) for word in significant if _stem(word) in self._catalogue_words]
        help_center = tool(Role.HELP_CENTER)
        # The catalogue for a question about buying, or for product names alone; a question
        # about a product's warranty or care is one for the help center.
        wants_catalogue = _SEARCH_WORDS.search(text) is not None or (
            not calls and (len(mentioned) == len(significant) or help_center is None)
        )
        if mentioned and wants_catalogue and (search_tool := tool(Role.PRODUCT_SEARCH)):
            calls.append((search_tool, {"query": " ".join(dict.fromkeys(mentioned))}))
        if calls:
            return _Plan(tuple(calls))
        if order is None and (ask := self._missing_order_number(text, offered)) is not None:
            return _Plan(ask=ask)
        question = [word for word in words if len(word) >= 3]
        small_talk = (_GREETING.search(text) or _THANKS.search(text)) and len(question) <= 3
        if help_center is not None and len(question) >= 2 and not small_talk:
            # No rule fits: what the shop's own articles say (policies, how-to questions).
            return _Plan(((help_center, {"query": text[:300]}),))
        return _Plan()

    def _missing_order_number(self, text: str, offered: Collection[str]) -> str | None:
        """What to ask for when the customer wants something of an order but gave no number."""
        tool = self._tools.tool
        if _CANCEL_WORDS.search(text) and tool(Role.CANCEL_ORDER) in offered:
            return ASK_ORDER_NUMBER_TO_CANCEL
        if (
            _ADDRESS_WORDS.search(text)
            and _CHANGE_WORDS.search(text)
            and tool(Role.CHANGE_ADDRESS) in offered
        ):
            return ASK_ORDER_NUMBER_AND_ADDRESS
        about_an_order = _ORDER_WORDS.search(text) and _ORDER_STATE_WORDS.search(text)
        if (about_an_order or _TRACKING_WORDS.search(text)) and tool(Role.ORDER_STATUS) in offered:
            return ASK_ORDER_NUMBER
        return None

    def _product(self, text: str) -> str | None:
        """The product the customer names: one with a policy, else words of the catalogue.

        Never a generic word («товар», «деньги»): only what the shop's catalogue or its
        return policies name, as the customer wrote it («электрический чайник»).
        """
        policy = next((p for p in self._policy_products if _stem(p) in text), None)
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

    def _write_plan(self, text: str, user_text: str) -> _Call | None:
        """A plain request to cancel, return or re-address an order, as its write tool's call."""
        order = _ORDER_NUMBER.search(text)
        if order is None:
            return None
        order_id = order.group(1)
        tool = self._tools.tool
        address = _NEW_ADDRESS.search(user_text)
        if address is not None and (change_tool := tool(Role.CHANGE_ADDRESS)) is not None:
            return (change_tool, {"order_id": order_id, "address": address.group(1).strip(" .")})
        if _CANCEL_WORDS.search(text) and (cancel_tool := tool(Role.CANCEL_ORDER)) is not None:
            return (
                cancel_tool,
                {"order_id": order_id, "reason": "клиент попросил отменить заказ"},
            )
        product = next((p for p in self._policy_products if _stem(p) in text), None)
        if (
            _RETURN_WORDS.search(text)
            and _WANT_WORDS.search(text)
            and product is not None
            and (return_tool := tool(Role.REQUEST_RETURN)) is not None
        ):
            return (
                return_tool,
                {"order_id": order_id, "items": [product], "reason": "клиент хочет вернуть товар"},
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


def _current_turn(messages: Sequence[Message]) -> tuple[str, set[str], list[tuple[str, Any]]]:
    """The last user text, the tools called since, and their decoded results."""
    last_user = max(
        (i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1
    )
    user_text = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
    names_by_id: dict[str, str] = {}
    results: list[tuple[str, Any]] = []
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or ():
            names_by_id[call["id"]] = call["function"]["name"]
        if message.get("role") == "tool":
            name = names_by_id.get(str(message.get("tool_call_id")), "")
            try:
                results.append((name, json.loads(str(message.get("content")))))
            except json.JSONDecodeError:
                results.append((name, None))
    return user_text, set(names_by_id.values()), results


def _answer(
    user_text: str,
    results: list[tuple[str, Any]],
    describers: dict[str, Callable[[dict[str, Any]], str]],
) -> str:
    text = _normalise(user_text)
    if not results:
        if _GREETING.search(text):
            return "Здравствуйте! Чем могу помочь?"
        if _ORDER_WORDS.search(text):
            return ASK_ORDER_NUMBER
        # The one answer that says what this model is: it could not map the message.
        return NOTHING_MAPPED
    parts = [_describe(describers.get(name), payload) for name, payload in results]
    if _PERSON_WORDS.search(text):
        # The customer asked for a person: say when people answer, not just the timetable.
        parts.insert(
            0,
            "Я бот и не могу сам позвать оператора, но сотрудники поддержки на связи "
            "в часы работы.",
        )
    return "\n\n".join(part for part in parts if part)


def _describe(describe: Callable[[dict[str, Any]], str] | None, payload: Any) -> str:
    if not isinstance(payload, dict):
        return "Не удалось прочитать ответ сервиса."
    if not payload.get("ok"):
        message = (payload.get("error") or {}).get("message")
        return str(message or "Сервис не смог ответить на этот вопрос.")
    return describe(payload.get("data") or {}) if describe else "Готово."


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
