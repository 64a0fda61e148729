"""Helpers of the loss- and metric-based rules (private)."""

from __future__ import annotations

import numpy as np

from .._history import History
from ._common import matching_tensors, series_any_mode


def loss_series(history: History, pattern: str, mode: str, worker: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, steps, values)`` of every loss matching ``pattern`` in ``mode`` (finite values)."""
    out = []
    for name in matching_tensors(history, pattern, ("losses", "metrics")):
        steps, values = history.series(name, "raw", mode, worker)
        if len(steps):
            keep = np.isfinite(values)
            out.append((name, steps[keep], values[keep]))
    return out


def record_walls(history: History, mode: str, worker: int) -> dict[int, float]:
    """Wall time of the latest record of each step of ``mode``."""
    steps, walls = history.wall_times(mode, worker)
    return dict(zip(steps.tolist(), walls.tolist()))


def metric_with_walls(history: History, name: str, mode: str, worker: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(steps, values, wall_times, mode)`` of a scalar metric, finite values only."""
    steps, values, used = series_any_mode(history, name, mode, worker)
    walls_of = record_walls(history, used, worker)
    walls = np.asarray([walls_of.get(int(s), np.nan) for s in steps.tolist()], dtype=np.float64)
    keep = np.isfinite(values)
    return steps[keep], values[keep], walls[keep], used
