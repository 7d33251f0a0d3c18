"""A deterministic local model for demos and offline tests: no network, no key.

It reads the customer's words, asks for the tool a real model would pick (an
order number, a product, a question about hours or the catalogue), and after
the tool results writes a short Russian answer from their JSON. Its model name
is ``offline-demo`` so that nobody mistakes it for a real model.

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
from typing import Any

from bot.llm.streaming import tell_text
from bot.llm.tokens import estimate_messages_tokens, estimate_text_tokens
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
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

_ORDER_NUMBER = re.compile(r"(?<!\d)(\d{4})(?!\d)")
_HOURS_WORDS = re.compile(r"час[аы]? работы|график|режим работы|когда (вы )?работа|открыт|выходн")
_PERSON_WORDS = re.compile(r"оператор|человек|сотрудник|менеджер|живой")
_ORDER_WORDS = re.compile(r"заказ|посылк")
_SEARCH_WORDS = re.compile(
    r"сколько стоит|цен[аыу]|есть ли|в наличии|найд|найти|подобрать|купить|каталог|ищу"
)
_RETURN_WORDS = re.compile(r"верну|возвра|сдать")
_RETURNED_THING = re.compile(r"(?:верну|возвра|сдать)[а-яё]*\s+(?:ли\s+)?([а-яё]{3,})")
_CANCEL_WORDS = re.compile(r"отмен")
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


def _stem(word: str) -> str:
    return word[:5] if len(word) > 5 else word


DEMO_TOOL_ROLES: Mapping[str, str] = {
    GET_ORDER_STATUS_TOOL_NAME: "order_status_tool",
    GET_RETURN_POLICY_TOOL_NAME: "return_policy_tool",
    SEARCH_PRODUCTS_TOOL_NAME: "product_search_tool",
    GET_SUPPORT_HOURS_TOOL_NAME: "support_hours_tool",
    SEARCH_HELP_CENTER_TOOL_NAME: "help_center_tool",
    CANCEL_ORDER_TOOL_NAME: "cancel_order_tool",
    REQUEST_RETURN_TOOL_NAME: "request_return_tool",
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME: "change_address_tool",
}
"""The shipped tools the demo model has rules for: tool name -> its role (a field below).

A registered tool not named here needs no entry: the model calls it when the
customer's message names it (see the module's docstring).
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineDemoKnowledge:
    """What the demo model knows of the shop, handed over by the composition root.

    The tools it may ask for (``tools``, as registered; ``write_tools`` among them
    are the ones the customer confirms), the role each shipped tool plays, the
    products that have a return policy, and the catalogue's texts (names and
    categories) it recognises in a question. With ``help_center_tool``, a question
    no rule covers goes to the help center. Build it with :meth:`learn`.
    """

    return_policy_products: tuple[str, ...]
    catalogue_texts: tuple[str, ...]
    tools: tuple[str, ...] = ()
    write_tools: frozenset[str] = frozenset()
    order_status_tool: str | None = None
    return_policy_tool: str | None = None
    product_search_tool: str | None = None
    support_hours_tool: str | None = None
    help_center_tool: str | None = None
    # The write tools (actions the customer confirms), when the application offers them.
    cancel_order_tool: str | None = None
    request_return_tool: str | None = None
    change_address_tool: str | None = None

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
        roles = {DEMO_TOOL_ROLES[name]: name for name in names if name in DEMO_TOOL_ROLES}
        return cls(
            return_policy_products=return_policy_products,
            catalogue_texts=catalogue_texts,
            tools=names,
            write_tools=frozenset(write_tools),
            **roles,
        )

    def unknown_tools(self) -> tuple[str, ...]:
        """The tools it has no rule for: called only when the customer's message names them."""
        return tuple(name for name in self.tools if name not in DEMO_TOOL_ROLES)


class OfflineChatModel:
    """Speaks the same client interface as the OpenAI client, deterministically."""

    def __init__(self, knowledge: OfflineDemoKnowledge) -> None:
        self._tools = knowledge
        self._policy_products = list(knowledge.return_policy_products)
        self._catalogue_words = sorted(
            {
                _stem(word)
                for text in knowledge.catalogue_texts
                for word in _WORD.findall(text.lower())
                if len(word) >= 4
            }
        )
        self._unknown = frozenset(knowledge.unknown_tools())
        self._describers: dict[str, Callable[[dict[str, Any]], str]] = {}
        for unknown in self._unknown:
            self._describers[unknown] = (
                _describe_proposal if unknown in knowledge.write_tools else _describe_data
            )
        for name, describe in (
            (knowledge.order_status_tool, _describe_order),
            (knowledge.return_policy_tool, _describe_return_policy),
            (knowledge.product_search_tool, _describe_products),
            (knowledge.support_hours_tool, _describe_hours),
            (knowledge.help_center_tool, _describe_articles),
        ):
            if name is not None:
                self._describers[name] = describe
        for write in (
            knowledge.cancel_order_tool,
            knowledge.request_return_tool,
            knowledge.change_address_tool,
        ):
            if write is not None:
                self._describers[write] = _describe_proposal
        self._ids = itertools.count(1)

    @property
    def knowledge(self) -> OfflineDemoKnowledge:
        """What this model was told of the shop."""
        return self._tools

    @property
    def model_name(self) -> str:
        """Always ``offline-demo``."""
        return OFFLINE_MODEL_NAME

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
            plan = self._named_plan(user_text, tools) or self._plan(user_text, offered)
            for name, arguments in plan:
                if name in offered and name not in called:
                    call = ToolCall(
                        id=f"call_offline_{next(self._ids)}",
                        name=name,
                        arguments=json.dumps(arguments, ensure_ascii=False),
                    )
                    return self._result(messages, text=None, tool_calls=(call,))
        if not results and _CONFIRM_WORDS.search(user_text.lower()) and _awaits_button(messages):
            # A typed «да» executes nothing: the application said a card waits for its button.
            return self._result(messages, text=PRESS_THE_BUTTON, tool_calls=())
        return self._result(
            messages, text=_answer(user_text, results, self._describers), tool_calls=()
        )

    def _plan(
        self, user_text: str, offered: Collection[str] = ()
    ) -> list[tuple[str, dict[str, Any]]]:
        text = user_text.lower()
        write = self._write_plan(user_text)
        if write is not None and write[0] in offered:
            # One action at a time, and nothing else in that turn.
            return [write]
        plan: list[tuple[str, dict[str, Any]]] = []
        if (match := _ORDER_NUMBER.search(text)) and self._tools.order_status_tool:
            plan.append((self._tools.order_status_tool, {"order_id": match.group(1)}))
        if _RETURN_WORDS.search(text) and self._tools.return_policy_tool:
            product = next((p for p in self._policy_products if _stem(p) in text), None)
            if product is None and (thing := _RETURNED_THING.search(text)):
                # A product without its own policy still gets the policy answer, not a search.
                product = thing.group(1)
            if product is not None:
                plan.append((self._tools.return_policy_tool, {"product": product}))
        if (_HOURS_WORDS.search(text) or _PERSON_WORDS.search(text)) and (
            self._tools.support_hours_tool
        ):
            plan.append((self._tools.support_hours_tool, {}))
        words = [_stem(word) for word in _WORD.findall(text) if len(word) >= 4]
        mentioned = [word for word in words if word in self._catalogue_words]
        if (
            mentioned
            and (_SEARCH_WORDS.search(text) or not plan)
            and self._tools.product_search_tool
        ):
            plan.append(
                (self._tools.product_search_tool, {"query": " ".join(dict.fromkeys(mentioned))})
            )
        question = [word for word in _WORD.findall(text) if len(word) >= 3]
        greeting_only = _GREETING.search(text) is not None and len(question) <= 3
        greeting_only |= _THANKS.search(text) is not None and len(question) <= 3
        if not plan and self._tools.help_center_tool and len(question) >= 2 and not greeting_only:
            # No rule fits: what the shop's own articles say (policies, how-to questions).
            plan.append((self._tools.help_center_tool, {"query": " ".join(text.split())[:300]}))
        return plan

    def _named_plan(
        self, user_text: str, tools: Sequence[ToolDefinition]
    ) -> list[tuple[str, dict[str, Any]]]:
        """An offered tool without a rule, named in the message, with arguments from the rest."""
        words = user_text.split()
        for tool in tools:
            name = tool["function"]["name"]
            if name in self._unknown and name in words:
                rest = " ".join(word for word in words if word != name)
                schema = tool["function"].get("parameters") or {}
                return [(name, _arguments_from_text(schema, rest))]
        return []

    def _write_plan(self, user_text: str) -> tuple[str, dict[str, Any]] | None:
        """A plain request to cancel, return or re-address an order, as its write tool's call."""
        text = user_text.lower()
        order = _ORDER_NUMBER.search(text)
        if order is None:
            return None
        order_id = order.group(1)
        address = _NEW_ADDRESS.search(user_text)
        if address is not None and self._tools.change_address_tool is not None:
            return (
                self._tools.change_address_tool,
                {"order_id": order_id, "address": address.group(1).strip(" .")},
            )
        if _CANCEL_WORDS.search(text) and self._tools.cancel_order_tool is not None:
            return (
                self._tools.cancel_order_tool,
                {"order_id": order_id, "reason": "клиент попросил отменить заказ"},
            )
        product = next((p for p in self._policy_products if _stem(p) in text), None)
        if (
            _RETURN_WORDS.search(text)
            and _WANT_WORDS.search(text)
            and product is not None
            and self._tools.request_return_tool is not None
        ):
            return (
                self._tools.request_return_tool,
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


PRESS_THE_BUTTON = "Чтобы подтвердить действие, нажмите кнопку «Подтвердить» на карточке выше."


def _awaits_button(messages: Sequence[Message]) -> bool:
    return any(
        message.get("role") == "developer" and "ждёт решения клиента" in str(message.get("content"))
        for message in messages
    )


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
    text = user_text.strip().lower()
    if not results:
        if _GREETING.search(text):
            return "Здравствуйте! Чем могу помочь?"
        if _ORDER_WORDS.search(text):
            return "Подскажите, пожалуйста, номер заказа: четыре цифры, например 8041."
        return (
            "Я демо-режим бота без подключения к языковой модели. Я могу подсказать статус "
            "заказа (напишите номер из четырёх цифр), условия возврата товара, найти товар "
            "в каталоге или назвать часы работы поддержки."
        )
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
