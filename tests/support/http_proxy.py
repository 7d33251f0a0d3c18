"""Tiny HTTP CONNECT and SOCKS5 proxies on loopback that record every tunnel they open.

Enough of a real proxy for the bot's clients (aiohttp-socks tunnels every
connection, plain HTTP targets too): they check credentials when told to,
refuse otherwise, and pipe bytes both ways.
"""

import asyncio
import base64
from contextlib import suppress
from dataclasses import dataclass, field


@dataclass
class ConnectProxy:
    """``async with ConnectProxy() as proxy``: ``proxy.url`` to configure, ``tunnels`` to check."""

    user: str | None = None
    password: str | None = None
    tunnels: list[str] = field(default_factory=list)
    refused: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``http://[user:password@]127.0.0.1:<port>``."""
        auth = f"{self.user}:{self.password}@" if self.user is not None else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    async def __aenter__(self) -> "ConnectProxy":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def _authorised(self, headers: dict[str, str]) -> bool:
        if self.user is None:
            return True
        expected = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return headers.get("proxy-authorization", "") == f"Basic {expected}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            request = (await reader.readline()).decode("latin-1").split()
            headers: dict[str, str] = {}
            while (line := (await reader.readline()).decode("latin-1").strip()) != "":
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if len(request) != 3 or request[0] != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            if not self._authorised(headers):
                self.refused += 1
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
                )
                return
            host, _, port = request[1].rpartition(":")
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(request[1])
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            try:
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
            finally:
                upstream_writer.close()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with suppress(ConnectionError):
                await writer.drain()
            writer.close()
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        with suppress(OSError):
            writer.write_eof()


@dataclass
class Socks5Proxy:
    """A SOCKS5 proxy (RFC 1928, CONNECT only, user/password auth of RFC 1929) on loopback."""

    user: str
    password: str
    tunnels: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        """``socks5://user:password@127.0.0.1:<port>``."""
        assert self._server is not None
        port = int(self._server.sockets[0].getsockname()[1])
        return f"socks5://{self.user}:{self.password}@127.0.0.1:{port}"

    async def __aenter__(self) -> "Socks5Proxy":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            _, count = await reader.readexactly(2)
            methods = await reader.readexactly(count)
            if 2 not in methods:
                writer.write(b"\x05\xff")
                return
            writer.write(b"\x05\x02")
            _, user_length = await reader.readexactly(2)
            user = (await reader.readexactly(user_length)).decode()
            password = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            if (user, password) != (self.user, self.password):
                writer.write(b"\x01\x01")
                return
            writer.write(b"\x01\x00")
            _, command, _, address_type = await reader.readexactly(4)
            if address_type == 1:
                host = ".".join(str(part) for part in await reader.readexactly(4))
            elif address_type == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            else:
                writer.write(b"\x05\x08\x00\x01\x00\x00\x00\x00\x00\x00")
                return
            port = int.from_bytes(await reader.readexactly(2), "big")
            if command != 1:
                writer.write(b"\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00")
                return
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            self.tunnels.append(f"{host}:{port}")
            writer.write(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")
            await writer.drain()
            try:
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
            finally:
                upstream_writer.close()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with suppress(ConnectionError):
                await writer.drain()
            writer.close()
            self._tasks.discard(task)
