"""Helpers of the loss- and metric-based rules (private)."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import numpy as np

from .._errors import ConfigError, TensorNotFoundError
from .._finding import Finding
from .._history import History
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, higher_is_better, matching_tensors

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
        try:
            steps, values = history.finite_series(name, "raw", mode, worker)
        except TensorNotFoundError:
            held = history.array_steps(name, "raw", mode, worker)
            if not held:
                raise
            # (trial 43c: "tensor 'loss' has no reduction 'raw'; stored: none (arrays: raw)", a loss left
            # unreduced, its .mean() forgotten, said as a missing reduction)
            shape = np.shape(history.array(name, held[-1], "raw", mode, worker))
            raise ConfigError(f"loss {name!r} is not one value: the training offered it with shape {shape} (step "
                              f"{held[-1]}), stored as an array; a loss rule reads one value a step: offer the "
                              f"loss reduced (loss.mean(), a loss function's reduction='mean'), or point loss= "
                              f"at one") from None
        if len(steps):
            out.append((name, steps, values))
    return out


def lowered(level: float, fraction: float) -> float:
    """``level`` lowered by ``fraction`` of its magnitude: ``level - fraction * |level|``, computed as
    ``(1 - fraction) * level`` for a level at or above 0 (the float the loss rules always compared
    with) and ``(1 + fraction) * level`` below 0. Trial 32e: ``(1 - fraction) * level`` of a negative
    level (a Gaussian NLL, an ELBO-type loss) lies above it, so any fall at all passed as a 5% one."""
    return (1.0 - fraction) * level if level >= 0 else (1.0 + fraction) * level


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
    # (the tail that can hold them, not the whole series: a save step's cost does not grow with the
    # run, trial 24e; steps are unique and ascending within a training)
    tail = (count - 1) * interval + 1
    steps, values = steps[-tail:], values[-tail:]
    return values[steps >= steps[-1] - (count - 1) * interval]


def first_values(steps: np.ndarray, values: np.ndarray, count: int, interval: int) -> np.ndarray:
    """The values of the span of the first ``count`` save steps, ``s_0 .. s_0 + (count - 1) * I``
    (the first ``count`` values when ``interval`` is 1); read from the head that can hold them, not
    the whole series (trial 24e)."""
    if interval <= 1 or len(steps) == 0:
        return values[:count]
    head = (count - 1) * interval + 1
    steps, values = steps[:head], values[:head]
    return values[steps <= steps[0] + (count - 1) * interval]


def lowest_window_median(cache: dict[str, tuple[int, int, float]], key: str, values: np.ndarray, k: int) -> float:
    """``min_i median(values[i - k + 1 .. i])`` over the windows of ``k`` consecutive values (inf while
    there is none). ``cache`` (``key -> (k, values read, minimum)``, derived, the rule's own) holds what
    earlier calls found, so that each window is taken once (trial 24i: every save step took the
    medians of every window of the run again, and a step cost more the longer the run)."""
    cached = cache.get(key)
    done, best = (cached[1], cached[2]) if cached is not None and cached[0] == k and cached[1] <= len(values) else (0, np.inf)
    if len(values) >= k and len(values) > done:
        first = max(0, done - k + 1)  # (the windows ending after the values read)
        medians = np.median(np.lib.stride_tricks.sliding_window_view(values[first:], k), axis=1)
        best = min(best, float(medians.min()))
        cache[key] = (k, len(values), best)
    return float(best)


def lowest_level(cache: dict[str, tuple[int, int, float]], key: str, steps: np.ndarray, values: np.ndarray,
                 span: int) -> float:
    """``min_t median(values of steps t - span + 1 .. t)`` over the complete windows of a series
    kept at every step (inf while there is none). ``cache`` (``key -> (span, last window end,
    minimum)``, derived, the rule's own) holds what earlier calls found: windows ending after the
    last call are added to it, so a rule evaluated at every save reads each value about once."""
    cached = cache.get(key)
    last, best = (cached[1], cached[2]) if cached is not None and cached[0] == span else (None, np.inf)
    first_end = int(steps[0]) + span - 1
    lo_end = first_end if last is None else max(first_end, last + 1)
    e0 = int(np.searchsorted(steps, lo_end, side="left"))
    if e0 < len(steps):
        a0 = int(np.searchsorted(steps, int(steps[e0]) - span + 1, side="left"))
        tail_steps, tail = steps[a0:], values[a0:]
        if int(tail_steps[-1] - tail_steps[0]) == len(tail) - 1 and len(tail) >= span:  # every step, no gaps
            medians = np.median(np.lib.stride_tricks.sliding_window_view(tail, span), axis=1)
            best = min(best, float(medians.min()))
        else:
            starts = np.searchsorted(steps, steps[e0:] - span + 1, side="left")
            for a, e in zip(starts.tolist(), range(e0, len(steps))):
                best = min(best, float(np.median(values[a : e + 1])))
        cache[key] = (span, int(steps[-1]), best)
    return float(best)


class LossRule(BuiltinRule):
    """A rule that judges each loss matching its ``loss`` parameter (a name or full-match regex of
    the losses and metrics collections) whose last value is at the step evaluated: subclasses set
    ``self.loss`` and implement :meth:`judge`."""

    loss: str

    def named_inputs(self) -> dict[str, str]:
        return {"loss": self.loss}

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",), modes=self.modes)]

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker in self.workers(history):
            for name, steps, values in loss_series(history, self.loss, mode, worker):
                if not len(steps) or steps[-1] != step:
                    continue
                # the values of the training the rule is armed for alone: its start, windows and lowest
                # level (trials 25a, 25c: a healthy re-fit was judged against the earlier fit's losses)
                steps, values = self.this_training(steps, values, mode)
                if not len(steps):
                    continue
                seen = True
                finding = self.judge(history, name, steps, values, step, mode, worker)
                if finding is not None:
                    found.append(finding)
        return found if seen else NO_DATA

    def judge(self, history: History, name: str, steps: np.ndarray, values: np.ndarray, step: int, mode: str,
              worker: int) -> Finding | None:
        """A finding for the series ``name`` (its ``steps`` and finite ``values``, the last at ``step``), or None."""
        raise NotImplementedError
