"""Stalled training: no new step was written for ``threshold`` seconds.

Condition: ``wall(record) - wall(previous record) > threshold`` (in-process: the gap before the step
just written, any mode); ``now - wall(latest record) > threshold`` while the run is not complete
(``tripwire watch``: no new data arriving is the signal; see :meth:`StalledTraining.check_idle`).

Defaults: ``threshold=1800.0`` (seconds), modes ``train``, ``eval``, ``test`` and ``predict``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._config import MODES
from .._finding import Finding
from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import BuiltinRule, fmt
from ._registry import register_rule


def _walls(history: History, worker: int) -> np.ndarray:
    parts = [history.wall_times(m, worker)[1] for m in MODES]
    parts = [p for p in parts if len(p)]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0)


@register_rule
class StalledTraining(BuiltinRule):
    """No new data for too long (see the module docstring)."""

    name = "stalled_training"
    summary = "no new step was written for a long time (hung data loader, deadlock, dead worker)"
    default_modes = MODES

    def __init__(self, threshold: float = 1800.0, **common: Any) -> None:
        super().__init__(**common)
        self.threshold = check_float(threshold, f"{self.name}.threshold", minimum=0.0, min_inclusive=False)

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",), modes=("train",))]

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        for worker in self.workers(history):
            steps, walls = history.wall_times(mode, worker)
            if not len(steps) or steps[-1] != step:
                continue
            now = float(walls[-1])
            allw = _walls(history, worker)
            before = allw[allw < now]
            if not len(before):
                continue
            gap = now - float(before[-1])
            if gap > self.threshold:
                found.append(self.finding(
                    step, mode,
                    f"step {step} ({mode}) was written {fmt(gap)} s after the previous record (limit "
                    f"{fmt(self.threshold)} s): training stalled for that long. Usual causes: a hung data loader or "
                    "network file system, a deadlock between distributed workers, or a very slow evaluation.",
                    gap=gap, worker=worker,
                ))
        return found or None

    def check_idle(self, history: History, now: float | None = None) -> Finding | None:
        """For watchers: a finding when no worker wrote anything for ``threshold`` seconds."""
        now = time.time() if now is None else now
        latest = None
        last_step, last_mode = 0, "train"
        for worker in self.workers(history):
            for m in MODES:
                steps, walls = history.wall_times(m, worker)
                if len(walls) and (latest is None or walls[-1] > latest):
                    latest, last_step, last_mode = float(walls[-1]), int(steps[-1]), m
        if latest is None:
            return None
        idle = now - latest
        if idle <= self.threshold:
            return None
        return self.finding(
            last_step, last_mode,
            f"no new data for {fmt(idle)} s (limit {fmt(self.threshold)} s) since step {last_step} ({last_mode}): "
            "the training looks stalled or dead. Check the process (hung data loader, deadlock between "
            "distributed workers, out-of-memory kill) and its logs.",
            idle=idle,
        )


