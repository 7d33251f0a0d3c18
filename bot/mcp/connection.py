"""One shop MCP server: one session per process, reconnected when it is lost.

A runner task owns the SDK's ``Client`` (its transport's task group must be
entered and left by one task): it connects, lists every page of the tools,
hands them to ``on_tools``, then waits until the connection is lost, the server
says its tool list changed (listed again), or the application closes. A lost
connection is retried in the background with a growing pause; while it is down
a call waits for it within the call's own deadline.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from pydantic import SecretStr

from bot.ops.secrets import SecretMask
from bot.ops.surrogates import replace_lone_surrogates, without_lone_surrogates
from bot.settings import McpServerSettings
from tools.mcp.tool import McpCallError, McpCallOutcome

logger = logging.getLogger(__name__)

_CONNECTION_CLOSED = -32000
_INVALID_REQUEST = -32600
# The client could not read the server's answer (the SDK's JSON parser refuses a lone
# surrogate's escape, say): the call reached the server, its answer is lost.
_PARSE_ERROR = -32700
_UNKNOWN_SESSION = frozenset({"Session terminated", "Session not found"})
_RELIST_PAGE_CAP = 100
# Reconnect pauses grow by half each time, from a tenth of a second to ten seconds: a server
# back after a restart is found within a fraction of its restart time.
_FIRST_PAUSE_SECONDS = 0.1
_PAUSE_GROWTH = 1.5
_MAX_PAUSE_SECONDS = 10.0
# A server that rejects the credentials (401, 403) will not accept the same ones a second
# later (they are read once, at start-up): asked again after 5 s, then twice as long each
# time, at most every 5 minutes, in case the shop adds the key on its side.
_REJECTED_FIRST_PAUSE_SECONDS = 5.0
_REJECTED_PAUSE_GROWTH = 2.0
_REJECTED_MAX_PAUSE_SECONDS = 300.0
_CREDENTIALS_REJECTED = frozenset({401, 403})

_SESSION_END_WAIT_SECONDS = 1.0


class _SessionLost(Exception):
    """A call saw the connection close; the runner ends the session."""


ToolsListener = Callable[[str, list[mcp_types.Tool]], None]


def next_pause(pause: float, *, credentials_rejected: bool) -> float:
    """The pause before the next connection attempt after one of ``pause`` failed.

    Exponential and capped; a rejection of the credentials starts and ends higher.
    """
    if credentials_rejected:
        grown = max(pause * _REJECTED_PAUSE_GROWTH, _REJECTED_FIRST_PAUSE_SECONDS)
        return min(grown, _REJECTED_MAX_PAUSE_SECONDS)
    return min(pause * _PAUSE_GROWTH, _MAX_PAUSE_SECONDS)


class McpConnection:
    """The session with one MCP server, shared by every turn of this process."""

    def __init__(
        self,
        settings: McpServerSettings,
        *,
        headers: Mapping[str, SecretStr],
        on_tools: ToolsListener,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._headers = dict(headers)
        self._mask = SecretMask(value.get_secret_value() for value in headers.values())
        # The status of the last HTTP answer that refused the credentials, per attempt.
        self._rejected_status: int | None = None
        self.credentials_rejected = False
        # How long the runner waits before its next attempt (grows while attempts fail).
        self.retry_pause_seconds = _FIRST_PAUSE_SECONDS
        self._on_tools = on_tools
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._closing = asyncio.Event()
        self._lost = asyncio.Event()
        self._relist = asyncio.Event()
        self._generation = 0
        self._ended_generation = 0
        self._refused_generation = 0
        self._generation_ended = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.down_reason: str | None = "not connected yet"
        self.listed_once = asyncio.Event()
        # Set once the first attempt ended either way (start-up waits for it, not longer).
        self.first_attempt_done = asyncio.Event()

    @property
    def longest_pause_seconds(self) -> float:
        """The longest pause between attempts in the present state (for the operator's line)."""
        return _REJECTED_MAX_PAUSE_SECONDS if self.credentials_rejected else _MAX_PAUSE_SECONDS

    @property
    def up(self) -> bool:
        """Whether a session is open now."""
        return self._up.is_set()

    def start(self) -> None:
        """Start connecting in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")

    async def aclose(self) -> None:
        """Close the session and stop reconnecting."""
        self._closing.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout=5.0)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None

    async def call(
        self, name: str, arguments: dict[str, Any], timeout_seconds: float, retry: bool
    ) -> McpCallOutcome:
        """Call ``name`` once; after a lost connection, once more on a new session if safe.

        Safe means ``retry`` (the tool may run twice) or the request certainly never
        reached the server (refused connection, unknown session). The caller's own
        deadline bounds the waits for a session.
        """
        # Waiting for a session ends a little before the caller's own deadline, so that a
        # call never sent is told apart from one that may have run (and may be retried).
        wait_until = asyncio.get_running_loop().time() + max(timeout_seconds - 0.1, 0.05)
        client, generation = await self._session(wait_until=wait_until)
        try:
            return _outcome(await self._send(client, name, arguments, timeout_seconds))
        except MCPError as error:
            if error.code == _PARSE_ERROR:
                raise McpCallError(
                    f"{self.name}: the answer to {name} could not be read",
                    reached=True,
                    unreadable=True,
                ) from error
            if not _connection_lost(error):
                raise McpCallError(f"{self.name} refused {name}", reached=True) from error
            reached = await self._reached(generation, error)
            if reached and not retry:
                raise McpCallError(
                    f"{self.name}: connection lost during {name}", reached=True
                ) from error
        logger.info("MCP server %s: connection lost, calling %s on a new session", self.name, name)
        client, _ = await self._session(after=generation, wait_until=wait_until)
        try:
            return _outcome(await self._send(client, name, arguments, timeout_seconds))
        except MCPError as error:
            lost = _connection_lost(error)
            if lost:
                self._lost.set()
            raise McpCallError(f"{self.name} failed {name} twice", reached=True) from error

    async def _send(
        self, client: Client, name: str, arguments: dict[str, Any], timeout_seconds: float
    ) -> mcp_types.CallToolResult:
        # The SDK's own timeout is a safety net behind the caller's deadline.
        return await client.call_tool(name, arguments, read_timeout_seconds=timeout_seconds + 5)

    async def _session(self, *, wait_until: float, after: int = 0) -> tuple[Client, int]:
        """The open session (newer than generation ``after``), waited for until ``wait_until``.

        No session by then: :class:`McpCallError` with ``reached=False`` (nothing was sent).
        """
        try:
            async with asyncio.timeout_at(wait_until):
                while True:
                    client = self._client
                    if client is not None and self._generation > after and self._up.is_set():
                        return client, self._generation
                    if self._closing.is_set():
                        raise McpCallError(f"{self.name} is closing", reached=False)
                    async with self._generation_ended:
                        await self._generation_ended.wait()
        except TimeoutError as error:
            raise McpCallError(
                f"{self.name}: no session within the call's deadline ({self.down_reason})",
                reached=False,
            ) from error

    async def _reached(self, generation: int, error: MCPError) -> bool:
        """Whether a request lost with its connection may have reached the server.

        The transport ends the session itself when a request fails; its causes say
        whether the server was reachable at all (a refused connection ran nothing).
        """
        if _session_unknown(error):
            self._lost.set()
            return False  # the server answered 404: it did not know the session, ran nothing
        async with self._generation_ended:
            try:
                async with asyncio.timeout(_SESSION_END_WAIT_SECONDS):
                    await self._generation_ended.wait_for(
                        lambda: self._ended_generation >= generation
                    )
            except TimeoutError:
                self._lost.set()
                await self._generation_ended.wait_for(lambda: self._ended_generation >= generation)
        return self._refused_generation != generation

    async def _run(self) -> None:
        pause = _FIRST_PAUSE_SECONDS
        while not self._closing.is_set():
            generation = self._generation + 1
            refused = False
            self._rejected_status = None
            try:
                async with self._connect() as client:
                    tools = await _list_tools(client)
                    self._on_tools(self.name, tools)
                    self._lost.clear()
                    self._client = client
                    self._generation = generation
                    self._up.set()
                    if self.down_reason is not None and self.first_attempt_done.is_set():
                        logger.info(
                            "MCP server %s: connected%s",
                            self.name,
                            " again"
                            if self.listed_once.is_set()
                            else ", its tools are offered now",
                        )
                    self.down_reason = None
                    self.credentials_rejected = False
                    self.listed_once.set()
                    self.first_attempt_done.set()
                    pause = _FIRST_PAUSE_SECONDS
                    self.retry_pause_seconds = pause
                    async with self._generation_ended:
                        self._generation_ended.notify_all()
                    await self._watch(client)
            except Exception as error:
                refused = _refused(error)
                self.credentials_rejected = self._rejected_status is not None
                reason = self._mask(self._why(error))
                # The first failure is start-up's one line (bot/mcp/servers.py); later ones
                # are logged when their reason changes, not on every retry.
                if self.first_attempt_done.is_set() and reason != self.down_reason:
                    logger.warning(
                        "MCP server %s: %s; reconnecting in the background",
                        self.name,
                        reason if self.credentials_rejected else f"connection lost: {reason}",
                    )
                self.down_reason = reason
            finally:
                self.first_attempt_done.set()
                self._client = None
                self._up.clear()
                self._generation = max(self._generation, generation)
            async with self._generation_ended:
                self._ended_generation = generation
                if refused:
                    self._refused_generation = generation
                self._generation_ended.notify_all()
            if self._closing.is_set():
                break
            if self.credentials_rejected:
                pause = max(pause, _REJECTED_FIRST_PAUSE_SECONDS)
            self.retry_pause_seconds = pause
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=pause)
            pause = next_pause(pause, credentials_rejected=self.credentials_rejected)

    def _why(self, error: BaseException) -> str:
        """Why an attempt failed, on one line: a refusal of the credentials said as such."""
        if self._rejected_status is not None:
            variables = ", ".join(self.settings.headers_from_env.values())
            check = (
                f"check the header variable(s) {variables}"
                if variables
                else "the server wants credentials: name them in headers_from_env"
            )
            return f"rejected the credentials (HTTP {self._rejected_status}): {check}"
        return _reason(error)

    async def _saw_response(self, response: httpx2.Response) -> None:
        """Every HTTP answer of the session: a refusal of the credentials is remembered."""
        if response.status_code in _CREDENTIALS_REJECTED:
            self._rejected_status = response.status_code

    async def _watch(self, client: Client) -> None:
        """Wait for the end of this session; list the tools again when the server says so."""
        listener = asyncio.create_task(self._listen(client))
        pinger = asyncio.create_task(self._ping(client))
        try:
            while True:
                waits = {
                    asyncio.create_task(self._closing.wait()),
                    asyncio.create_task(self._lost.wait()),
                    asyncio.create_task(self._relist.wait()),
                }
                try:
                    await asyncio.wait({*waits, pinger}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waits:
                        waiter.cancel()
                if self._closing.is_set():
                    return
                if pinger.done():
                    raise _SessionLost(f"the server stopped answering pings ({pinger.result()})")
                if self._lost.is_set():
                    raise _SessionLost("a call found the connection closed or the session gone")
                self._relist.clear()
                self._on_tools(self.name, await _list_tools(client))
                logger.info("MCP server %s: tool list changed, listed again", self.name)
        finally:
            for task in (listener, pinger):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _ping(self, client: Client) -> str:
        """Ping a legacy session every ``ping_seconds``; return why a ping went unanswered.

        A legacy session holds no stream open between calls, so a server that dies
        between calls is otherwise found only by the next call: without the ping
        ``/healthz`` would call a dead shop up until a customer needed it. A newer
        session's change-notification stream ends with its server, and the protocol
        has no ping any more (the SDK refuses it outside ``mode='legacy'``).
        """
        interval = self.settings.ping_seconds
        if interval <= 0 or self.settings.protocol != "legacy":
            await asyncio.Event().wait()  # never: no pings
        while True:
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(self.settings.timeout_seconds):
                    await client.send_ping()
            except Exception as error:  # any failure of the ping ends the session
                return self._mask(_reason(error)) or type(error).__name__

    async def _listen(self, client: Client) -> None:
        """Ask a 2026-era server for tool list changes (older ones send them unasked)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._relist.set()
        except (ListenNotSupportedError, MCPError, TimeoutError) as error:
            logger.debug("MCP server %s: no change notifications (%s)", self.name, error)

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._relist.set()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        settings = self.settings
        if settings.url is not None:
            timeout = httpx2.Timeout(settings.timeout_seconds, read=300.0)
            # The secrets leave their SecretStr only here, for the HTTP client's headers.
            headers = {name: value.get_secret_value() for name, value in self._headers.items()}
            # The SDK turns a 401 into "Server returned an error response": the status is
            # read here, from the HTTP client's own hook.
            hooks = {"response": [self._saw_response]}
            async with httpx2.AsyncClient(
                headers=headers, timeout=timeout, event_hooks=hooks
            ) as http:
                transport = streamable_http_client(settings.url, http_client=http)
                async with Client(
                    transport, message_handler=self._message, mode=settings.protocol
                ) as client:
                    yield client
            return
        assert settings.command is not None  # noqa: S101 - settings require url or command
        params = StdioServerParameters(command=settings.command, args=list(settings.args))
        async with Client(params, message_handler=self._message, mode=settings.protocol) as client:
            yield client


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    """Every page of ``tools/list``."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_RELIST_PAGE_CAP):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise RuntimeError(f"more than {_RELIST_PAGE_CAP} pages of tools")


def _outcome(result: mcp_types.CallToolResult) -> McpCallOutcome:
    texts = [
        block.text if isinstance(block, mcp_types.TextContent) else f"[{block.type}]"
        for block in result.content
    ]
    # A lone surrogate (half a UTF-16 pair) in a shop's answer cannot be sent to the model
    # nor stored: it becomes U+FFFD, the rest of the answer is kept.
    return McpCallOutcome(
        is_error=result.is_error,
        structured=without_lone_surrogates(result.structured_content),
        text=replace_lone_surrogates("\n".join(texts)),
    )


def _session_unknown(error: MCPError) -> bool:
    """A 404 for the session id (the server restarted): the request was refused unrun.

    The SDK says "Session terminated"; a server that sends its own JSON-RPC body with
    the 404 (the SDK's server does) says "Session not found".
    """
    return error.code == _INVALID_REQUEST and error.message in _UNKNOWN_SESSION


def _connection_lost(error: MCPError) -> bool:
    return error.code == _CONNECTION_CLOSED or _session_unknown(error)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _refused(error: BaseException) -> bool:
    """Whether the session ended because the server could not be reached at all."""
    leaves = [leaf for leaf in _leaves(error) if not isinstance(leaf, _SessionLost)]
    return bool(leaves) and all(isinstance(leaf, httpx2.ConnectError) for leaf in leaves)


def _reason(error: BaseException) -> str:
    """Why a session ended, on one line (the kinds and short texts of its causes)."""
    parts = []
    for leaf in _leaves(error)[:3]:
        text = " ".join(str(leaf).split())[:160]
        if isinstance(leaf, _SessionLost):
            parts.append(text)
            continue
        parts.append(f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__)
    return "; ".join(parts)
