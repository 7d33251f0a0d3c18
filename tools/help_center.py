"""search_help_center: the shop's own articles on policies and how-to questions."""

from pydantic import BaseModel

from tools.knowledge.library import HelpCenter
from tools.registry import RegisteredTool, ResultSummary, ToolArguments, text_argument
from turn import TurnContext

SEARCH_HELP_CENTER_TOOL_NAME = "search_help_center"


class SearchHelpCenterArguments(ToolArguments):
    """Arguments the model writes."""

    query: str = text_argument(
        "Вопрос клиента своими словами, без номера заказа и личных данных, "
        "например «как вернуть деньги за заказ».",
        min_length=2,
        max_length=300,
    )


class HelpCenterArticle(BaseModel):
    """One passage found: the article it is from and the text to answer with."""

    article_id: str
    title: str
    url: str | None
    snippet: str
    # The article's language: the customer's, or another when the topic has no article in it.
    lang: str


class SearchHelpCenterResult(BaseModel):
    """The passages found, best first; an empty list when no article answers."""

    results: list[HelpCenterArticle]


def build_search_help_center_tool(
    center: HelpCenter,
) -> RegisteredTool[SearchHelpCenterArguments, SearchHelpCenterResult]:
    """The help-center search tool over ``center`` (its current index at each call)."""

    def search_help_center(
        arguments: SearchHelpCenterArguments, context: TurnContext
    ) -> SearchHelpCenterResult:
        # The conversation's language is preferred; without one (a front end that decides
        # none), the question's own script decides.
        return SearchHelpCenterResult(
            results=[
                HelpCenterArticle(
                    article_id=hit.article_id,
                    title=hit.title,
                    url=hit.url,
                    snippet=hit.snippet,
                    lang=hit.lang,
                )
                for hit in center.search(arguments.query, language=context.language)
            ]
        )

    return RegisteredTool(
        name=SEARCH_HELP_CENTER_TOOL_NAME,
        description=(
            "Ищет ответ в статьях справочного центра магазина: доставка, оплата, возврат и "
            "гарантия, изменение и отмена заказа, аккаунт, промокоды, сертификаты, бонусы, "
            "повреждённые посылки, покупки для юрлиц, контакты. Используй для вопросов о "
            "правилах и о том, как что-то сделать. Пустой results: статьи на эту тему нет."
        ),
        arguments_model=SearchHelpCenterArguments,
        handler=search_help_center,
        # In a worker thread: over thousands of articles one search takes 150 ms or more,
        # which on the event loop would stall every other chat of the process.
        blocking=True,
        result_summary=lambda result: ResultSummary(
            count=len(result.results),
            top_id=result.results[0].article_id if result.results else None,
        ),
    )
