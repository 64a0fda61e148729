"""Overfit: the validation metric gets worse while the training metric keeps improving.

Condition (lower-is-better metrics; signs flip for higher-is-better ones):
``v_t > v* + max(tolerance * |v*|, min_delta, noise * sigma)  and  v_t - t_t > gap * |t_t|  and  t_t < t*`` on
``patience`` consecutive new validation values, where ``v_t`` is the median of the last 3 validation
values, ``v*`` the best such median before it, ``t_t`` / ``t*`` the training metric (median of its
values over its last 5 saves: its last 5 values when one is saved per save step or round, the
values of the last ``4 * I + 1`` steps when the training loss is kept at every step, ``I`` the train
save interval) now / when ``v*`` was seen (``t_t < t*`` is waived while no training value has been
saved since ``v*``: a training metric saved every ``I`` steps next to a validation metric saved every
round, as XGBoost's are, would otherwise hold the verdict back up to ``I`` steps, one save interval
that has to fit inside the 10% of training the rule has; the next training value still vetoes),
and ``sigma`` the validation noise: the robust spread of its changes from one evaluation to the
next, ``sigma = 1.4826 * median(|d_i - median(d)|) / sqrt(2)`` with ``d_i = val_i - val_(i-1)`` over
every validation value so far (0 with fewer than 3 changes).

Why the noise term: on small or hard validation sets the validation loss jumps around from one
evaluation to the next, and its best value is the luckiest of many draws, so "10% above the best" is
reached by noise alone (a clipped GRU whose validation loss wanders between 0.05 and 0.2). Subtracting
the median change keeps a steady rise (true overfitting: the loss climbs evaluation after evaluation)
out of ``sigma``, so a smooth climb still fires at the ``tolerance`` margin.

Defaults: ``train="loss"``, ``validation="val_loss"`` (names or full-match regexes; XGBoost:
``train-logloss`` / ``validation-logloss``), ``train_mode="train"``, ``validation_mode="eval"`` (each
falls back to any mode holding the metric), ``tolerance=0.1``, ``min_delta=0.05`` (in the metric's
units: a near-perfect model whose loss wobbles between 0.06 and 0.10 is not overfitting), ``gap=0.1``, ``higher_is_better=None``
(inferred from the validation metric's name: auc, accuracy, map, ndcg, f1... are better high),
``noise=3.0``, ``patience=3``, modes ``train`` and ``eval``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_str
from .._config import MODES
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_optional_bool, check_regex, fmt, higher_is_better, matching_tensors
from ._loss import interval_groups, metric_with_walls, recent_values, value_interval
from ._registry import register_rule

_TRAIN_WINDOW = 5
_VAL_WINDOW = 3


def _rolling_median(x: np.ndarray, k: int) -> np.ndarray:
    """Median of each value with up to ``k - 1`` values before it."""
    return np.asarray([float(np.median(x[max(0, i - k + 1) : i + 1])) for i in range(len(x))])


def validation_noise(values: np.ndarray) -> float:
    """Robust spread of the changes between consecutive values, trend removed (0 with < 3 changes)."""
    d = np.diff(values)
    if len(d) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


#: A training series: ``(wall_times, values, steps, steps per value interval)``.
TrainSeries = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def train_at(train: TrainSeries, wall: float) -> float | None:
    """Median of the training values over the last few saves written at or before ``wall``."""
    walls, values, steps, every = train
    idx = np.flatnonzero(walls <= wall + 1e-9)
    if not len(idx):
        return None
    upto = int(idx[-1]) + 1
    return float(np.median(recent_values(steps[:upto], values[:upto], _TRAIN_WINDOW, every)))


def train_count_at(train: TrainSeries, wall: float) -> int:
    """How many training values were written at or before ``wall``."""
    return int(np.count_nonzero(train[0] <= wall + 1e-9))


def last_intervals(train: TrainSeries, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Training values of the last ``count`` save intervals and of the ``count`` before them (None
    while fewer than ``2 * count`` intervals hold a value)."""
    _, values, steps, every = train
    groups = interval_groups(steps, every)
    if len(groups) < 2 * count:
        return None
    return values[groups[-2 * count]:groups[-count]], values[groups[-count]:]


class _TrainValRule(BuiltinRule):
    """Shared parameters of ``overfit`` and ``overtraining``."""

    default_modes = ("train", "eval")

    def __init__(self, train: str, validation: str, train_mode: str, validation_mode: str,
                 higher_is_better: bool | None, **common: Any) -> None:
        super().__init__(**common)
        self.train = check_regex(train, f"{self.name}.train")
        self.validation = check_regex(validation, f"{self.name}.validation")
        self.train_mode = check_str(train_mode, f"{self.name}.train_mode", choices=MODES)
        self.validation_mode = check_str(validation_mode, f"{self.name}.validation_mode", choices=MODES)
        self.higher_is_better = check_optional_bool(higher_is_better, f"{self.name}.higher_is_better")
        self._last_seen: dict[str, int] = {}

    def requirements(self) -> list[Requirement]:
        modes = tuple(dict.fromkeys((self.train_mode, self.validation_mode)))
        return [Requirement("losses", reductions=("raw",), modes=modes), Requirement("metrics", reductions=("raw",), modes=modes)]

    def direction(self, name: str) -> bool:
        return higher_is_better(name) if self.higher_is_better is None else self.higher_is_better

    def pairs(self, history: History) -> list[tuple[int, str, str | None]]:
        """``(worker, validation tensor, training tensor or None)`` to check."""
        out = []
        vals = matching_tensors(history, self.validation, ("losses", "metrics"))
        trains = matching_tensors(history, self.train, ("losses", "metrics"))
        for worker in self.workers(history):
            for v in vals:
                t = _partner(v, trains)
                out.append((worker, v, t))
        return out

    def new_validation(self, history: History, worker: int, vname: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
        steps, values, walls, used = metric_with_walls(history, vname, self.validation_mode, worker)
        key = f"{worker}:{vname}"
        if not len(steps) or self._last_seen.get(key) == len(steps):
            return None
        self._last_seen[key] = len(steps)
        return steps, values, walls, used

    def train_values(self, history: History, worker: int, tname: str | None) -> TrainSeries | None:
        if tname is None:
            return None
        steps, values, walls, _ = metric_with_walls(history, tname, self.train_mode, worker)
        if not len(values):
            return None
        return walls, values, steps, value_interval(history, tname)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "last_seen": dict(self._last_seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._last_seen = {str(k): int(v) for k, v in state.get("last_seen", {}).items()}


def _partner(vname: str, trains: list[str]) -> str | None:
    """The training metric paired with a validation metric: the same metric name if possible."""
    if not trains:
        return None
    if len(trains) == 1:
        return trains[0]
    suffix = vname.split("-", 1)[-1].rsplit("/", 1)[-1].removeprefix("val_")
    for t in trains:
        if t.split("-", 1)[-1].rsplit("/", 1)[-1] == suffix:
            return t
    return trains[0]


@register_rule
class Overfit(_TrainValRule):
    """Validation worse than its best while training still improves (see the module docstring)."""

    name = "overfit"
    summary = "the validation metric gets worse while the training metric keeps improving"

    def __init__(self, train: str = "loss", validation: str = "val_loss", train_mode: str = "train",
                 validation_mode: str = "eval", tolerance: float = 0.1, min_delta: float = 0.05, gap: float = 0.1,
                 higher_is_better: bool | None = None, noise: float = 3.0, patience: int = 3, **common: Any) -> None:
        super().__init__(train, validation, train_mode, validation_mode, higher_is_better, patience=patience, **common)
        self.noise = check_float(noise, f"{self.name}.noise", minimum=0.0)
        self.tolerance = check_float(tolerance, f"{self.name}.tolerance", minimum=0.0)
        self.min_delta = check_float(min_delta, f"{self.name}.min_delta", minimum=0.0)
        self.gap = check_float(gap, f"{self.name}.gap", minimum=0.0)

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker, vname, tname in self.pairs(history):
            data = self.new_validation(history, worker, vname)
            if data is None:
                continue
            seen = True
            _, values, walls, _ = data
            if len(values) < 2:
                continue
            hib = self.direction(vname)
            sign = -1.0 if hib else 1.0  # compare in "lower is better" space
            v = _rolling_median(sign * values, _VAL_WINDOW)
            best_i = int(np.argmin(v[:-1]))
            v_best, v_now = float(v[best_i]), float(v[-1])
            sigma = validation_noise(sign * values)
            margin = max(self.tolerance * abs(v_best), self.min_delta, self.noise * sigma)
            if not v_now > v_best + margin:
                continue
            train = self.train_values(history, worker, tname)
            t_now = t_best = None
            if train is not None:
                t_now = train_at(train, float(walls[-1]))
                t_best = train_at(train, float(walls[best_i]))
                if t_now is None:
                    continue
                if not (v_now - sign * t_now > self.gap * abs(t_now)):
                    continue
                fresh = train_count_at(train, float(walls[-1])) > train_count_at(train, float(walls[best_i]))
                if t_best is not None and fresh and not sign * t_now < sign * t_best:
                    continue  # training got worse too: divergence, not overfitting
            direction = "fallen" if hib else "risen"
            msg = (
                f"{vname} has {direction} to {fmt(sign * v_now)} from its best {fmt(sign * v_best)} "
                f"({fmt(abs(v_now - v_best) / abs(v_best) * 100 if v_best else float('inf'))}% worse)"
            )
            if t_now is not None:
                msg += f" while {tname} kept improving ({fmt(t_best) if t_best is not None else '?'} -> {fmt(t_now)})"
            msg += (
                ": the model is overfitting. Usual fixes: early stopping at the best validation value, more "
                "training data or augmentation, regularisation (weight decay, dropout; XGBoost: lower max_depth, "
                "higher min_child_weight, subsample), or a smaller model."
            )
            found.append(self.finding(step, mode, msg, tensors=[vname] + ([tname] if tname else []),
                                      best=sign * v_best, now=sign * v_now, noise=sigma, worker=worker))
        if not seen:
            return NO_DATA
        return found
