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


def cpu_time() -> float:
    """CPU seconds of this process (every thread: ``time.process_time``) and of its running child
    processes (tripwire's reduction process: docs/lightning.md, "Reductions"), read from ``/proc``
    where there is one (Linux); elsewhere this process's alone."""
    import os
    import time

    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return total
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        for pid in children:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # (ended meanwhile)
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15)
    return total
