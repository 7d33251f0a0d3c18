"""The openai SDK client, building a chat request from the one before it.

For every request the SDK merges its headers from several sources into a new httpx2
``Headers``, joins and parses the URL and normalises the timeout; the HTTP client then
parses URL and headers once more (about 75 µs a request, bench/README.md). Our chat
requests differ from one another only in their body and retry count, so once the SDK
has built one, the next is a copy of it with its own body and retry count. Whatever
could change what the SDK builds (per-request headers, query or files, a request
timeout, extra body, a new API key or timeout on the client, an idempotency header,
cookies held by the HTTP client) goes through the SDK's own builder. A test checks that
both builders agree, so an SDK upgrade that changes what it sends fails there first.
"""

from dataclasses import dataclass
from typing import Any, Final

import httpx2
from openai import AsyncOpenAI, NotGiven
from openai._models import FinalRequestOptions

from bot.llm.http_client import ChatHttpClient

_RETRY_COUNT_HEADER: Final = "x-stainless-retry-count"
# Set per request: the retry count by the SDK, the length by httpx2 from the body.
_PER_REQUEST_HEADERS: Final = frozenset({_RETRY_COUNT_HEADER, "content-length"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Template:
    """What the SDK built for a request with ``key``, less what each request sets."""

    key: tuple[object, ...]
    method: str
    url: httpx2.URL
    headers: tuple[tuple[str, str], ...]
    extensions: dict[str, Any]


class TemplatedAsyncOpenAI(AsyncOpenAI):
    """``AsyncOpenAI`` whose plain JSON posts after the first reuse what the SDK built.

    Takes the :class:`ChatHttpClient` it sends through as ``http_client``; retries,
    error types, headers and timeouts stay the SDK's.
    """

    def __init__(self, *, http_client: ChatHttpClient, **kwargs: Any) -> None:
        super().__init__(http_client=http_client, **kwargs)
        self._chat_http = http_client
        self._template: _Template | None = None

    @property
    def user_agent(self) -> str:
        """The SDK's User-Agent, naming the SDK's class (providers see the SDK, not ours)."""
        return super().user_agent.replace(type(self).__name__, AsyncOpenAI.__name__, 1)

    def _build_request(
        self, options: FinalRequestOptions, *, retries_taken: int = 0
    ) -> httpx2.Request:
        body = options.json_data
        key = self._template_key(options)
        if key is None or not isinstance(body, bytes):
            return super()._build_request(options, retries_taken=retries_taken)
        template = self._template
        if template is None or template.key != key:
            built = super()._build_request(options, retries_taken=retries_taken)
            self._template = _template_of(built, key, body, options.idempotency_key)
            return built
        return httpx2.Request(
            template.method,
            template.url,
            content=body,
            headers=[*template.headers, (_RETRY_COUNT_HEADER, str(retries_taken))],
            extensions=dict(template.extensions),
        )

    def _template_key(self, options: FinalRequestOptions) -> tuple[object, ...] | None:
        """What the built request depends on; ``None`` when it needs the SDK's builder."""
        if (
            options.extra_json is not None
            or options.headers
            or options.params
            or options.files is not None
            or options.content is not None
            or not isinstance(options.timeout, NotGiven)
            or self._chat_http.cookies
        ):
            return None
        return (options.method, options.url, self.api_key, self.timeout)


def _template_of(
    built: httpx2.Request, key: tuple[object, ...], body: bytes, idempotency_key: str | None
) -> _Template | None:
    """The template of ``built``; ``None`` when it carries a value of its own request."""
    headers = tuple(
        item for item in built.headers.multi_items() if item[0] not in _PER_REQUEST_HEADERS
    )
    if built.content != body or (
        idempotency_key is not None and any(value == idempotency_key for _, value in headers)
    ):
        return None
    return _Template(
        key=key,
        method=built.method,
        url=built.url,
        headers=headers,
        extensions=dict(built.extensions),
    )
