"""The Telegram side of one process, built in one place: dispatcher, intake, workers, sweepers.

:func:`build_telegram_side` wires what every mode of ``python -m bot`` runs on
top of the engine (:func:`bot.app.build_application`): the dispatcher with its
handlers, the intake that queues updates in their chats, the worker pool
whose job runner feeds queued updates to the dispatcher, and the sweepers of
the features (idle handoffs, due satisfaction questions, idle analyses).
Nothing is started here: the process (:mod:`bot.telegram.process`) starts the
parts under its supervisor, the in-process test stack
(:mod:`bot.testing.telegram_stack`) in its own event loop.
"""

from dataclasses import dataclass

from aiogram import Bot

from bot.actions.feature import ActionsFeature
from bot.app import Application
from bot.engine.chat_service import ChatService
from bot.handoff.feature import HandoffFeature
from bot.ops.periodic import Periodic
from bot.ops.supervision import TaskSupervisor
from bot.queue.dead_letters import DeadLetters
from bot.queue.delivery_steps import EditCard, SendText
from bot.queue.worker import WorkerPool, WorkerPoolConfig
from bot.telegram.action_cards import CardEditDeliverer
from bot.telegram.callbacks import PressAnswers
from bot.telegram.delivery import Outgoing, StepDeliverers, TextDeliverer, route
from bot.telegram.dispatcher import TWINS, TelegramFrontEnd, build_dispatcher
from bot.telegram.feature_jobs import JobHooks, WorkerKit
from bot.telegram.photos import vision_on
from bot.telegram.sending import ReplySender
from bot.telegram.update_intake import TelegramIntake
from bot.telegram.update_jobs import TelegramJobRunner

PRESS_ANSWER_MAX_WAIT_SECONDS = 5.0
"""The longest 429 wait an answer to a button press is retried after: past a few seconds
the spinner has stopped by itself, and intake should not hold the update that long."""


@dataclass(frozen=True, kw_only=True)
class TelegramSide:
    """What one process runs for Telegram, built and not yet started.

    ``named_sweepers``: the sweepers of the features that are on, each with its
    task's name (``handoff-sweeper``, ``csat-sweeper``, ``analysis-sweeper``);
    ``runner``: what the workers run each job with (its features' notices and hooks).
    """

    app: Application
    bot: Bot
    front: TelegramFrontEnd
    intake: TelegramIntake
    workers: WorkerPool
    runner: TelegramJobRunner
    named_sweepers: tuple[tuple[str, Periodic], ...] = ()

    @property
    def sweepers(self) -> list[Periodic]:
        """Every sweeper this process runs (those of features that are on)."""
        return [sweeper for _, sweeper in self.named_sweepers]

    def sweeper(self, feature: str) -> Periodic | None:
        """The sweeper of ``feature`` (its name: ``csat``, ...); ``None`` when it is off."""
        for name, sweeper in self.named_sweepers:
            if name == f"{feature}-sweeper":
                return sweeper
        return None


def build_telegram_side(
    app: Application,
    bot: Bot,
    *,
    tasks: TaskSupervisor | None = None,
    chat: ChatService | None = None,
    sweep_period_seconds: float | None = None,
) -> TelegramSide:
    """The dispatcher, intake, worker pool and sweepers of ``app``, sending through ``bot``.

    ``tasks`` supervises the workers' tasks; ``chat`` stands in for ``app.chat``
    (a test's watched chat service); ``sweep_period_seconds`` overrides the
    sweepers' period (tests sweep often; production derives it from the idle times).
    """
    chat_service = app.chat if chat is None else chat
    front = build_dispatcher(app, chat_service=chat_service)
    handoff = app.features.get(HandoffFeature)
    actions = app.features.get(ActionsFeature)
    intake = TelegramIntake(
        intake=app.intake,
        bot=bot,
        allow_groups=app.settings.telegram.allow_groups,
        topics=handoff.service.topics if handoff is not None else None,
        presses=PressAnswers(
            bot=bot,
            # A press's answer is worth a few seconds only, and intake waits for it.
            sender=ReplySender(
                max_attempts=app.settings.telegram.send_max_attempts,
                max_retry_after_seconds=PRESS_ANSWER_MAX_WAIT_SECONDS,
                retries=app.metrics,
            ),
            redis=app.redis,
            keys=app.keys,
            sessions=app.sessions,
            actions=actions.confirmations if actions is not None else None,
            languages=app.languages,
        ),
        vision=vision_on(app.settings),
    )
    runner = _runner(app, bot, front, chat=chat_service)
    return TelegramSide(
        app=app,
        bot=bot,
        front=front,
        intake=intake,
        workers=_workers(app, runner, tasks),
        runner=runner,
        named_sweepers=tuple(app.features.sweepers(sweep_period_seconds)),
    )


def _runner(
    app: Application, bot: Bot, front: TelegramFrontEnd, *, chat: ChatService
) -> TelegramJobRunner:
    """The job runner of this process's workers, with the features' deliverers and hooks."""
    settings = app.settings
    # The blocked flag comes with the chat's state (no extra round trip per send);
    # the sender still sets it on a 403. The staff desk sends through it too.
    replies = ReplySender(
        max_attempts=settings.telegram.send_max_attempts,
        blocked=app.blocked,
        check_blocked=False,
        retries=app.metrics,
    )
    out = Outgoing(bot=bot, replies=replies, languages=app.languages)
    steps, hooks = _feature_jobs(app, out, chat=chat)
    return TelegramJobRunner(
        bot=bot,
        dispatcher=front.dispatcher,
        out=out,
        steps=steps,
        chat=chat,
        audit=app.turn_audit,
        dead_letters=DeadLetters(app.redis, keys=app.keys),
        max_attempts=settings.worker.job_max_attempts,
        hooks=hooks,
        languages=app.languages,
    )


def _workers(
    app: Application, runner: TelegramJobRunner, tasks: TaskSupervisor | None
) -> WorkerPool:
    """The worker pool of this process, running queued Telegram updates (under ``tasks``)."""
    settings = app.settings
    return WorkerPool(
        stream=app.work,
        queue=app.queue,
        runner=runner,
        retries=app.metrics,
        settings=WorkerPoolConfig(
            concurrency=settings.worker.chats_in_hand(settings.llm.max_connections),
            lease_seconds=settings.session.lease_seconds,
            shutdown_grace_seconds=settings.telegram.shutdown_grace_seconds,
            outage_wait_seconds=settings.redis.outage_wait_seconds,
            job_deadline_seconds=settings.worker.job_deadline_seconds,
            # A blocking read must come back well before the socket timeout fires.
            read_block_ms=max(50, min(1000, int(settings.redis.socket_timeout_seconds * 500))),
        ),
        supervisor=tasks,
    )


def _feature_jobs(
    app: Application, out: Outgoing, *, chat: ChatService
) -> tuple[StepDeliverers, JobHooks]:
    """The deliverer of every step kind a reply is made of, and the features' notices and hooks.

    The one place a feature's worker part is registered: the core's steps (a text,
    an edit) here, then each Telegram twin's of :data:`TWINS` (its steps, notices,
    schedules after an answer and a closed handoff, given-up jobs), in their order.
    The job runner walks the steps and runs the hooks, and knows none of them.
    """
    kit = WorkerKit(app=app, out=out, chat=chat)
    parts = [twin.jobs(kit) for twin in TWINS]
    core = [
        route(EditCard, CardEditDeliverer(out=out).deliver),
        route(SendText, TextDeliverer(out=out, chat=chat).deliver),
    ]
    steps = StepDeliverers([*core, *(step for part in parts for step in part.steps)])
    return steps, JobHooks.of(parts)
