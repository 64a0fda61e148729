"""Small statistics shared by the benchmarks."""

from __future__ import annotations

import math
import statistics


def mean_ci(values: list[float]) -> dict[str, float]:
    """Mean with a 95% Student-t interval, and the median, of per-pair ratios (``n`` of them)."""
    from scipy import stats

    n = len(values)
    mean = statistics.fmean(values)
    half = float(stats.t.ppf(0.975, n - 1)) * statistics.stdev(values) / math.sqrt(n) if n > 1 else math.inf
    return {"n": n, "mean": mean, "ci_low": mean - half, "ci_high": mean + half, "median": statistics.median(values)}
