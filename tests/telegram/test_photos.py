"""Photos end to end: the fake Bot API serves the image, the scripted model sees it.

With ``VISION=on`` the real aiogram Bot downloads the chosen size from the fake
Bot API and the real ``AsyncOpenAI`` client sends it as an image part of the
customer's message; the history keeps a marker and the file id, never the bytes.
"""

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.engine.chat_service import PHOTO_MARK
from bot.queue.admission import IntakeVerdict
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import (
    ScriptedOpenAIServer,
    image_urls,
    text_answer,
    tool_call_answer,
    user_texts,
)
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, echo_responder
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from bot.tryout.demo_shop import RedisDemoShop
from tests.telegram.test_handoff import Desk
from tools.shop_backend import Customer

PREFIX = "photos"
CHAT = 706
STAFF = -1001234567890
LIMIT = 100_000
SMALL = b"\xff\xd8small-jpeg"
MEDIUM = b"\xff\xd8" + b"m" * 60_000


def photo(caption: str | None = "Пришёл разбитым, заказ 8041") -> dict[str, Any]:
    """A photo in three sizes; the largest is over ``LIMIT``."""
    sizes = [
        {"file_id": "p-s", "file_unique_id": "us", "width": 90, "height": 90, "file_size": 900},
        {
            "file_id": "p-m",
            "file_unique_id": "um",
            "width": 800,
            "height": 800,
            "file_size": len(MEDIUM),
        },
        {
            "file_id": "p-l",
            "file_unique_id": "ul",
            "width": 2560,
            "height": 2560,
            "file_size": 900_000,
        },
    ]
    body: dict[str, Any] = {"photo": sizes}
    if caption is not None:
        body["caption"] = caption
    return body


class PhotoStack(TelegramStack):
    """The Telegram side against the three test servers."""

    def metric(self, name: str, **labels: str) -> float:
        value = self.app.metrics.registry.get_sample_value(f"support_{name}", labels)
        return value or 0.0

    async def turn_entries(self) -> list[dict[str, str]]:
        """The turn entries of the audit once everything queued in the chat was handled."""
        await self.settle(CHAT)
        entries = await stream_entries(self.app.redis, f"{PREFIX}:audit")
        return [entry for entry in entries if entry.get("type") == "turn"]


async def _stack(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
    **env: Any,
) -> AsyncIterator[PhotoStack]:
    settings = stack_settings(
        telegram, openai_server, redis_server.url, prefix=PREFIX, IMAGE_MAX_BYTES=LIMIT, **env
    )
    async with open_application(settings) as app:
        stack = PhotoStack(app, bot, telegram=telegram)
        async with stack.running():
            yield stack


@pytest.fixture
async def vision(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> AsyncIterator[PhotoStack]:
    async for built in _stack(telegram, openai_server, redis_server, bot, VISION="on"):
        yield built


@pytest.fixture
async def blind(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> AsyncIterator[PhotoStack]:
    async for built in _stack(telegram, openai_server, redis_server, bot, VISION="off"):
        yield built


async def test_with_vision_the_photo_goes_to_the_model_as_an_image_part_of_the_message(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("p-s", SMALL)
    telegram.add_file("p-m", MEDIUM)
    openai_server.script(text_answer("Очень жаль! Оформим возврат."), text_answer("Пожалуйста."))

    await vision.feed(telegram.message_update(CHAT, extra=photo()))
    assert await telegram.wait_for_texts(CHAT, 1) == ["Очень жаль! Оформим возврат."]

    # The largest size within IMAGE_MAX_BYTES, as a data URL, beside the caption.
    (request,) = openai_server.requests
    expected_url = f"data:image/jpeg;base64,{base64.b64encode(MEDIUM).decode()}"
    assert image_urls(request.body) == [expected_url]
    last = request.messages[-1]
    assert last["role"] == "user"
    assert last["content"][0] == {
        "type": "text",
        "text": f"{PHOTO_MARK} Пришёл разбитым, заказ 8041",
    }
    assert len(telegram.downloads) == 1
    # The history keeps the marker and the file id, never the image.
    session = await vision.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    question = session.messages[0]
    assert (question.content, question.photos) == (
        f"{PHOTO_MARK} Пришёл разбитым, заказ 8041",
        ("p-m",),
    )
    raw = await vision.app.redis.hget(f"{PREFIX}:{{tg:{CHAT}}}:session", "d")
    assert raw is not None
    assert base64.b64encode(MEDIUM).decode()[:40].encode() not in raw
    (turn,) = await vision.turn_entries()
    assert (turn["outcome"], turn["input_kind"]) == ("answered", "photo")
    assert vision.metric("images_to_model_total") == 1

    # A later turn knows a photo was sent; the image itself is not sent again.
    await vision.feed(telegram.message_update(CHAT, "Спасибо"))
    assert (await telegram.wait_for_texts(CHAT, 3))[-1] == "Пожалуйста."
    later = openai_server.requests[1]
    assert image_urls(later.body) == []
    assert user_texts(later.body) == [f"{PHOTO_MARK} Пришёл разбитым, заказ 8041", "Спасибо"]


async def test_a_photo_without_a_caption_is_a_turn_of_its_own(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("p-m", MEDIUM)
    openai_server.script(text_answer("Что случилось с товаром?"))
    await vision.feed(telegram.message_update(CHAT, extra=photo(caption=None)))
    assert await telegram.wait_for_texts(CHAT, 1) == ["Что случилось с товаром?"]
    (request,) = openai_server.requests
    assert request.messages[-1]["content"][0] == {"type": "text", "text": PHOTO_MARK}
    assert len(image_urls(request.body)) == 1


async def test_an_image_file_goes_with_its_own_type_and_other_files_do_not(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    png = b"\x89PNG\r\n\x1a\nscreenshot"
    telegram.add_file("doc-png", png)
    openai_server.script(text_answer("Вижу скриншот."))
    document = {
        "file_id": "doc-png",
        "file_unique_id": "ud",
        "file_name": "screen.png",
        "mime_type": "image/png",
        "file_size": len(png),
    }
    await vision.feed(
        telegram.message_update(CHAT, extra={"document": document, "caption": "Ошибка оплаты"})
    )
    assert await telegram.wait_for_texts(CHAT, 1) == ["Вижу скриншот."]
    (request,) = openai_server.requests
    assert image_urls(request.body) == [f"data:image/png;base64,{base64.b64encode(png).decode()}"]

    pdf = {**document, "file_id": "doc-pdf", "file_name": "a.pdf", "mime_type": "application/pdf"}
    await vision.feed(telegram.message_update(CHAT, extra={"document": pdf}))
    assert (await telegram.wait_for_texts(CHAT, 2))[-1] == customer_texts.DOCUMENT
    assert len(openai_server.requests) == 1


async def test_an_image_over_the_limit_is_refused_kindly_without_a_download(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    document = {
        "file_id": "big",
        "file_unique_id": "ub",
        "mime_type": "image/jpeg",
        "file_size": LIMIT + 1,
    }
    await vision.feed(telegram.message_update(CHAT, extra={"document": document}))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.PHOTO_TOO_LARGE]
    assert telegram.downloads == []
    assert openai_server.requests == []
    assert vision.metric("media_refusals_total", kind="photo", reason="too_large") == 1


async def test_without_vision_the_bot_says_it_cannot_look_and_asks_no_model(
    blind: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("p-m", MEDIUM)
    await blind.feed(telegram.message_update(CHAT, extra=photo()))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.PHOTO]
    assert telegram.downloads == []
    assert openai_server.requests == []
    assert await blind.turn_entries() == []
    assert blind.metric("media_refusals_total", kind="photo", reason="vision_off") == 1


async def test_without_vision_and_with_a_staff_group_a_person_is_offered(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> None:
    telegram.make_forum(STAFF)
    async for stack in _stack(telegram, openai_server, redis_server, bot, STAFF_CHAT_ID=STAFF):
        await stack.feed(telegram.message_update(CHAT, extra=photo()))
        assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.PHOTO_OPERATOR]
        assert openai_server.requests == []


def album_item(index: int, caption: str | None = None) -> dict[str, Any]:
    """One photo of album ``A1`` (one size each)."""
    size = {
        "file_id": f"a-{index}",
        "file_unique_id": f"ua{index}",
        "width": 640,
        "height": 480,
        "file_size": 1000 + index,
    }
    body: dict[str, Any] = {"photo": [size], "media_group_id": "A1"}
    if caption is not None:
        body["caption"] = caption
    return body


async def test_an_album_of_three_photos_is_one_turn(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    contents = [f"image-{index}".encode() for index in range(3)]
    for index, content in enumerate(contents):
        telegram.add_file(f"a-{index}", content)
    openai_server.script(text_answer("Вижу три фото, оформим возврат."))

    for index in range(3):
        caption = "Вот что пришло" if index == 1 else None
        await vision.feed(telegram.message_update(CHAT, extra=album_item(index, caption)))

    assert await telegram.wait_for_texts(CHAT, 1) == ["Вижу три фото, оформим возврат."]
    (turn,) = await vision.turn_entries()
    assert turn["input_kind"] == "photo"
    (request,) = openai_server.requests
    expected = [f"data:image/jpeg;base64,{base64.b64encode(c).decode()}" for c in contents]
    assert image_urls(request.body) == expected
    assert request.messages[-1]["content"][0]["text"] == f"{PHOTO_MARK} Вот что пришло"
    session = await vision.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert [m.photos for m in session.messages if m.role == "user"] == [("a-0", "a-1", "a-2")]
    # Only the answer and the settle barrier's help: nothing for the album's other photos.
    assert telegram.sent_texts(CHAT) == ["Вижу три фото, оформим возврат.", customer_texts.HELP]


async def test_every_caption_of_an_album_reaches_the_model_in_order(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """Captions after the first are the customer's words too (issue 46)."""
    for index in range(3):
        telegram.add_file(f"a-{index}", f"image-{index}".encode())
    openai_server.script(text_answer("Вижу коробку и чек."))
    captions = {0: "Коробка пришла мятой", 2: "а вот чек, заказ 8041"}
    for index in range(3):
        await vision.feed(
            telegram.message_update(CHAT, extra=album_item(index, captions.get(index)))
        )

    assert await telegram.wait_for_texts(CHAT, 1) == ["Вижу коробку и чек."]
    (request,) = openai_server.requests
    expected = f"{PHOTO_MARK} Коробка пришла мятой\nа вот чек, заказ 8041"
    assert request.messages[-1]["content"][0]["text"] == expected
    session = await vision.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert [m.content for m in session.messages if m.role == "user"] == [expected]


TURN_LIMIT = 250_000
"""The images of one turn at most (``IMAGE_TURN_MAX_BYTES``) in the budget tests."""


def encoded(content: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(content).decode()}"


@pytest.fixture
async def budgeted(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> AsyncIterator[PhotoStack]:
    async for built in _stack(
        telegram,
        openai_server,
        redis_server,
        bot,
        VISION="on",
        IMAGE_TURN_MAX_BYTES=TURN_LIMIT,
    ):
        yield built


def image_file(index: int, size: int, caption: str | None = None) -> dict[str, Any]:
    """An image file of album ``F1`` just under the per-image cap (no smaller size to take)."""
    document = {
        "file_id": f"f-{index}",
        "file_unique_id": f"uf{index}",
        "file_name": f"shot-{index}.jpg",
        "mime_type": "image/jpeg",
        "file_size": size,
    }
    body: dict[str, Any] = {"document": document, "media_group_id": "F1"}
    if caption is not None:
        body["caption"] = caption
    return body


async def test_an_album_over_the_turns_image_budget_stays_within_it_at_every_model_call(
    budgeted: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """Ten image files just under the per-image cap: the turn's images stay within the total.

    Before issue 46 each of the turn's two model requests carried all ten (about
    1.3 MB here, 69.7 MB with the default caps); now the first two fit, the rest
    are left out, and the model reads that (in the conversation's language) to tell
    the customer.
    """
    size = LIMIT - 10
    contents = [bytes([index]) * size for index in range(10)]
    for index, content in enumerate(contents):
        telegram.add_file(f"f-{index}", content)
    openai_server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        text_answer("Вижу первые два снимка; остальные пришлите, пожалуйста, отдельно."),
    )
    for index in range(10):
        caption = "Заказ 8041 пришёл побитым" if index == 0 else None
        await budgeted.feed(telegram.message_update(CHAT, extra=image_file(index, size, caption)))

    answer = "Вижу первые два снимка; остальные пришлите, пожалуйста, отдельно."
    await telegram.wait_for(lambda: answer in telegram.sent_texts(CHAT))
    first, second = openai_server.requests
    for request in (first, second):
        # The images (base64: 4/3 of their bytes) plus the conversation's text.
        assert int(request.headers["content-length"]) < TURN_LIMIT * 4 // 3 + 40_000
        assert image_urls(request.body) == [encoded(contents[0]), encoded(contents[1])]
    parts = first.messages[-1]["content"]
    assert parts[0]["text"] == f"{PHOTO_MARK} Заказ 8041 пришёл побитым"
    note = parts[-1]
    assert note["type"] == "text"
    assert note["text"] == customer_texts.IMAGES_LEFT_OUT.format(shown=2, sent=10)
    # Only the images the model saw were downloaded.
    assert len(telegram.downloads) == 2
    assert budgeted.metric("images_to_model_total") == 2
    assert budgeted.metric("media_refusals_total", kind="photo", reason="over_turn_budget") == 8
    # The history keeps the file ids of what the model saw.
    session = await budgeted.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert [m.photos for m in session.messages if m.role == "user"] == [("f-0", "f-1")]


async def test_an_albums_photos_are_taken_smaller_to_fit_the_turns_budget(
    budgeted: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """Photos come in several sizes: each is shown, the later ones smaller, within the total."""
    large, small = 90_000, 20_000
    for index in range(4):
        telegram.add_file(f"L{index}", b"L" * large)
        telegram.add_file(f"S{index}", b"S" * small)
    openai_server.script(text_answer("Вижу четыре фото."))
    for index in range(4):
        sizes = [
            {
                "file_id": f"S{index}",
                "file_unique_id": f"s{index}",
                "width": 320,
                "height": 320,
                "file_size": small,
            },
            {
                "file_id": f"L{index}",
                "file_unique_id": f"l{index}",
                "width": 1280,
                "height": 1280,
                "file_size": large,
            },
        ]
        extra = {"photo": sizes, "media_group_id": "P1"}
        await budgeted.feed(telegram.message_update(CHAT, extra=extra))

    assert await telegram.wait_for_texts(CHAT, 1) == ["Вижу четыре фото."]
    (request,) = openai_server.requests
    # 90 + 90 + 20 + 20 = 220 kB within 250 kB; a third large one would not fit.
    expected = [b"L" * large, b"L" * large, b"S" * small, b"S" * small]
    assert image_urls(request.body) == [encoded(content) for content in expected]
    assert int(request.headers["content-length"]) < TURN_LIMIT * 4 // 3 + 40_000
    note = request.messages[-1]["content"][-1]
    assert note == {"type": "text", "text": customer_texts.IMAGES_REDUCED.format(reduced=2)}
    assert budgeted.metric("images_to_model_total") == 4


async def test_an_album_of_ten_is_charged_once_by_the_flood_limit(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """Ten photos sent as one album are one message: none is refused as "too often".

    Before issue 46 each photo was charged (``FLOOD_BURST`` 5): the sixth and later
    were refused and the customer told to slow down for sending one album.
    """
    for index in range(10):
        telegram.add_file(f"a-{index}", f"image-{index}".encode())
    openai_server.script(text_answer("Вижу десять фото."))
    verdicts = [
        await vision.feed(telegram.message_update(CHAT, extra=album_item(index)))
        for index in range(10)
    ]
    assert verdicts == [IntakeVerdict.QUEUED] * 10
    assert await telegram.wait_for_texts(CHAT, 1) == ["Вижу десять фото."]
    (request,) = openai_server.requests
    assert len(image_urls(request.body)) == 10
    # The album cost one token of the burst: messages after it are limited as before.
    texts = [await vision.feed(telegram.message_update(CHAT, f"вопрос {n}")) for n in range(8)]
    assert IntakeVerdict.RATE_WARN in texts


async def test_without_vision_an_album_gets_one_line(
    blind: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    for index in range(3):
        await blind.feed(telegram.message_update(CHAT, extra=album_item(index)))
    await blind.settle(CHAT)
    assert telegram.sent_texts(CHAT) == [customer_texts.PHOTO, customer_texts.HELP]
    assert openai_server.requests == []


async def test_a_return_carries_the_two_photos_the_customer_sent(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    for index in range(2):
        telegram.add_file(f"a-{index}", f"image-{index}".encode())
    request_return = {"order_id": "8043", "items": ["клавиатура"], "reason": "сломана"}
    openai_server.script(
        tool_call_answer("request_return", request_return),
        text_answer("Проверьте карточку и нажмите «Подтвердить»."),
    )
    for index in range(2):
        caption = "Клавиатура из заказа 8043 пришла сломанной" if index == 0 else None
        await vision.feed(telegram.message_update(CHAT, extra=album_item(index, caption)))

    await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
    card_id, card_text, keyboard = telegram.keyboards(CHAT)[0]
    assert "Фото к заявке: 2." in card_text
    yes = keyboard[0][0]["callback_data"]
    await vision.feed(telegram.callback_update(CHAT, card_id, yes))
    await telegram.wait_for(
        lambda: any(
            call.ok and call.params.get("message_id") == card_id
            for call in telegram.calls_of("editMessageText")
        )
    )
    (edit,) = [
        call.params["text"]
        for call in telegram.calls_of("editMessageText")
        if call.ok and call.params.get("message_id") == card_id
    ]
    assert edit.startswith("✅ Возврат по заказу 8043 оформлен")
    assert edit.endswith(", фото: 2")
    # The shop recorded the photos' file ids with the return, never the images.
    shop = RedisDemoShop(vision.app.redis, vision.app.keys, vision.app.shop)
    order = await shop.order(Customer(user_id=CHAT, chat_id=CHAT), "8043")
    assert order is not None
    assert order.return_photos == ("a-0", "a-1")


async def test_while_a_person_is_awaited_staff_see_every_photo_of_an_album(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> None:
    telegram.make_forum(STAFF)
    for index in range(3):
        telegram.add_file(f"a-{index}", f"image-{index}".encode())
    openai_server.script(text_answer("Передал фото сотруднику."))
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix=PREFIX,
        VISION="on",
        STAFF_CHAT_ID=STAFF,
        ANALYSIS="off",
        CSAT="off",
    )
    async with open_application(settings) as app:
        desk = Desk(app, bot, telegram, ScriptedClient(echo_responder), STAFF)
        async with desk.running():
            thread = await desk.hand_off(CHAT)
            ids = [await desk.customer(None, CHAT, extra=album_item(index)) for index in range(3)]
            await telegram.wait_for(lambda: "Передал фото сотруднику." in telegram.sent_texts(CHAT))
            await telegram.wait_for(lambda: len(telegram.copies(STAFF, thread)) == 3)
            assert [c["message_id"] for c in telegram.copies(STAFF, thread)] == ids
            assert len(openai_server.requests) == 1


async def test_a_caption_over_the_message_limit_is_refused_kindly_without_a_download(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
    bot: Bot,
) -> None:
    telegram.add_file("p-m", MEDIUM)
    async for stack in _stack(
        telegram, openai_server, redis_server, bot, VISION="on", MESSAGE_MAX_CHARS=20
    ):
        await stack.feed(telegram.message_update(CHAT, extra=photo("Пришёл разбитым, " * 3)))
        assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.PHOTO_CAPTION_TOO_LONG]
        assert telegram.downloads == []
        assert openai_server.requests == []
        assert await stack.app.sessions.load(f"tg:{CHAT}") is None
        assert await stack.turn_entries() == []
        assert stack.metric("media_refusals_total", kind="photo", reason="caption_too_long") == 1
        # A caption within the limit is a turn as before.
        openai_server.script(text_answer("Вижу фото."))
        await stack.feed(telegram.message_update(CHAT, extra=photo("Разбит")))
        await telegram.wait_for(lambda: "Вижу фото." in telegram.sent_texts(CHAT))


async def test_an_albums_photo_after_its_turn_is_kept_in_the_history_without_a_second_answer(
    vision: PhotoStack, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.add_file("a-0", b"image-0")
    late_path = telegram.add_file("a-1", b"image-1")
    openai_server.script(text_answer("Вижу фото."), text_answer("Учту оба фото."))
    await vision.feed(telegram.message_update(CHAT, extra=album_item(0, "Пришло мятым")))
    await telegram.wait_for(lambda: "Вижу фото." in telegram.sent_texts(CHAT))
    # The album's second photo reaches the bot after the album's turn ran.
    await vision.feed(telegram.message_update(CHAT, extra=album_item(1, "и сбоку")))
    await vision.settle(CHAT)

    assert telegram.sent_texts(CHAT) == ["Вижу фото.", customer_texts.HELP]
    assert len(openai_server.requests) == 1
    assert len(await vision.turn_entries()) == 1
    # Kept by its file id, never downloaded (nobody looks at it now).
    assert telegram.downloads != []
    assert late_path not in telegram.downloads
    session = await vision.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    users = [(m.content, m.photos) for m in session.messages if m.role == "user"]
    assert users == [
        (f"{PHOTO_MARK} Пришло мятым", ("a-0",)),
        (f"{PHOTO_MARK} и сбоку", ("a-1",)),
    ]
    # The next turn's model reads that the photo came.
    await vision.feed(telegram.message_update(CHAT, "Что с возвратом?"))
    await telegram.wait_for(lambda: "Учту оба фото." in telegram.sent_texts(CHAT))
    assert f"{PHOTO_MARK} и сбоку" in user_texts(openai_server.requests[-1].body)
