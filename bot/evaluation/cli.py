"""``python -m bot eval PATH... [--trials K] [--only NAME] [--json FILE]`` (docs/eval.md).

Exit codes: 0 every scenario passed, 1 any failed (or the run could not go on:
Redis, the model), 2 a malformed scenario or a bad setting (one line each).
"""

import argparse
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from bot.evaluation.customers import CustomerPlayer, ScriptedCustomer, SimulatedCustomer
from bot.evaluation.report import EvalReport, ScenarioScore, score_of, table_lines
from bot.evaluation.running import (
    customer_client,
    customer_model_problem,
    eval_settings,
    run_on_redis,
)
from bot.evaluation.scenario import ScenarioError, ScenarioFile, load_scenarios
from bot.llm.types import ToolCallingClient
from bot.ops.startup import StartupError
from bot.settings import Settings

Progress = Callable[[str], None]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bot eval``."""
    parser = argparse.ArgumentParser(
        prog="python -m bot eval",
        description="Run scenario files through the bot's real turn path and judge them "
        "(docs/eval.md).",
    )
    parser.add_argument("paths", nargs="*", type=Path, help="scenario files or directories")
    parser.add_argument("--trials", type=int, default=1, metavar="K", help="trials per scenario")
    parser.add_argument(
        "--only", metavar="NAME", help="run only the scenario of this name (--tau2: task id)"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    parser.add_argument(
        "--tau2", metavar="DOMAIN", help="run tau2-bench's tasks of DOMAIN (retail) instead"
    )
    parser.add_argument(
        "--tasks", type=int, metavar="N", help="with --tau2: the first N tasks only"
    )
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the command; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    if args.trials < 1:
        print("error: --trials: give 1 or more", file=sys.stderr)
        return 2
    if args.tau2 is not None:
        from bot.evaluation.tau2 import main as tau2_main  # noqa: PLC0415 - an optional extra

        return tau2_main(
            args.tau2, tasks=args.tasks, trials=args.trials, json_path=args.json, only=args.only
        )
    files = _scenarios(args.paths, args.only)
    settings = eval_settings(needs_customer=_needs_customer(files)) if files else None
    if files is None or settings is None:
        return 2
    report = run_on_redis(settings, lambda ready: _run(files, ready, args.trials))
    if isinstance(report, int):
        return report
    for line in table_lines(report):
        print(line)
    if args.json is not None:
        report.write_json(args.json)
    return 0 if report.all_passed else 1


def _scenarios(paths: Sequence[Path], only: str | None) -> list[ScenarioFile] | None:
    """The scenarios to run; ``None`` after the one line saying what is wrong."""
    if not paths:
        print("error: give scenario files or directories, e.g. evals/", file=sys.stderr)
        return None
    try:
        return load_scenarios(paths, only)
    except ScenarioError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


async def _run(files: Sequence[ScenarioFile], settings: Settings, trials: int) -> EvalReport:
    client = customer_client(settings) if _needs_customer(files) else None
    try:
        return await run_scenarios(
            files,
            settings,
            trials=trials,
            customer_model=client,
            progress=ProgressLine(sys.stderr),
        )
    finally:
        if client is not None:
            await client.close()


def _needs_customer(files: Sequence[ScenarioFile]) -> bool:
    return any(
        f.scenario.customer.instructions is not None and f.scenario.skip is None for f in files
    )


class ProgressLine:
    """One line on stderr, rewritten in place on a terminal (one line per trial elsewhere)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._width = 0

    def __call__(self, text: str) -> None:
        """Show ``text`` (empty: clear the line)."""
        if self._tty:
            line = text[:79]
            self._stream.write("\r" + line.ljust(self._width) + ("" if text else "\r"))
            self._width = len(line)
        elif text:
            self._stream.write(text + "\n")
        self._stream.flush()


async def run_scenarios(
    files: Sequence[ScenarioFile],
    settings: Settings,
    *,
    trials: int = 1,
    llm: ToolCallingClient | None = None,
    customer_model: ToolCallingClient | None = None,
    progress: Progress | None = None,
) -> EvalReport:
    """Run each scenario ``trials`` times, each trial fresh; the report.

    ``llm`` replaces the bot's configured model (tests); ``customer_model`` plays
    the simulated customers. Skipped scenarios are reported, not run.
    """
    from bot.evaluation.trial import Trial  # noqa: PLC0415 - builds the whole engine
    from bot.knowledge.watcher import KnowledgeError, open_help_center  # noqa: PLC0415

    try:
        # Indexed once for the run: every trial's application searches the same articles.
        help_center = open_help_center(
            settings.tools.knowledge_dir, top_k=settings.tools.knowledge_top_k
        )
    except KnowledgeError as error:
        raise StartupError(str(error)) from error
    run_id = secrets.token_hex(3)
    scores: list[ScenarioScore] = []
    number = 0
    total = sum(trials for f in files if f.scenario.skip is None)
    for file in files:
        scenario = file.scenario
        if scenario.skip is not None:
            scores.append(
                ScenarioScore(name=scenario.name, trials=0, passes=0, skipped=scenario.skip)
            )
            continue
        outcomes: list[tuple[str, ...]] = []
        for trial in range(1, trials + 1):
            number += 1
            if progress is not None:
                progress(f"eval {number}/{total}: {scenario.name} (trial {trial}/{trials})")
            player: CustomerPlayer
            if scenario.customer.script is not None:
                player = ScriptedCustomer(scenario.customer.script)
            else:
                if customer_model is None:
                    raise StartupError(customer_model_problem(settings) or "no customer model")
                player = SimulatedCustomer(customer_model, scenario.customer, scenario.language)
            result = await Trial(
                scenario,
                settings,
                prefix=f"ev{run_id}-{number}",
                customer=player,
                llm=llm,
                help_center=help_center,
            ).run()
            outcomes.append(result.reasons)
        scores.append(score_of(scenario.name, outcomes))
    if progress is not None:
        progress("")
    return EvalReport(k=trials, scores=tuple(scores))
