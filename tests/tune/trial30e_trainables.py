"""Training functions of the trial 30e tests (importable by module name: the workers load them)."""

from __future__ import annotations

import os
import time
from typing import Any

#: The trial number that hangs in :func:`train_last_hangs` (the job's last trial: it times out when
#: every other trial has ended, so the job ends right after its worker is killed).
HANG_NUMBER = 2


def train_returns_without_reporting(params: dict[str, Any], trial: Any) -> float:
    """An sklearn-style fit: returns its score, never reports (minimum at x = 0.3)."""
    return (float(params["x"]) - 0.3) ** 2


def train_reports_every_two(params: dict[str, Any], trial: Any) -> float:
    """Reports at steps 2, 4, ... and at max_resource (minimum at x = 0.3)."""
    value = 0.0
    top = trial.max_resource
    for step in [*range(2, top, 2), top]:
        value = (float(params["x"]) - 0.3) ** 2 + 1.0 / step
        if trial.report(step=step, value=value):
            break
    return value


def train_last_hangs(params: dict[str, Any], trial: Any) -> float:
    """Trial :data:`HANG_NUMBER` sleeps past its time limit; the others report 3 quick steps."""
    if trial.number == HANG_NUMBER:
        time.sleep(float(os.environ.get("TRIAL30E_HANG_S", "120")))
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = float(params["x"]) * step
        if trial.report(step=step, value=value):
            break
    return value


def train_value_is_x(params: dict[str, Any], trial: Any) -> float:
    """Returns x (reports nothing): a target_value is reached by the trial whose x crosses it."""
    return float(params["x"])
