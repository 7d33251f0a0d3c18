"""Scores and the report: pass^1, pass^k (as tau2-bench defines them), the table, the JSON.

pass^k of one scenario is the chance that k trials of it, drawn from the n run,
all pass: C(c, k) / C(n, k) with c of the n passing (tau2-bench's estimator).
The run's pass^k is its mean over the scenarios; pass^1 is the mean share of
passing trials. With ``--trials K`` and k = K, pass^k is the share of scenarios
that passed every trial.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from pathlib import Path

WIDTH = 80
NAME_WIDTH = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioScore:
    """One scenario's trials: how many passed and why the others failed (first reason each)."""

    name: str
    trials: int
    passes: int
    reasons: tuple[str, ...] = ()
    # Not run, with this reason (the file's ``skip:``).
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        """Every trial passed."""
        return self.skipped is None and self.passes == self.trials


def pass_hat_k(trials: int, passes: int, k: int) -> float:
    """tau2-bench's pass^k of one scenario: C(passes, k) / C(trials, k)."""
    if k < 1 or k > trials:
        raise ValueError(f"pass^{k} needs 1 <= k <= {trials} trials")
    return comb(passes, k) / comb(trials, k)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalReport:
    """Every scenario's score, and k."""

    k: int
    scores: tuple[ScenarioScore, ...]

    @property
    def scored(self) -> tuple[ScenarioScore, ...]:
        """The scenarios that ran (skipped ones aside)."""
        return tuple(score for score in self.scores if score.skipped is None)

    def pass_k(self, k: int) -> float:
        """The mean pass^k over the scenarios that ran (0 when none did)."""
        scored = self.scored
        if not scored:
            return 0.0
        return sum(pass_hat_k(s.trials, s.passes, k) for s in scored) / len(scored)

    @property
    def all_passed(self) -> bool:
        """Every scenario that ran passed every trial."""
        return all(score.passed for score in self.scored)

    def to_json(self) -> dict[str, object]:
        """``--json``'s document."""
        return {
            "k": self.k,
            "pass_1": round(self.pass_k(1), 4),
            "pass_k": round(self.pass_k(self.k), 4),
            "scenarios": [
                {
                    "name": score.name,
                    "passed": score.passed,
                    "trials": score.trials,
                    "passes": score.passes,
                    "reasons": list(score.reasons),
                    **({"skipped": score.skipped} if score.skipped is not None else {}),
                }
                for score in self.scores
            ],
        }

    def write_json(self, path: Path) -> None:
        """Write :meth:`to_json` to ``path``."""
        path.write_text(
            json.dumps(self.to_json(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )


def table_lines(report: EvalReport) -> list[str]:
    """The table (at most :data:`WIDTH` columns) and the summary lines."""
    k = report.k
    lines = [_fit(f"{'scenario':<{NAME_WIDTH}} {'passed':>7}  first failure")]
    lines.append("-" * (NAME_WIDTH + 1 + 7 + 2 + 14))
    for score in report.scores:
        name = _clip(score.name, NAME_WIDTH)
        if score.skipped is not None:
            lines.append(_fit(f"{name:<{NAME_WIDTH}} {'skip':>7}  {score.skipped}"))
            continue
        passes = f"{score.passes}/{score.trials}"
        reason = score.reasons[0] if score.reasons else ""
        lines.append(_fit(f"{name:<{NAME_WIDTH}} {passes:>7}  {reason}"))
    scored = report.scored
    passed = sum(1 for score in scored if score.passed)
    lines.append("")
    summary = f"{passed} of {len(scored)} scenarios passed every trial"
    skipped = len(report.scores) - len(scored)
    if skipped:
        summary += f" ({skipped} skipped)"
    lines.append(summary)
    lines.append(
        f"pass^1 {report.pass_k(1):.3f}"
        + (f"   pass^{k} {report.pass_k(k):.3f}" if k > 1 else "")
        + f"   ({k} trial{'s' if k != 1 else ''} each)"
    )
    return lines


def score_of(name: str, outcomes: Sequence[tuple[str, ...]]) -> ScenarioScore:
    """A scenario's score from its trials' reasons (one tuple per trial; empty: passed).

    Its reasons are every failed trial's, each once, in the order they were found.
    """
    failed = [reasons for reasons in outcomes if reasons]
    return ScenarioScore(
        name=name,
        trials=len(outcomes),
        passes=len(outcomes) - len(failed),
        reasons=tuple(dict.fromkeys(reason for reasons in failed for reason in reasons)),
    )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fit(line: str) -> str:
    return _clip(" ".join(line.split("\n")), WIDTH).rstrip()
