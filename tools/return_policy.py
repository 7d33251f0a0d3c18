"""get_return_policy: how long and under which conditions a product can be returned."""

from pydantic import BaseModel, ConfigDict, Field

from tools.registry import RegisteredTool
from tools.store import ShopStore

GET_RETURN_POLICY_TOOL_NAME = "get_return_policy"


class GetReturnPolicyArguments(BaseModel):
    """Arguments the model writes."""

    model_config = ConfigDict(extra="forbid")

    product: str = Field(
        min_length=2,
        max_length=100,
        description=(
            "Название товара без номера заказа, например кофемашина или наушники. "
            "От 2 до 100 символов."
        ),
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
    store: ShopStore,
) -> RegisteredTool[GetReturnPolicyArguments, ReturnPolicyResult]:
    """The return policy tool over ``store``."""

    def get_return_policy(arguments: GetReturnPolicyArguments) -> ReturnPolicyResult:
        product = normalise_product(arguments.product)
        policy = store.find_return_policy(product)
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
        # Reads the in-memory shop store: cheaper on the event loop than in a thread.
        blocking=False,
    )
