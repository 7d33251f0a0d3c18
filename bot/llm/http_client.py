"""The HTTP client the openai SDK sends through: aiohttp, fewer layers per request.

The SDK keeps everything it is trusted for (retries with back-off, ``Retry-After``,
error types, headers, timeouts); this module only changes how a built request
travels. Measured on the engine's two-tool turn (bench/README.md, issue 14), the
SDK's own aiohttp client spent close to half of each request rebuilding things
that are the same every time (the URL parsed again, the client's headers merged
into a new ``Headers``) and streaming a body that is always read whole.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, Final

import aiohttp
import httpx2
from aiohttp_socks import ProxyConnector, ProxyError
from openai import DefaultAioHttpClient

DEFAULT_KEEPALIVE_SECONDS: Final = 5.0
"""How long an idle connection to the provider is kept (httpx2's default)."""

# httpx2's own logger: a request sent the short way is logged as httpx2 logs it.
_httpx2_logger = logging.getLogger("httpx2")


class ChatTransport(httpx2.AsyncBaseTransport):
    """One aiohttp request per httpx2 request; the response body read whole.

    Chat completions are small, so a plain response carries its whole body (no
    stream wrappers for httpx2 to iterate later); a streamed one (``text/event-stream``)
    is handed over as an :class:`EventStream`. aiohttp's failures become
    httpx2's, so the SDK retries and reports them as it does over its own transports:
    a refused or dropped connection is a connection error, only a real timeout is a
    timeout. A proxy that refuses the tunnel stays an ``aiohttp_socks.ProxyError``.
    """

    def __init__(self, session_factory: Callable[[], aiohttp.ClientSession]) -> None:
        self._session_factory = session_factory
        self._session: aiohttp.ClientSession | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` and return its response with the whole body."""
        if self._session is None:
            # Built on the first request, inside the running event loop.
            self._session = self._session_factory()
        timeouts = request.extensions.get("timeout", {})
        # A request httpx2 builds to follow a redirect carries its body as a stream.
        body = await request.aread() or None
        try:
            response = await self._session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=body,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=aiohttp.ClientTimeout(
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                    connect=timeouts.get("pool"),
                ),
            )
            status, headers, reason = response.status, response.raw_headers, response.reason
            extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
            if reason:
                extensions["reason_phrase"] = reason.encode()
            if status == 200 and response.content_type == "text/event-stream":
                # A streamed completion: its events are read as they come, and every
                # read is still bounded by the read timeout.
                return httpx2.Response(
                    status_code=status,
                    headers=headers,
                    stream=EventStream(response, request),
                    request=request,
                    extensions=extensions,
                )
            try:
                content = await response.read()
            finally:
                response.release()
        except ProxyError:
            raise
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _transport_error(error, request) from error
        # The body as a ready stream, read here: httpx2 decodes it (Content-Encoding) once,
        # and the client's read then has nothing left to do. (``content=`` would encode
        # the bytes into a stream of their own and add headers the server did not send.)
        whole = httpx2.Response(
            status_code=status,
            headers=headers,
            stream=httpx2.ByteStream(content),
            request=request,
            extensions=extensions,
        )
        whole.read()
        return whole

    async def aclose(self) -> None:
        """Close the aiohttp session and its connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None


class EventStream(httpx2.AsyncByteStream):
    """The body of a streamed response, read from aiohttp piece by piece.

    A failure while reading (a read timeout, the connection dropped mid-way)
    becomes httpx2's error, as it would for the head of the response.

    With ``pace_seconds`` set, the socket is read at most that often: between two
    reads the connection's transport stops reading (asyncio's ``pause_reading``), so
    the events that arrive meanwhile (a token each, 20-50 a second) wait in the
    kernel and come in one read. Each read wakes the event loop, aiohttp's parser,
    its read timeout and the reader; a few events per read cost little more than
    one. The read timeout still counts from the last byte received, so a pause lasts
    at most a quarter of it.
    """

    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request
        self.pace_seconds = 0.0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.content.iter_any():
                yield data
                if self.pace_seconds > 0:
                    await self._pause(self.pace_seconds)
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _transport_error(error, self._request) from error

    async def _pause(self, seconds: float) -> None:
        """Leave what arrives in the kernel for ``seconds``; nothing when already read whole."""
        connection = self._response.connection
        transport = connection.transport if connection is not None else None
        if (
            transport is None
            or not transport.is_reading()  # closing, or paused by aiohttp's flow control
            or self._response.content.at_eof()
        ):
            return
        # Data left in the kernel is not "received": the pause stays well inside sock_read.
        read_timeout = self._request.extensions.get("timeout", {}).get("read")
        if read_timeout is not None:
            seconds = min(seconds, read_timeout / 4)
        transport.pause_reading()
        try:
            await asyncio.sleep(seconds)
        finally:
            # Also when the reader is cancelled: a connection given back to the pool reads.
            if not transport.is_closing():
                transport.resume_reading()

    async def aclose(self) -> None:
        """Give the connection back (or drop it, if the body was not read to its end)."""
        self._response.release()


def body_pieces(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The body of a streamed ``response`` as it arrives, decoded.

    A stream from :class:`ChatTransport` without a ``Content-Encoding`` is read from
    aiohttp directly: httpx2's layers (raw, decoded, chunked) cost more than the
    event itself, once per event. Anything else goes through httpx2's own reader.
    """
    stream = response.stream
    if isinstance(stream, EventStream) and "content-encoding" not in response.headers:
        return aiter(stream)
    return response.aiter_bytes()


def session_factory(proxy: str | None, max_connections: int) -> Callable[[], aiohttp.ClientSession]:
    """aiohttp sessions for the provider: at most ``max_connections`` at once, via ``proxy``.

    The SDK's own ``proxy=`` hands aiohttp the proxy URL without its credentials and
    cannot speak SOCKS; an aiohttp-socks connector does both (HTTP proxies by CONNECT).
    """

    # Loading the CA bundle takes about 0.1 s of CPU: at start-up, not in the first turn.
    tls = httpx2.create_ssl_context(trust_env=False)

    def build() -> aiohttp.ClientSession:
        connector: aiohttp.BaseConnector
        if proxy is None:
            connector = aiohttp.TCPConnector(
                limit=max_connections, keepalive_timeout=DEFAULT_KEEPALIVE_SECONDS, ssl=tls
            )
        else:
            connector = ProxyConnector.from_url(proxy, rdns=True, limit=max_connections)
        return aiohttp.ClientSession(connector=connector)

    return build


def _transport_error(error: BaseException, request: httpx2.Request) -> httpx2.TransportError:
    """The httpx2 error the SDK expects for an aiohttp failure."""
    message = str(error) or type(error).__name__
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(error, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)):
        return httpx2.ProxyError(message, request=request)
    if isinstance(error, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message, request=request)
    # Dropped connections, malformed HTTP, a body cut short.
    return httpx2.RemoteProtocolError(message, request=request)


class ChatHttpClient(DefaultAioHttpClient):
    """The SDK's aiohttp client with a cheaper ``build_request`` and ``send`` for JSON posts.

    The SDK calls ``build_request`` with an absolute URL, its full header list and the
    encoded body; httpx2 then parses the URL again and merges this client's default
    headers into a fresh ``Headers`` on every request. Here the URL is parsed once per
    distinct string and the defaults are added by a dictionary lookup. A request with
    anything else (query parameters, files, form data, cookies to send) goes through
    httpx2's own ``build_request`` unchanged. :meth:`send` is cut short the same way.
    """

    def __init__(self, transport: ChatTransport, **kwargs: Any) -> None:
        super().__init__(transport=transport, **kwargs)
        self._chat_transport = transport
        # Each distinct URL parsed once, with its Host header as httpx2 writes it (the
        # port only when it is not the scheme's default).
        self._urls: dict[str, tuple[httpx2.URL, str]] = {}
        self._default_headers = [(key.lower(), value) for key, value in self.headers.multi_items()]

    def build_request(self, method: str, url: httpx2.URL | str, **kwargs: Any) -> httpx2.Request:
        """Build the request; the fast path only for an absolute URL and a bytes body."""
        content = kwargs.get("content")
        if (
            not isinstance(url, str)
            or not isinstance(content, bytes)
            or not content
            or not isinstance(kwargs.get("headers"), list)
            or any(kwargs.get(name) for name in ("data", "files", "json", "params", "cookies"))
            or kwargs.get("extensions")
            or self.cookies
            or self.params
        ):
            return super().build_request(method, url, **kwargs)
        known = self._urls.get(url)
        if known is None:
            parsed = httpx2.URL(url)
            if parsed.is_relative_url:
                return super().build_request(method, url, **kwargs)
            known = self._urls[url] = (parsed, parsed.netloc.decode("ascii"))
        parsed, host = known
        given = {str(key).lower() for key, _ in kwargs["headers"]}
        # The headers httpx2 would add, in its order (Host first, Content-Length last),
        # unless the SDK gave them: the body goes as a ready stream, which httpx2 takes
        # as it is (``content=`` would wrap the bytes in a stream of their own and look
        # up each added header in the request's headers).
        headers = [] if "host" in given else [("Host", host)]
        headers += kwargs["headers"]
        headers.extend(item for item in self._default_headers if item[0] not in given)
        if "content-length" not in given:
            headers.append(("Content-Length", str(len(content))))
        timeout = kwargs.get("timeout", httpx2.USE_CLIENT_DEFAULT)
        if timeout is httpx2.USE_CLIENT_DEFAULT:
            timeout = self.timeout
        request = httpx2.Request(
            method,
            parsed,
            stream=httpx2.ByteStream(content),
            headers=headers,
            extensions={"timeout": httpx2.Timeout(timeout).as_dict()},
        )
        request.read()  # ``content`` readable at once, as for a request built with it
        return request

    async def send(
        self,
        request: httpx2.Request,
        *,
        stream: bool = False,
        auth: Any = httpx2.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx2.USE_CLIENT_DEFAULT,
    ) -> httpx2.Response:
        """Send ``request``; a plain one goes straight to the transport.

        httpx2 runs every request through an auth flow, a redirect loop and a stream
        wrapper. The SDK's requests use no httpx2 auth, our transport reads each body
        whole (a streamed completion's events stay unread, ``stream`` or not), and a
        redirect is rare. Cookies a response sets are still kept, and the request is
        logged as httpx2 logs it. Auth, event hooks or a request without timeouts go
        through httpx2's ``send``; so does a redirect answer that is to be followed
        (the request is sent again there). The one difference: a redirect not followed
        gets no ``next_request``; the SDK reports it as an error either way.
        """
        if (
            self.is_closed
            or "timeout" not in request.extensions
            or auth is not httpx2.USE_CLIENT_DEFAULT
            or self.auth is not None
            or self.event_hooks["request"]
            or self.event_hooks["response"]
        ):
            return await super().send(
                request, stream=stream, auth=auth, follow_redirects=follow_redirects
            )
        started = time.perf_counter()
        response = await self._chat_transport.handle_async_request(request)
        if response.has_redirect_location and (
            self.follow_redirects
            if follow_redirects is httpx2.USE_CLIENT_DEFAULT
            else follow_redirects
        ):
            # Rare (a moved endpoint), and the request was not served here: httpx2's
            # send asks again and follows the redirect as it would have.
            return await super().send(request, stream=stream, follow_redirects=True)
        response.request = request
        response.elapsed = timedelta(seconds=time.perf_counter() - started)
        if "set-cookie" in response.headers:
            self.cookies.extract_cookies(response)
        _httpx2_logger.info(
            'HTTP Request: %s %s "%s %d %s"',
            request.method,
            request.url,
            response.http_version,
            response.status_code,
            response.reason_phrase,
        )
        return response
