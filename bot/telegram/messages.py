"""Every text the customer sees from the bot itself (not the model's answers), in Russian.

Failure texts never contain exception text, class names or traces: only a kind
message chosen by the failure's ``kind`` and the incident code (the turn id)
that support staff look up in the audit stream.
"""

from bot.chat_errors import ChatServiceError
from turn import TurnOutcome

GREETING = (
    "Здравствуйте! Я бот поддержки магазина.\n\n"
    "Я могу:\n"
    "• подсказать статус заказа по его номеру;\n"
    "• найти товар в каталоге и назвать цену;\n"
    "• рассказать об условиях возврата;\n"
    "• подсказать часы работы поддержки.\n\n"
    "Просто напишите свой вопрос, например: «Где мой заказ 1234?»"
)

HELP = (
    "Команды:\n"
    "/start — что умеет бот\n"
    "/help — эта справка\n"
    "/new — начать новый разговор (бот забудет предыдущую переписку)\n"
    "/operator — позвать сотрудника поддержки\n\n"
    "Вопросы пишите обычным текстом."
)

NEW_CONVERSATION = "Начинаем новый разговор. Предыдущую переписку я больше не учитываю."

NON_TEXT = "Пока я понимаю только текстовые сообщения. Пожалуйста, напишите вопрос текстом."

RATE_LIMITED = (
    "Вы пишете слишком часто. Пожалуйста, подождите несколько секунд и отправьте сообщение ещё раз."
)

DAILY_LIMIT = (
    "На сегодня лимит вопросов исчерпан. Пожалуйста, напишите завтра, мы обязательно ответим."
)

QUEUE_FULL = (
    "Я ещё не ответил на ваши предыдущие сообщения. Пожалуйста, дождитесь ответа "
    "и потом напишите снова."
)

UNREADABLE = (
    "Не получилось прочитать это сообщение. Пожалуйста, отправьте его ещё раз обычным текстом."
)

# Descriptions of the commands for the menu (``set_my_commands``).
COMMANDS: tuple[tuple[str, str], ...] = (
    ("start", "Что умеет бот"),
    ("help", "Справка по командам"),
    ("new", "Начать новый разговор"),
)

_FAILURE_BY_KIND: dict[TurnOutcome, str] = {
    TurnOutcome.BAD_INPUT: (
        "Не получилось разобрать сообщение. Попробуйте сформулировать вопрос иначе."
    ),
    TurnOutcome.EMPTY_MESSAGE: "Сообщение пустое. Напишите, пожалуйста, ваш вопрос текстом.",
    TurnOutcome.MESSAGE_TOO_LONG: (
        "Сообщение слишком длинное. Пожалуйста, сократите его и отправьте ещё раз."
    ),
    TurnOutcome.MODEL_UNAVAILABLE: (
        "Сейчас я перегружен и не успел ответить. Пожалуйста, повторите вопрос через минуту."
    ),
    TurnOutcome.BAD_REQUEST: (
        "Запрос получился слишком длинным для обработки. Сократите вопрос "
        "или начните новый разговор командой /new."
    ),
    TurnOutcome.MODEL_ERROR: (
        "Не получилось подготовить ответ. Пожалуйста, переформулируйте вопрос "
        "или попробуйте ещё раз."
    ),
    TurnOutcome.TOOL_FAILURE: (
        "Не удалось получить нужные данные. Пожалуйста, попробуйте ещё раз чуть позже."
    ),
    TurnOutcome.LIMIT: (
        "Вопрос оказался слишком сложным для одного ответа. "
        "Попробуйте разбить его на несколько простых вопросов."
    ),
    TurnOutcome.STORAGE_UNAVAILABLE: (
        "Сервис временно недоступен. Пожалуйста, попробуйте ещё раз через несколько минут."
    ),
    TurnOutcome.BUSY: (
        "Я ещё отвечаю на ваше предыдущее сообщение. Пожалуйста, подождите немного "
        "и повторите вопрос."
    ),
}

_UNEXPECTED = "Что-то пошло не так. Пожалуйста, попробуйте ещё раз чуть позже."


def with_incident_code(text: str, code: str) -> str:
    """``text`` followed by the incident code the customer can quote to support."""
    return f"{text}\n\nКод обращения: {code}. Назовите его поддержке, если проблема повторится."


def failure_message(error: ChatServiceError, incident_code: str) -> str:
    """The kind message for ``error`` (by its most specific known kind) with the code."""
    for cls in type(error).__mro__:
        kind = getattr(cls, "kind", None)
        text = _FAILURE_BY_KIND.get(kind) if isinstance(kind, TurnOutcome) else None
        if text is not None:
            return with_incident_code(text, incident_code)
    return with_incident_code(_UNEXPECTED, incident_code)


def unexpected_failure_message(incident_code: str) -> str:
    """The message for a failure nobody foresaw (a bug): still kind, still with the code."""
    return with_incident_code(_UNEXPECTED, incident_code)


OPERATOR_WAITING = (
    "Я позвал сотрудника поддержки: он ответит здесь, в этом чате. "
    "Пока можно продолжать писать мне."
)
OPERATOR_ALREADY = "Сотрудник поддержки уже подключён к разговору и ответит здесь."
OPERATOR_OFF = (
    "Позвать сотрудника из чата сейчас нельзя. "
    "Спросите меня про часы работы поддержки, и я подскажу, когда она отвечает."
)
FAILED_HANDOFF = "Я позвал сотрудника поддержки: он ответит здесь, в этом чате."

CSAT_QUESTION = "Помогли ли мы вам? Оцените, пожалуйста, от 1 до 5"
"""The satisfaction question, under buttons 1 to 5."""
CSAT_THANKS = "Спасибо за оценку!"
"""What the question becomes once answered (and the press's short answer)."""
CSAT_ALREADY = "Вы уже оценили, спасибо!"
"""A second press's short answer: nothing changes."""
CSAT_CLOSED = "Этот опрос уже закрыт. Спасибо, что заглянули!"
"""A press on an expired or replaced question."""
