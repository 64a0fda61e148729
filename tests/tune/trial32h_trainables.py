"""Trainables of test_trial32h_*.py (importable by the workers)."""

from __future__ import annotations

from typing import Any


def train_decreasing(params: dict[str, Any], trial: Any) -> float:
    """Reports ``round(x, 3) + 1 / step`` at every step up to ``trial.budget``."""
    value = 0.0
    for step in range(1, trial.budget + 1):
        value = round(params["x"], 3) + 1.0 / step
        if trial.report(step=step, value=value):
            break
    return value
