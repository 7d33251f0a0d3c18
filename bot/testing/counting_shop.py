"""The demo shop store, remembering every order lookup a tool handler made."""

from pydantic import PrivateAttr

from tools.store import Order, Product, ShopStore


class CountingShop(ShopStore):
    """The demo store with :attr:`order_lookups`: which orders the handlers looked up."""

    _order_lookups: list[str] = PrivateAttr(default_factory=list)

    @property
    def order_lookups(self) -> list[str]:
        """Order ids the order tool's handler looked up, in order."""
        return self._order_lookups

    def find_order(self, order_id: str) -> Order | None:
        """The stored order, as :class:`ShopStore` finds it; the lookup is remembered."""
        self._order_lookups.append(order_id)
        return super().find_order(order_id)


def counting_shop(extra_products: tuple[Product, ...] = ()) -> CountingShop:
    """The demo store (plus ``extra_products`` in its catalogue), counting order lookups."""
    demo = ShopStore.load()
    data = demo.model_dump()
    data["products"] = [p.model_dump() for p in (*demo.products, *extra_products)]
    return CountingShop.model_validate(data)
