"""search_products: catalogue items by name or category, with price and availability."""

from pydantic import BaseModel

from tools.registry import RegisteredTool, ToolArguments, text_argument
from tools.shop_data import ShopData

SEARCH_PRODUCTS_TOOL_NAME = "search_products"
MAX_RESULTS = 5


class SearchProductsArguments(ToolArguments):
    """Arguments the model writes."""

    query: str = text_argument(
        "Что ищет клиент: название, модель или категория товара.", min_length=2, max_length=100
    )


class ProductItem(BaseModel):
    """One matching catalogue item."""

    sku: str
    name: str
    category: str
    price_rub: int
    in_stock: bool


class SearchProductsResult(BaseModel):
    """At most a few matches, best first."""

    query: str
    items: list[ProductItem]
    total_found: int


def _stem(word: str) -> str:
    # Russian nouns change their endings ("наушники", "наушников"); comparing
    # the first letters of a word is a crude but dependable match for a small catalogue.
    return word[:5] if len(word) > 5 else word


def build_product_search_tool(
    shop_data: ShopData,
) -> RegisteredTool[SearchProductsArguments, SearchProductsResult]:
    """The catalogue search tool over ``shop_data``."""

    def search_products(arguments: SearchProductsArguments) -> SearchProductsResult:
        query = " ".join(arguments.query.lower().split())
        stems = {_stem(word) for word in query.split() if len(word) >= 2}
        scored: list[tuple[int, int, ProductItem]] = []
        for position, product in enumerate(shop_data.products):
            haystack = f"{product.name} {product.category} {product.sku}".lower()
            words = {_stem(word) for word in haystack.split()}
            score = sum(1 for stem in stems if stem in words or stem in haystack)
            if score:
                item = ProductItem.model_validate(product.model_dump())
                scored.append((-score, position, item))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        return SearchProductsResult(
            query=query,
            items=[item for _, _, item in scored[:MAX_RESULTS]],
            total_found=len(scored),
        )

    return RegisteredTool(
        name=SEARCH_PRODUCTS_TOOL_NAME,
        description=(
            "Ищет товары в каталоге магазина по названию или категории и возвращает "
            "цену и наличие. Используй, когда клиент спрашивает, есть ли товар, "
            "сколько он стоит или что можно выбрать."
        ),
        arguments_model=SearchProductsArguments,
        handler=search_products,
        # Reads the in-memory shop data: cheaper on the event loop than in a thread.
        blocking=False,
    )
