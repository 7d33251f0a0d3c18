"""What a draft says while tools run: the tool's purpose, never its arguments."""

from collections.abc import Sequence
from typing import Final

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

TOOL_LABELS: Final[dict[str, str]] = {
    GET_ORDER_STATUS_TOOL_NAME: "Проверяю заказ…",
    SEARCH_PRODUCTS_TOOL_NAME: "Ищу в каталоге…",
    GET_RETURN_POLICY_TOOL_NAME: "Смотрю условия возврата…",
    GET_SUPPORT_HOURS_TOOL_NAME: "Смотрю часы работы поддержки…",
    SEARCH_HELP_CENTER_TOOL_NAME: "Ищу в справке…",
    REQUEST_HUMAN_AGENT_TOOL_NAME: "Зову сотрудника…",
    CANCEL_ORDER_TOOL_NAME: "Готовлю отмену заказа…",
    REQUEST_RETURN_TOOL_NAME: "Готовлю возврат…",
    CHANGE_DELIVERY_ADDRESS_TOOL_NAME: "Готовлю смену адреса…",
}
DEFAULT_LABEL: Final = "Проверяю данные…"
"""For a tool without its own label (a name the model made up, a new tool)."""


def tools_label(names: Sequence[str]) -> str:
    """The draft text while ``names`` run: the first known tool's purpose."""
    return next((TOOL_LABELS[name] for name in names if name in TOOL_LABELS), DEFAULT_LABEL)
