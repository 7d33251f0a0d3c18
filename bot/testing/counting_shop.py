"""The demo shop data, remembering every order lookup a tool handler made."""

from pydantic import PrivateAttr

from bot.settings import DEMO_SHOP_DATA
from tools.shop_data import Order, Product, ShopData


class CountingShop(ShopData):
    """The demo shop data with :attr:`order_lookups`: which orders the handlers looked up."""

    _order_lookups: list[str] = PrivateAttr(default_factory=list)

    @property
    def order_lookups(self) -> list[str]:
        """Order ids the order tool's handler looked up, in order."""
        return self._order_lookups

    def find_order(self, order_id: str) -> Order | None:
        """The stored order, as :class:`ShopData` finds it; the lookup is remembered."""
        self._order_lookups.append(order_id)
        return super().find_order(order_id)


def counting_shop(extra_products: tuple[Product, ...] = ()) -> CountingShop:
    """The demo shop data (plus ``extra_products`` in its catalogue), counting order lookups."""
    demo = ShopData.load(DEMO_SHOP_DATA)
    data = demo.model_dump()
    data["products"] = [p.model_dump() for p in (*demo.products, *extra_products)]
    return CountingShop.model_validate(data)
