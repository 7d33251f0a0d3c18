"""The shop data the built-in tools read: a JSON export (``TOOL_DATA_PATH``; a demo ships)."""

from datetime import time
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

ORDER_ID_PATTERN = r"^\d{4}$"
"""An order number: exactly four digits."""

CUSTOMER_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
"""A shop's customer id: what the application passes as the bound ``customer_id``."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OrderDetails(BaseModel):
    """What the customer may see of an order: its number, state, delivery estimate and items.

    The shop data's order, the shop backend's view of it and the order status tool's
    result all start with these fields.
    """

    model_config = ConfigDict(frozen=True)

    order_id: str = Field(pattern=ORDER_ID_PATTERN)
    status: str
    status_text: str
    updated_at: str
    delivery_estimate: str | None = None
    items: tuple[str, ...] = ()


class Order(OrderDetails, _Frozen):
    """One order; ``owner_user_id`` (a Telegram user id) restricts who may see it."""

    owner_user_id: int | None = None


class ShopCustomer(_Frozen):
    """A customer of the shop: its own id and the phone number the account was opened with.

    In the demo a customer's id is the number an order's ``owner_user_id`` names, so
    the demo shop's MCP server shows a linked customer the orders the built-in tools
    show that Telegram user.
    """

    customer_id: str = Field(pattern=CUSTOMER_ID_PATTERN)
    name: str = Field(min_length=1)
    phone: str = Field(pattern=r"^\+?\d{10,15}$")


class ReturnPolicy(_Frozen):
    """Return terms for one product kind."""

    product: str
    return_days: int = Field(gt=0)
    conditions: str


class Product(_Frozen):
    """One catalogue item."""

    sku: str
    name: str
    category: str
    price_rub: int = Field(ge=0)
    in_stock: bool


class SupportHours(_Frozen):
    """Weekly opening hours in the shop's time zone (``None``: closed that day)."""

    timezone: str
    weekly: dict[Weekday, tuple[time, time] | None]
    contact: str

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, timezone: str) -> str:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {timezone!r}") from error
        return timezone

    @field_validator("weekly")
    @classmethod
    def _every_day_listed(
        cls, weekly: dict[Weekday, tuple[time, time] | None]
    ) -> dict[Weekday, tuple[time, time] | None]:
        missing = [day for day in WEEKDAYS if day not in weekly]
        if missing:
            raise ValueError(f"support hours miss days: {', '.join(missing)}")
        return weekly


class ShopData(_Frozen):
    """Everything the tools can look up, loaded once at start."""

    orders: tuple[Order, ...]
    return_policies: tuple[ReturnPolicy, ...]
    products: tuple[Product, ...]
    support_hours: SupportHours
    # Older shop data files have no customers: account linking then finds nobody.
    customers: tuple[ShopCustomer, ...] = ()

    @classmethod
    def load(cls, path: Path) -> "ShopData":
        """Read and validate a shop data file (raises ``OSError`` or ``ValidationError``)."""
        return cls.model_validate_json(path.read_bytes())

    def find_order(self, order_id: str) -> Order | None:
        """The order with that number, if any."""
        return next((order for order in self.orders if order.order_id == order_id), None)

    def find_customer_by_phone(self, phone: str) -> ShopCustomer | None:
        """The customer whose phone number is ``phone`` (compared as digits), if any."""
        wanted = phone_digits(phone)
        if not wanted:
            return None
        return next((c for c in self.customers if phone_digits(c.phone) == wanted), None)

    def find_return_policy(self, product: str) -> ReturnPolicy | None:
        """The policy for a normalised product name, if any."""
        return next((p for p in self.return_policies if p.product == product), None)


def phone_digits(phone: str) -> str:
    """A phone number as its digits, a Russian trunk ``8`` as ``7``: ``+7 916…`` is ``7916…``.

    Telegram sends a shared contact's number with or without ``+``; a shop may
    keep it with spaces or dashes.
    """
    digits = "".join(char for char in phone if char.isdigit())
    if len(digits) == 11 and digits.startswith("8"):
        return "7" + digits[1:]
    return digits
