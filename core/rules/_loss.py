"""Helpers of the loss- and metric-based rules (private)."""

from __future__ import annotations

import logging
import weakref

import numpy as np

from .._history import History
from ._common import higher_is_better, matching_tensors

logger = logging.getLogger("tripwire")


# better-high names a loss rule was pointed at, said once per history (run) each
_SAID_HIGHER: weakref.WeakKeyDictionary[History, set[str]] = weakref.WeakKeyDictionary()


def loss_series(history: History, pattern: str, mode: str, worker: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, steps, values)`` of every loss matching ``pattern`` in ``mode`` (finite values). A
    metric that is better high (``train-auc``, ``val_accuracy``: see :func:`higher_is_better`)
    is no loss: left out, with a WARNING once (a loss rule judges values that should fall; it
    stopped a healthy XGBoost run whose train-auc rose to 1.0 as "not decreasing")."""
    out = []
    for name in matching_tensors(history, pattern, ("losses", "metrics")):
        if "loss" not in name.lower() and higher_is_better(name):
            said = _SAID_HIGHER.setdefault(history, set())
            if name not in said:
                said.add(name)
                logger.warning(
                    "tripwire: the loss rules read %r (loss=%r), a metric that is better high: they judge values "
                    "that should fall, so they leave it out; point loss= at a loss (logloss, rmse, a training loss)",
                    name, pattern)
            continue
        steps, values = history.series(name, "raw", mode, worker)
        if len(steps):
            keep = np.isfinite(values)
            out.append((name, steps[keep], values[keep]))
    return out


def value_interval(history: History, name: str) -> int:
    """Steps each saved value of ``name`` stands for: the train save interval ``I`` when the tensor's
    collection keeps a value at every step (``every_step``, the training loss by default), else 1.

    Rules written for one value per save (windows of "the last k values") read an every-step series
    in save intervals: the values of ``k`` intervals (``k * I`` steps), not the last ``k`` steps."""
    kept = getattr(history, "every_step", None) or {}
    if not kept:
        return 1
    intervals = [int(kept[c]) for c in history.tensor_collections(name) if c in kept]
    return max(intervals) if intervals else 1


def interval_groups(steps: np.ndarray, interval: int) -> np.ndarray:
    """Start index of each save interval of a sorted series, oldest first. Intervals end at the last
    step: ``(s - (j + 1) * I, s - j * I]``; a series with one value per save has one per interval."""
    if interval <= 1 or len(steps) == 0:
        return np.arange(len(steps))
    bins = (int(steps[-1]) - steps) // interval
    return np.concatenate(([0], np.flatnonzero(np.diff(bins)) + 1))


def recent_values(steps: np.ndarray, values: np.ndarray, count: int, interval: int) -> np.ndarray:
    """The values of the span of the last ``count`` save steps, ``s - (count - 1) * I .. s`` with
    ``s`` the last step (the last ``count`` values when ``interval`` is 1, or when one value is
    saved per save step)."""
    if interval <= 1 or len(steps) == 0:
        return values[-count:]
    return values[steps >= steps[-1] - (count - 1) * interval]
