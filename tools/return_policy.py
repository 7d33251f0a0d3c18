"""get_return_policy: how long and under which conditions a product can be returned."""

from pydantic import BaseModel

from tools.registry import RegisteredTool, ToolArguments, text_argument
from tools.shop_data import ShopData

GET_RETURN_POLICY_TOOL_NAME = "get_return_policy"


class GetReturnPolicyArguments(ToolArguments):
    """Arguments the model writes."""

    product: str = text_argument(
        "Название товара без номера заказа, например кофемашина или наушники.",
        min_length=2,
        max_length=100,
    )


class ReturnPolicyResult(BaseModel):
    """The policy found, or ``found: false``."""

    product: str
    found: bool
    return_days: int | None
    conditions: str


def normalise_product(product: str) -> str:
    """Lower case, single spaces: 'Кофемашина ' and 'кофемашина' are one product."""
    return " ".join(product.lower().split())


def build_return_policy_tool(
    shop_data: ShopData,
) -> RegisteredTool[GetReturnPolicyArguments, ReturnPolicyResult]:
    """The return policy tool over ``shop_data``."""

    def get_return_policy(arguments: GetReturnPolicyArguments) -> ReturnPolicyResult:
        product = normalise_product(arguments.product)
        policy = shop_data.find_return_policy(product)
        if policy is None:
            return ReturnPolicyResult(
                product=product,
                found=False,
                return_days=None,
                conditions="Отдельная политика для товара не найдена.",
            )
        return ReturnPolicyResult(
            product=product,
            found=True,
            return_days=policy.return_days,
            conditions=policy.conditions,
        )

    return RegisteredTool(
        name=GET_RETURN_POLICY_TOOL_NAME,
        description=(
            "Возвращает срок и условия возврата для указанного товара. "
            "Используй для вопросов о возможности, сроке или условиях возврата."
        ),
        arguments_model=GetReturnPolicyArguments,
        handler=get_return_policy,
        # Reads the in-memory shop data: cheaper on the event loop than in a thread.
        blocking=False,
    )
