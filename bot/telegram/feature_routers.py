"""A feature's Telegram twin: its routers and where they go, and its part in the worker's jobs.

Each feature of :data:`bot.app.FEATURES` that customers or staff reach in
Telegram has a twin (:class:`TelegramTwin`, listed in
:data:`bot.telegram.dispatcher.TWINS`): two functions of its handlers module,
``routers`` taking the application's :class:`~bot.ops.features.Features` and
returning its :class:`FeatureRouters`, and ``jobs`` taking the worker's
:class:`~bot.telegram.feature_jobs.WorkerKit` and returning its
:class:`~bot.telegram.feature_jobs.FeatureJobs` (its steps' deliverers, its
notices, its schedules). A twin is asked whether its feature is on or off: some
routers answer in either case (``/operator`` tells the hours without a staff
group; a press on an old satisfaction question changes nothing). Its handlers
declare the feature by its name (``csat: CsatFeature | None = None``): the
dispatcher hands every feature that is on to the handlers under its name.
"""

from collections.abc import Callable
from dataclasses import dataclass

from aiogram import Router

from bot.ops.features import Features
from bot.telegram.feature_jobs import FeatureJobs, WorkerKit, no_jobs


@dataclass(frozen=True, kw_only=True)
class FeatureRouters:
    """A feature's routers.

    ``routers`` sit beside the others before the customer's messages (the staff
    chat, button presses: each filtered to its own); ``customer`` come first among
    the customer's messages, before the commands, in the order of the twins.
    """

    routers: tuple[Router, ...] = ()
    customer: tuple[Router, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TelegramTwin:
    """A feature's Telegram twin: its routers for the application's features, and its part
    in the jobs of a worker (none by default)."""

    routers: Callable[[Features], FeatureRouters]
    jobs: Callable[[WorkerKit], FeatureJobs] = no_jobs
