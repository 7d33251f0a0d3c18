"""A small fake of Telegram's Bot API over real HTTP, for the bot's end-to-end tests.

It speaks what aiogram uses in polling mode (``getMe``, ``deleteWebhook``,
``getFile`` and the file download URL for files added with :meth:`add_file`,
``getUpdates`` with offset and long-poll timeout, ``sendMessage``,
``sendChatAction``, ``sendMessageDraft``, ``setMyCommands``; also ``setWebhook``), parses aiogram's
form-encoded requests, records every call, and answers with Telegram's
envelopes, including errors (``error_code``, ``description``,
``parameters.retry_after``). Tests push updates into it, inject errors, and
wait (bounded) for the calls they expect.

Forum topics: ``createForumTopic`` in any chat made a forum with
:meth:`FakeTelegramServer.make_forum`, ``message_thread_id`` on ``sendMessage``
and ``copyMessage`` (a deleted topic answers "message thread not found"),
``getChatMember`` (everyone is a member unless listed in ``non_members``;
the bot itself is an administrator that may manage topics unless
:meth:`FakeTelegramServer.set_bot_member` says otherwise), ``getChat``
(``is_forum`` for the forums; ``unknown_chats`` answer "chat not found"),
and topic messages in updates (:meth:`FakeTelegramServer.topic_message_update`).
Topic ids come from one counter unless a forum numbers its own
(``make_forum(..., first_thread_id=...)``), as Telegram numbers messages per
supergroup: two forums may then have a topic with the same id.

Like Telegram it refuses a ``sendMessage`` whose text is empty, longer than
4096 UTF-16 code units, or whose entities fall outside the text: a bot that
splits or formats badly fails here the way it would fail in production.
"""

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.testing.ports import LISTEN_BACKLOG

TEST_TOKEN = "123456789:AAH-test-token-for-the-fake-server-0001"  # noqa: S105 - fake
TEXT_LIMIT = 4096
_INT_FIELDS = {
    "chat_id",
    "offset",
    "timeout",
    "limit",
    "message_id",
    "reply_to_message_id",
    "message_thread_id",
    "from_chat_id",
    "user_id",
    "draft_id",
}
THREAD_NOT_FOUND = "Bad Request: message thread not found"


def utf16_len(text: str) -> int:
    """Telegram's length of ``text``."""
    return len(text.encode("utf-16-le")) // 2


def _customer(user_id: int, language_code: str | None = None) -> dict[str, Any]:
    """A customer as an update's sender (``language_code``: their Telegram's language)."""
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": "Покупатель"}
    if language_code is not None:
        user["language_code"] = language_code
    return user


def _chat(chat_id: int, chat_type: str) -> dict[str, Any]:
    """The chat of a customer's update: their private chat, or a group."""
    if chat_type == "private":
        return {"id": chat_id, "type": chat_type, "first_name": "Покупатель"}
    return {"id": chat_id, "type": chat_type, "title": "Группа"}


@dataclass(frozen=True)
class ApiCall:
    """One request the bot made: method, decoded parameters, what the fake answered."""

    method: str
    params: dict[str, Any]
    status: int
    at: float
    # The message id a successful send returned (0 for other calls).
    result_id: int = 0

    @property
    def ok(self) -> bool:
        """Whether the fake answered with success."""
        return self.status == 200


@dataclass
class _Injected:
    method: str
    status: int
    description: str
    retry_after: int | None
    remaining: int
    when: Callable[[dict[str, Any]], bool] | None


@dataclass
class _Pending:
    update: dict[str, Any]
    # A redelivery is returned whatever the offset says (Telegram re-sending after
    # the bot crashed before confirming, or a webhook retry).
    forced: bool = False


@dataclass
class FakeTelegramServer:
    """The fake Bot API; ``await start()``, use ``base_url``, ``await close()``."""

    token: str = TEST_TOKEN
    bot_id: int = 123456789
    bot_username: str = "support_test_bot"
    calls: list[ApiCall] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    # The menu per ``language_code`` of setMyCommands ("" for the one without a code).
    commands_by_language: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    webhook: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._pending: list[_Pending] = []
        self._injected: list[_Injected] = []
        self._raw_answers: list[tuple[str, Any]] = []
        self._changed = asyncio.Condition()
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._closing = False
        self._received: dict[str, int] = {}
        self._accepted: dict[str, int] = {}
        self._held_chats: set[int] = set()
        self.holding = 0
        self.discarded: list[dict[str, Any]] = []
        self._forums: dict[int, dict[int, str]] = {}
        self._thread_ids: dict[int, Iterator[int]] = {}
        self._bot_members: dict[int, dict[str, Any]] = {}
        self.non_members: set[int] = set()
        self.unknown_chats: set[int] = set()
        # Messages the bot sent, by (chat, message id): what edits change.
        self.bot_messages: dict[tuple[Any, int], dict[str, Any]] = {}
        # Files the bot may fetch (``getFile``, then the file URL), by file id.
        self._files: dict[str, tuple[str, bytes, int | None]] = {}
        # File paths the bot downloaded, in order.
        self.downloads: list[str] = []

    # --- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        # A burst opens hundreds of connections at once; past aiohttp's default backlog
        # (128) the kernel drops them and each client retries its SYN a second later,
        # which no real Bot API makes a bot wait.
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=LISTEN_BACKLOG)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        """Wake every long poll and stop listening."""
        self._closing = True
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        """What ``TELEGRAM_API_BASE_URL`` should be set to."""
        return f"http://127.0.0.1:{self._port}"

    # --- updates -----------------------------------------------------------------

    def message_update(
        self,
        chat_id: int,
        text: str | None = None,
        *,
        user_id: int | None = None,
        update_id: int | None = None,
        chat_type: str = "private",
        extra: dict[str, Any] | None = None,
        language_code: str | None = None,
    ) -> dict[str, Any]:
        """A ``message`` update from a user (text, or whatever ``extra`` holds)."""
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": _chat(chat_id, chat_type),
            "from": _customer(user_id or chat_id, language_code),
        }
        return self._message_update(message, text, extra, update_id)

    def member_update(
        self, chat_id: int, old: str, new: str, *, chat_type: str = "private"
    ) -> dict[str, Any]:
        """A ``my_chat_member`` update: the bot's status in ``chat_id`` went ``old`` -> ``new``.

        ``kicked`` in a private chat is the customer blocking the bot; ``member``
        after it is the customer unblocking it.
        """
        bot_user = {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Bot",
            "username": self.bot_username,
        }
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type, "first_name": "Покупатель"}

        def member(status: str) -> dict[str, Any]:
            return {"status": status, "user": bot_user} | (
                {"until_date": 0} if status == "kicked" else {}
            )

        return {
            "update_id": next(self._update_ids),
            "my_chat_member": {
                "chat": chat,
                "from": _customer(chat_id),
                "date": int(time.time()),
                "old_chat_member": member(old),
                "new_chat_member": member(new),
            },
        }

    def callback_update(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        language_code: str | None = None,
    ) -> dict[str, Any]:
        """A ``callback_query`` update: ``user_id`` pressed a button with ``data``.

        The button sits under the bot's message ``message_id`` in ``chat_id``
        (as the bot last sent or edited it, when the fake knows it).
        """
        chat = _chat(chat_id, chat_type)
        known = self.bot_messages.get((chat_id, message_id))
        message = (
            dict(known)
            if known is not None
            else {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": chat,
                "from": self._bot_user(),
                "text": "карточка",
            }
        )
        message["chat"] = chat
        update_id = next(self._update_ids)
        return {
            "update_id": update_id,
            "callback_query": {
                "id": f"cb{update_id}",
                "from": _customer(user_id or chat_id, language_code),
                "message": message,
                "chat_instance": f"ci{chat_id}",
                "data": data,
            },
        }

    def keyboards(self, chat_id: int) -> list[tuple[int, str, list[list[dict[str, Any]]]]]:
        """(message id, text, inline keyboard) of accepted sends with a keyboard, in order."""
        found: list[tuple[int, str, list[list[dict[str, Any]]]]] = []
        for call in self.calls_of("sendMessage"):
            markup = call.params.get("reply_markup")
            if call.ok and call.params.get("chat_id") == chat_id and isinstance(markup, dict):
                keyboard = markup.get("inline_keyboard")
                if keyboard:
                    found.append((call.result_id, str(call.params["text"]), keyboard))
        return found

    async def push(self, *updates: dict[str, Any]) -> None:
        """Queue updates; all of them come back in the same ``getUpdates`` batch."""
        async with self._changed:
            self._pending.extend(_Pending(update) for update in updates)
            self._changed.notify_all()

    async def push_message(self, chat_id: int, text: str | None = None, **kwargs: Any) -> int:
        """Queue one message update; returns its update id."""
        update = self.message_update(chat_id, text, **kwargs)
        await self.push(update)
        return int(update["update_id"])

    async def redeliver(self, update: dict[str, Any]) -> None:
        """Deliver an update again, as Telegram does when it thinks it was not received."""
        async with self._changed:
            self._pending.append(_Pending(update, forced=True))
            self._changed.notify_all()

    # --- forum topics ------------------------------------------------------------

    def make_forum(self, chat_id: int, *, first_thread_id: int | None = None) -> None:
        """Make ``chat_id`` a forum supergroup where the bot may manage topics.

        With ``first_thread_id`` its topics are numbered from there, in this forum only.
        """
        self._forums.setdefault(chat_id, {})
        if first_thread_id is not None:
            self._thread_ids[chat_id] = itertools.count(first_thread_id)

    def set_bot_member(self, chat_id: int, status: str, *, can_manage_topics: bool = True) -> None:
        """The bot's own status in ``chat_id`` (``administrator``, ``member``, ``left``...)."""
        self._bot_members[chat_id] = {"status": status, "can_manage_topics": can_manage_topics}

    def topics(self, chat_id: int) -> dict[int, str]:
        """The open topics of a forum: thread id -> name."""
        return dict(self._forums.get(chat_id, {}))

    def delete_topic(self, chat_id: int, thread_id: int) -> None:
        """A staff member deleted the topic: sends into it fail from now on."""
        self._forums.get(chat_id, {}).pop(thread_id, None)

    def topic_message_update(
        self,
        chat_id: int,
        thread_id: int,
        text: str | None = None,
        *,
        user_id: int = 555,
        is_bot: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A message a user (or a bot) wrote in topic ``thread_id`` of forum ``chat_id``."""
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "supergroup", "title": "Staff", "is_forum": True},
            "from": {"id": user_id, "is_bot": is_bot, "first_name": "Сотрудник"},
            "message_thread_id": thread_id,
            "is_topic_message": True,
        }
        return self._message_update(message, text, extra, None)

    def _message_update(
        self,
        message: dict[str, Any],
        text: str | None,
        extra: dict[str, Any] | None,
        update_id: int | None,
    ) -> dict[str, Any]:
        """``message`` with its text (a leading command marked as Telegram marks it)."""
        if text is not None:
            message["text"] = text
            if text.startswith("/"):
                command = text.split()[0]
                message["entities"] = [
                    {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
                ]
        message.update(extra or {})
        return {
            "update_id": update_id if update_id is not None else next(self._update_ids),
            "message": message,
        }

    def _thread_missing(self, params: dict[str, Any]) -> bool:
        chat_id = params.get("chat_id")
        thread = params.get("message_thread_id")
        if thread is None or not isinstance(chat_id, int) or chat_id not in self._forums:
            return False
        return thread not in self._forums[chat_id]

    # --- errors --------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        *,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` (matching ``when``) with an error."""
        self._injected.append(_Injected(method, status, description, retry_after, times, when))

    def answer_next(self, method: str, result: Any, *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": true, "result": result}``.

        Any ``result``, the Bot API's shape or not: what a client must cope with when
        a proxy or a newer Bot API answers in a way it cannot read.
        """
        self._raw_answers.extend([(method, result)] * times)

    # --- holding sends ---------------------------------------------------------------

    def hold_sends(self, chat_id: int) -> None:
        """Keep ``sendMessage`` calls to ``chat_id`` waiting, unrecorded, until released.

        A held call whose client disconnects meanwhile (the bot was killed) is
        discarded: nothing is recorded, as if Telegram never got it.
        """
        self._held_chats.add(chat_id)

    async def release_sends(self, chat_id: int) -> None:
        """Let held and future ``sendMessage`` calls to ``chat_id`` through."""
        async with self._changed:
            self._held_chats.discard(chat_id)
            self._changed.notify_all()

    async def _wait_released(self, request: web.Request, chat_id: Any) -> bool:
        """Wait while ``chat_id`` is held; ``False`` if the client went away meanwhile."""
        if chat_id not in self._held_chats:
            return True
        async with self._changed:
            self.holding += 1
            self._changed.notify_all()
        try:
            while chat_id in self._held_chats and not self._closing:
                if _gone(request):
                    return False
                async with self._changed:
                    with suppress(TimeoutError):
                        async with asyncio.timeout(0.05):
                            await self._changed.wait()
            return not _gone(request)
        finally:
            async with self._changed:
                self.holding -= 1
                self._changed.notify_all()

    # --- inspection ------------------------------------------------------------------

    def calls_of(self, method: str) -> list[ApiCall]:
        """Every recorded call of ``method``, in order."""
        return [call for call in self.calls if call.method == method]

    def unconfirmed(self) -> int:
        """Updates pushed that the bot has not confirmed yet (no ``getUpdates`` offset past them).

        A poller confirms a batch by asking for the next one, after it queued the batch.
        """
        return len(self._pending)

    def received(self, method: str) -> int:
        """How many calls of ``method`` arrived (a long poll counts before it is answered)."""
        return self._received.get(method, 0)

    def accepted(self, method: str) -> int:
        """How many calls of ``method`` the fake answered with success.

        Kept as calls come, so a wait on it costs the same at the thousandth call as
        at the first (``calls_of`` walks every call: a wait on it, woken by each call,
        is quadratic in a burst).
        """
        return self._accepted.get(method, 0)

    def topic_texts(self, chat_id: int, thread_id: int) -> list[str]:
        """Texts the bot posted into one forum topic, in order."""
        return [
            str(call.params["text"])
            for call in self.calls_of("sendMessage")
            if call.ok
            and call.params.get("chat_id") == chat_id
            and call.params.get("message_thread_id") == thread_id
        ]

    def copies(self, chat_id: int, thread_id: int | None = None) -> list[dict[str, Any]]:
        """Accepted ``copyMessage`` calls into ``chat_id`` (and topic), in order."""
        return [
            call.params
            for call in self.calls_of("copyMessage")
            if call.ok
            and call.params.get("chat_id") == chat_id
            and (thread_id is None or call.params.get("message_thread_id") == thread_id)
        ]

    def drafts(self, chat_id: int) -> list[ApiCall]:
        """The ``sendMessageDraft`` calls to ``chat_id`` Telegram accepted, in order."""
        return [
            call
            for call in self.calls_of("sendMessageDraft")
            if call.ok and call.params.get("chat_id") == chat_id
        ]

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        """Texts of the messages Telegram accepted (optionally to one chat), in order."""
        return [
            str(call.params["text"])
            for call in self.calls_of("sendMessage")
            if call.ok and (chat_id is None or call.params.get("chat_id") == chat_id)
        ]

    async def wait_for(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        """Wait until ``predicate()`` holds after some call; fail after ``within`` seconds."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for_texts(self, chat_id: int, count: int, within: float = 10.0) -> list[str]:
        """Wait until ``count`` messages reached ``chat_id``; returns all of them."""
        await self.wait_for(lambda: len(self.sent_texts(chat_id)) >= count, within)
        return self.sent_texts(chat_id)

    # --- the API -------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = _decode(await request.post())
        async with self._changed:
            self._received[method] = self._received.get(method, 0) + 1
            self._changed.notify_all()
        if request.match_info["token"] != self.token:
            response = self._error(401, "Unauthorized")
        elif (injected := self._take_injected(method, params)) is not None:
            response = self._error(injected.status, injected.description, injected.retry_after)
        elif (raw := self._take_raw(method)) is not None:
            response = self._ok(raw[1])
        elif method == "sendMessage" and not await self._wait_released(
            request, params.get("chat_id")
        ):
            async with self._changed:
                self.discarded.append(params)
                self._changed.notify_all()
            return self._error(499, "client went away")
        else:
            handler = getattr(self, f"_api_{method}", None)
            if handler is None:
                response = self._error(404, "Not Found")
            else:
                response = await handler(params)
        result_id = 0
        if (
            method == "sendMessage"
            and response.status == 200
            and isinstance(response, web.Response)
        ):
            body = json.loads(response.text or "{}")
            result_id = int(body.get("result", {}).get("message_id", 0))
        async with self._changed:
            self.calls.append(ApiCall(method, params, response.status, time.monotonic(), result_id))
            if response.status == 200:
                self._accepted[method] = self._accepted.get(method, 0) + 1
            self._changed.notify_all()
        return response

    def _take_raw(self, method: str) -> tuple[str, Any] | None:
        for index, (name, result) in enumerate(self._raw_answers):
            if name == method:
                del self._raw_answers[index]
                return name, result
        return None

    def _take_injected(self, method: str, params: dict[str, Any]) -> _Injected | None:
        for injected in self._injected:
            if injected.method != method or injected.remaining <= 0:
                continue
            if injected.when is not None and not injected.when(params):
                continue
            injected.remaining -= 1
            return injected
        return None

    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(status: int, description: str, retry_after: int | None = None) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return web.json_response(body, status=status)

    def _bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Support",
            "username": self.bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def add_file(self, file_id: str, content: bytes, *, reported_size: int | None = None) -> str:
        """Serve ``content`` as file ``file_id``; returns its ``file_path``.

        ``reported_size`` is the ``file_size`` ``getFile`` answers (the content's length
        by default), for a file Telegram says is larger than it is here.
        """
        path = f"documents/file_{len(self._files)}"
        self._files[file_id] = (path, content, reported_size)
        return path

    async def _api_getFile(self, params: dict[str, Any]) -> web.Response:
        known = self._files.get(str(params.get("file_id")))
        if known is None:
            return self._error(400, "Bad Request: invalid file_id")
        path, content, reported = known
        size = reported if reported is not None else len(content)
        if size > 20 * 1024 * 1024:
            return self._error(400, "Bad Request: file is too big")
        return self._ok(
            {
                "file_id": params["file_id"],
                "file_unique_id": f"u{params['file_id']}",
                "file_size": size,
                "file_path": path,
            }
        )

    async def _download(self, request: web.Request) -> web.Response:
        """``GET /file/bot<token>/<file_path>``: the file's bytes, as Telegram serves them."""
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        content = next((data for known, data, _ in self._files.values() if known == path), None)
        async with self._changed:
            self.downloads.append(path)
            self._changed.notify_all()
        if content is None:
            return web.Response(status=404)
        return web.Response(body=content, content_type="application/octet-stream")

    async def _api_getMe(self, params: dict[str, Any]) -> web.Response:
        return self._ok(self._bot_user())

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> web.Response:
        self.webhook = {}
        return self._ok(True)

    async def _api_setWebhook(self, params: dict[str, Any]) -> web.Response:
        # Telegram's answer to a plain-HTTP webhook URL.
        if not str(params.get("url", "")).startswith("https://"):
            return self._error(
                400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
            )
        self.webhook = dict(params)
        return self._ok(True)

    async def _api_setMyCommands(self, params: dict[str, Any]) -> web.Response:
        code = str(params.get("language_code") or "")
        self.commands_by_language[code] = list(params.get("commands", []))
        if not code:
            self.commands = self.commands_by_language[code]
        return self._ok(True)

    async def _api_sendChatAction(self, params: dict[str, Any]) -> web.Response:
        return self._ok(True)

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> web.Response:
        # As Telegram: private chats only, a non-zero draft id, at most 4096 characters.
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or chat_id <= 0:
            return self._error(400, "Bad Request: drafts can be sent only to private chats")
        if not isinstance(params.get("draft_id"), int) or params["draft_id"] == 0:
            return self._error(400, "Bad Request: draft_id must be non-zero")
        if utf16_len(str(params.get("text", ""))) > TEXT_LIMIT:
            return self._error(400, "Bad Request: message is too long")
        return self._ok(True)

    async def _api_createForumTopic(self, params: dict[str, Any]) -> web.Response:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or chat_id not in self._forums:
            return self._error(400, "Bad Request: the chat is not a forum")
        name = str(params.get("name", ""))
        if not 1 <= len(name) <= 128:
            return self._error(400, "Bad Request: invalid topic name")
        thread_id = next(self._thread_ids.get(chat_id, self._message_ids))
        self._forums[chat_id][thread_id] = name
        return self._ok({"message_thread_id": thread_id, "name": name, "icon_color": 7322096})

    async def _api_copyMessage(self, params: dict[str, Any]) -> web.Response:
        if self._thread_missing(params):
            return self._error(400, THREAD_NOT_FOUND)
        return self._ok({"message_id": next(self._message_ids)})

    async def _api_getChat(self, params: dict[str, Any]) -> web.Response:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or chat_id in self.unknown_chats:
            return self._error(400, "Bad Request: chat not found")
        chat: dict[str, Any] = {
            "id": chat_id,
            "type": "private" if chat_id > 0 else "supergroup",
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }
        if chat_id < 0:
            chat["title"] = "Staff"
            chat["is_forum"] = chat_id in self._forums
        return self._ok(chat)

    def _bot_member(self, chat_id: Any) -> dict[str, Any]:
        wanted = self._bot_members.get(chat_id, {})
        status = wanted.get("status", "administrator")
        member: dict[str, Any] = {"status": status, "user": self._bot_user()}
        if status == "administrator":
            rights = (
                "can_manage_chat",
                "can_delete_messages",
                "can_manage_video_chats",
                "can_restrict_members",
                "can_promote_members",
                "can_change_info",
                "can_invite_users",
                "can_post_stories",
                "can_edit_stories",
                "can_delete_stories",
                "can_send_welcome_messages",
                "can_pin_messages",
            )
            member |= dict.fromkeys(rights, True) | {"can_be_edited": False, "is_anonymous": False}
            member["can_manage_topics"] = wanted.get("can_manage_topics", True)
        elif status == "kicked":
            member["until_date"] = 0
        return member

    async def _api_getChatMember(self, params: dict[str, Any]) -> web.Response:
        user_id = int(params.get("user_id") or 0)
        if user_id == self.bot_id:
            return self._ok(self._bot_member(params.get("chat_id")))
        status = "left" if user_id in self.non_members else "member"
        user = {"id": user_id, "is_bot": False, "first_name": "Сотрудник"}
        return self._ok({"status": status, "user": user})

    async def _api_sendMessage(self, params: dict[str, Any]) -> web.Response:
        if self._thread_missing(params):
            return self._error(400, THREAD_NOT_FOUND)
        text = str(params.get("text", ""))
        if not text.strip():
            return self._error(400, "Bad Request: message text is empty")
        length = utf16_len(text)
        if length > TEXT_LIMIT:
            return self._error(400, "Bad Request: message is too long")
        for entity in params.get("entities") or []:
            offset, size = entity.get("offset", -1), entity.get("length", 0)
            if offset < 0 or size <= 0 or offset + size > length:
                return self._error(
                    400, f"Bad Request: can't parse entities: entity at {offset} is out of range"
                )
        chat_id = params.get("chat_id")
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {
                "id": chat_id,
                "type": "private" if isinstance(chat_id, int) and chat_id > 0 else "group",
                "first_name": "Покупатель",
            },
            "from": self._bot_user(),
            "text": text,
        }
        if params.get("entities"):
            message["entities"] = params["entities"]
        if params.get("message_thread_id") is not None:
            message["message_thread_id"] = params["message_thread_id"]
            message["is_topic_message"] = True
        markup = params.get("reply_markup")
        # As Telegram: a sent message carries only an inline keyboard; a reply keyboard
        # (or its removal) changes the customer's input field and is not echoed.
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        self.bot_messages[(chat_id, int(str(message["message_id"])))] = message
        return self._ok(message)

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> web.Response:
        if not params.get("callback_query_id"):
            return self._error(400, "Bad Request: query is too old or query ID is invalid")
        return self._ok(True)

    async def _api_editMessageText(self, params: dict[str, Any]) -> web.Response:
        return self._edit(params, text=str(params.get("text", "")))

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> web.Response:
        return self._edit(params, text=None)

    def _edit(self, params: dict[str, Any], *, text: str | None) -> web.Response:
        """Edit a sent message's markup and, unless ``text`` is ``None``, its text.

        As the Bot API does, an unknown message or an edit that changes nothing is a 400.
        """
        key = (params.get("chat_id"), int(params.get("message_id") or 0))
        message = self.bot_messages.get(key)
        if message is None:
            return self._error(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if markup == message.get("reply_markup") and text in (None, message.get("text")):
            return self._error(400, "Bad Request: message is not modified")
        edited = {key_: value for key_, value in message.items() if key_ != "reply_markup"}
        if text is not None:
            edited["text"] = text
            edited["edit_date"] = int(time.time())
        if isinstance(markup, dict):
            edited["reply_markup"] = markup
        self.bot_messages[key] = edited
        return self._ok(edited)

    async def _api_getUpdates(self, params: dict[str, Any]) -> web.Response:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        async with self._changed:
            self._confirm(offset)
            if not self._pending and timeout > 0 and not self._closing:
                try:
                    async with asyncio.timeout(timeout):
                        await self._changed.wait_for(lambda: bool(self._pending) or self._closing)
                except TimeoutError:
                    pass
                self._confirm(offset)
            batch = self._pending[:limit]
            # A redelivered update is handed out once, then forgotten like a confirmed one.
            self._pending = [
                p for p in self._pending if not (p.forced and any(p is b for b in batch))
            ]
        return self._ok([pending.update for pending in batch])

    def _confirm(self, offset: int) -> None:
        self._pending = [
            p for p in self._pending if p.forced or int(p.update["update_id"]) >= offset
        ]


def _gone(request: web.Request) -> bool:
    """Whether the client of ``request`` closed its connection."""
    transport = request.transport
    return transport is None or transport.is_closing()


def _decode(form: Any) -> dict[str, Any]:
    """aiogram sends every field as a string; JSON for lists and objects."""
    params: dict[str, Any] = {}
    for key, value in form.items():
        if not isinstance(value, str):
            continue
        decoded: Any = value
        if value[:1] in "[{":
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = value
        elif key in _INT_FIELDS:
            try:
                decoded = int(value)
            except ValueError:
                decoded = value
        params[key] = decoded
    return params
