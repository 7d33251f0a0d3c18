"""A feature's Telegram twin: its routers, and where they go in the dispatcher.

Each feature of :data:`bot.app.FEATURES` that customers or staff reach in
Telegram has a twin here: a function of its handlers module taking the
application's :class:`~bot.ops.features.Features` and returning its
:class:`FeatureRouters`. A twin is asked whether its feature is on or off: some
routers answer in either case (``/operator`` tells the hours without a staff
group; a press on an old satisfaction question changes nothing). Its handlers
declare the feature by its name (``csat: CsatFeature | None = None``): the
dispatcher hands every feature that is on to the handlers under its name.
"""

from collections.abc import Callable
from dataclasses import dataclass

from aiogram import Router

from bot.ops.features import Features


@dataclass(frozen=True, kw_only=True)
class FeatureRouters:
    """A feature's routers.

    ``routers`` sit beside the others before the customer's messages (the staff
    chat, button presses: each filtered to its own); ``customer`` come first among
    the customer's messages, before the commands, in the order of the twins.
    """

    routers: tuple[Router, ...] = ()
    customer: tuple[Router, ...] = ()


TelegramTwin = Callable[[Features], FeatureRouters]
"""A feature's Telegram twin: its routers for the application's features."""
