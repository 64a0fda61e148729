"""Training functions of tests/tune/test_trial27c2_report.py (run in worker processes, importable by name)."""

from __future__ import annotations

import math
from typing import Any


def train_mixed(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    """A learning curve in ``x``; trial 1 raises, trial 2 returns a metric that is infinite."""
    x = float(params["x"])
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = (1 - math.exp(-step / 4)) * (1 - (x - 0.3) ** 2)
        if trial.report(step=step, value=value):
            break
    if trial.number == 1:
        raise RuntimeError("boom in trial 1")
    return {"auc": value, "loss": math.inf if trial.number == 2 else 1 / 3 + value, "optimizer": "adam"}


def train_fails(params: dict[str, Any], trial: Any) -> float:
    raise RuntimeError(f"boom in trial {trial.number}")
