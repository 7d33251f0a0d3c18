"""Small statistics for the report: percentiles, a least-squares slope, medians of runs."""

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 95) * 1000, 3),
        "p99_ms": round(percentile(seconds, 99) * 1000, 3),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 3) if seconds else 0.0,
        "max_ms": round(max(seconds, default=0.0) * 1000, 3),
    }


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mean_x = statistics.fmean(xs)
    mean_y = statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def median_of_runs(runs: Sequence[Any]) -> Any:
    """The element-wise median of several runs' results (numbers only; the rest from run 1)."""
    first = runs[0]
    if isinstance(first, bool) or not isinstance(first, int | float | Mapping):
        return first
    if isinstance(first, Mapping):
        return {key: median_of_runs([run[key] for run in runs if key in run]) for key in first}
    return round(statistics.median(runs), 3)
