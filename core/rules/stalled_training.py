"""Stalled training: no new step was written for ``threshold`` seconds.

Condition: ``wall(record) - wall(previous record) > threshold`` for a record written since the
rule last looked (any mode; in-process that includes the every-step losses kept between save steps,
which are written with the next save step: the largest such gap is reported, at the record that
ended it); ``now - wall(latest record) > threshold`` while the run is not complete
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
from ._common import BuiltinRule, fmt, since_step
from ._registry import register_rule


def _records(history: History, worker: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(wall times, steps, modes)`` of every record of ``worker``, in wall-time order."""
    walls, steps, modes = [], [], []
    for m in MODES:
        st, wa = history.wall_times(m, worker)
        if len(wa):
            walls.append(wa)
            steps.append(st)
            modes += [m] * len(wa)
    if not walls:
        return np.zeros(0), np.zeros(0, dtype=np.int64), []
    w, st = np.concatenate(walls), np.concatenate(steps)
    order = np.argsort(w, kind="stable")
    return w[order], st[order], [modes[i] for i in order]


@register_rule
class StalledTraining(BuiltinRule):
    """No new data for too long (see the module docstring)."""

    name = "stalled_training"
    summary = "no new step was written for a long time (hung data loader, deadlock, dead worker)"
    default_modes = MODES

    def __init__(self, threshold: float = 1800.0, **common: Any) -> None:
        super().__init__(**common)
        self.threshold = check_float(threshold, f"{self.name}.threshold", minimum=0.0, min_inclusive=False)
        self._judged: dict[int, float] = {}  # worker -> wall time of the last record judged

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",), modes=("train",))]

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        for worker in self.workers(history):
            steps, walls = history.wall_times(mode, worker)
            if not len(steps) or steps[-1] != step:
                continue
            now = float(walls[-1])
            w, st, md = _records(history, worker)
            upto = int(np.searchsorted(w, now, side="right"))
            since = self._judged.get(worker)
            if since is None and self.fit_from:  # (a later fit: not the pause before its first record)
                since = self._fit_began(history, worker)
            first = 1 if since is None else max(1, int(np.searchsorted(w, since, side="right")))
            self._judged[worker] = now
            if first >= upto:
                continue
            gaps = np.diff(w[first - 1:upto])  # gaps[i]: before record first + i
            i = int(np.argmax(gaps))
            gap = float(gaps[i])
            if gap > self.threshold:
                at_step, at_mode = int(st[first + i]), md[first + i]
                found.append(self.finding(
                    at_step, at_mode,
                    f"step {at_step} ({at_mode}) was written {fmt(gap)} s after the previous record (limit "
                    f"{fmt(self.threshold)} s): training stalled for that long. Usual causes: a hung data loader or "
                    "network file system, a deadlock between distributed workers, or a very slow evaluation.",
                    gap=gap, worker=worker,
                ))
        return found or None

    def new_fit(self) -> None:
        super().new_fit()
        self._judged = {}  # (a new training's fit and a continued one's: rearm calls this after restart)

    def _fit_began(self, history: History, worker: int) -> float | None:
        """The wall time of the first record of the latest fit through the session (None: none
        yet): the time between an earlier fit's last record and a later fit's first is the user's,
        not a stall, whether the later fit trains a new model or continues the same (trials 25a,
        25c, 25e)."""
        began = None
        for m in MODES:
            steps, walls = history.wall_times(m, worker)
            i = since_step(steps, self.fit_from.get(m, 0))
            if i < len(walls) and (began is None or float(walls[i]) < began):
                began = float(walls[i])
        return began

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "judged": {str(k): v for k, v in self._judged.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._judged = {int(k): float(v) for k, v in state.get("judged", {}).items()}

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


