"""get_support_hours: the support schedule and whether support is open now."""

from collections.abc import Callable
from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from tools.registry import RegisteredTool, ToolArguments
from tools.shop_data import WEEKDAYS, ShopData, SupportHours
from tools.write_tools import N_

Translate = Callable[[str], str]
"""A catalog's ``gettext`` for the customer's texts here (the day names too)."""


def _as_is(message: str) -> str:
    return message


GET_SUPPORT_HOURS_TOOL_NAME = "get_support_hours"

_DAY_NAMES = {
    "mon": N_("понедельник"),
    "tue": N_("вторник"),
    "wed": N_("среда"),
    "thu": N_("четверг"),
    "fri": N_("пятница"),
    "sat": N_("суббота"),
    "sun": N_("воскресенье"),
}


class GetSupportHoursArguments(ToolArguments):
    """The tool takes no arguments."""


class DayHours(BaseModel):
    """Opening hours of one weekday (``None``: closed)."""

    day: str
    opens: str | None
    closes: str | None


class SupportHoursResult(BaseModel):
    """The schedule and the state right now."""

    timezone: str
    open_now: bool
    local_time: str
    schedule: list[DayHours]
    contact: str


def _hhmm(value: time) -> str:
    return value.strftime("%H:%M")


def open_at(hours: SupportHours, moment: datetime, zone: ZoneInfo | None = None) -> bool:
    """Whether support is open at ``moment`` (aware, any zone) in ``zone`` (default: the shop's)."""
    local = moment.astimezone(zone or ZoneInfo(hours.timezone))
    today = hours.weekly[WEEKDAYS[local.weekday()]]
    return today is not None and today[0] <= local.time().replace(tzinfo=None) < today[1]


def closed_note(
    hours: SupportHours,
    moment: datetime,
    timezone: str | None = None,
    gettext: Translate = _as_is,
) -> str | None:
    """For the customer: when support answers, if it is closed at ``moment`` (else ``None``).

    In ``gettext``'s language (as written, Russian, without one).
    """
    zone = ZoneInfo(timezone or hours.timezone)
    if open_at(hours, moment, zone):
        return None
    days = ", ".join(
        f"{gettext(_DAY_NAMES[day])} {_hhmm(span[0])}–{_hhmm(span[1])}"
        for day in WEEKDAYS
        if (span := hours.weekly[day]) is not None
    )
    note = N_(
        "Сейчас поддержка не работает; сотрудник ответит в рабочие часы ({timezone}): {days}."
    )
    return gettext(note).format(timezone=zone.key, days=days)


def support_hours_at(
    hours: SupportHours, moment: datetime, timezone: str | None = None
) -> SupportHoursResult:
    """The schedule and whether support is open at ``moment``, in ``timezone`` or the shop's."""
    zone = ZoneInfo(timezone or hours.timezone)
    now = moment.astimezone(zone)
    return SupportHoursResult(
        timezone=zone.key,
        open_now=open_at(hours, now, zone),
        local_time=now.strftime("%Y-%m-%d %H:%M"),
        schedule=[
            DayHours(
                day=_DAY_NAMES[day],
                opens=_hhmm(span[0]) if (span := hours.weekly[day]) else None,
                closes=_hhmm(span[1]) if span else None,
            )
            for day in WEEKDAYS
        ],
        contact=hours.contact,
    )


def describe_hours(result: SupportHoursResult, gettext: Translate = _as_is) -> str:
    """For the customer, one line: open now or not, then every day's hours.

    The same words as the offline demo model's answer about the hours, so that
    ``/operator`` and «позовите оператора» read alike without a staff group.
    In ``gettext``'s language (as written, Russian, without one): ``day.day`` is
    one of the day names marked here.
    """
    closed = gettext(N_("выходной"))
    days = [
        f"{gettext(day.day)}: {day.opens}–{day.closes}"
        if day.opens
        else f"{gettext(day.day)}: {closed}"
        for day in result.schedule
    ]
    state = gettext(
        N_("Сейчас поддержка работает.") if result.open_now else N_("Сейчас поддержка закрыта.")
    )
    schedule = N_("{state} График ({timezone}): {days}.")
    return gettext(schedule).format(state=state, timezone=result.timezone, days="; ".join(days))


def build_support_hours_tool(
    shop_data: ShopData,
    timezone: str | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> RegisteredTool[GetSupportHoursArguments, SupportHoursResult]:
    """The support hours tool; ``timezone`` overrides the shop data's, ``clock`` is for tests."""
    hours = shop_data.support_hours
    ZoneInfo(timezone or hours.timezone)  # an unknown zone fails here, not on a question

    def get_support_hours(arguments: GetSupportHoursArguments) -> SupportHoursResult:
        return support_hours_at(hours, clock(), timezone)

    return RegisteredTool(
        name=GET_SUPPORT_HOURS_TOOL_NAME,
        description=(
            "Возвращает часы работы поддержки и открыта ли она сейчас. "
            "Используй для вопросов о графике работы и о том, когда ответит оператор."
        ),
        arguments_model=GetSupportHoursArguments,
        handler=get_support_hours,
        # Reads the in-memory shop data: cheaper on the event loop than in a thread.
        blocking=False,
    )
