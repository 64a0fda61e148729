"""Overfit: the validation metric gets worse while the training metric keeps improving.

Condition (lower-is-better metrics; signs flip for higher-is-better ones):
``all_(k = t-confirm+1 .. t) [v_k > v*_k + max(tolerance * |v*_k|, min_delta, noise * sigma_k)  and
v_k - t_k > gap * |t_k|  and  t_k < t*_k]  or  [n >= trend_values  and  Z(u) >= trend_z  and
l(u) > v* + max(tolerance * |v*|, trend_min_delta, noise * sigma)  and  l(u) - t_t > gap * |t_t|  and  t_t < t*]``:
a level test on each of the last ``confirm`` validation values, or a trend test on the latest one.
``v_k`` is the median of the last 3 validation values at validation value ``k`` (``t``: the latest),
``v*_k`` the best such median before it (``v* = v*_t``), ``u`` the ``n`` validation values after the
one of ``v*`` up to the latest (at most the last 30), ``Z(u)`` their Mann-Kendall statistic
``(S - sgn S) / sqrt(n (n - 1) (2n + 5) / 18)`` with ``S = sum_(i<j) sgn(u_j - u_i)``, and ``l(u)`` the
latest value of their Theil-Sen line (slope ``b = median_(i<j) (u_j - u_i) / (j - i)``,
``l = median_i(u_i - b * i) + b * (n - 1)``). ``t_t`` / ``t*`` are the training
metric (median of its values over its last 5 saves: its last 5 values when one is saved per save step
or round, the values of the last ``4 * I + 1`` steps when the training loss is kept at every step, ``I``
the train save interval) now / when ``v*`` was seen (``t_t < t*`` is waived while no training value has
been saved since ``v*``: a training metric saved every ``I`` steps next to a validation metric saved
every round, as XGBoost's are, would otherwise hold the verdict back up to ``I`` steps, one save
interval that has to fit inside the 10% of training the rule has; the next training value still
vetoes), and ``sigma`` the validation noise: the robust spread of its changes from one evaluation to
the next, ``sigma = 1.4826 * median(|d_i - median(d)|) / sqrt(2)`` with ``d_i = val_i - val_(i-1)`` over
every validation value so far (0 with fewer than 3 changes).

Why two tests: the level test needs the validation metric 10% above its best on ``confirm``
evaluations in a row, which a slow, steady climb (boosting that adds overfitted trees round after
round: a few percent every few rounds) reaches late. The trend test fires on such a climb as soon as
it is significant (Mann-Kendall, one-sided at the 1% level, since the test is repeated at every
evaluation; a validation metric that wanders around a plateau, or keeps improving, has no significant
upward trend) and its Theil-Sen line clears the same margin, without waiting ``confirm`` evaluations
or for the lagging median. The line uses every value since the best, so neither one lucky low value
nor one unlucky high value moves it much; the values start after the best one, whose lucky low would
make any plateau after it look like a rise. Its absolute floor ``trend_min_delta`` is smaller than
``min_delta`` because a significant trend over 5 or more values is not one noisy value.

Why the noise term: on small or hard validation sets the validation loss jumps around from one
evaluation to the next, and its best value is the luckiest of many draws, so "10% above the best" is
reached by noise alone (a clipped GRU whose validation loss wanders between 0.05 and 0.2). Subtracting
the median change keeps a steady rise (true overfitting: the loss climbs evaluation after evaluation)
out of ``sigma``, so a smooth climb still fires at the ``tolerance`` margin. Why ``min_delta`` and
``trend_min_delta``: a near-perfect model whose loss wobbles between 0.06 and 0.10, or creeps from
0.013 to 0.017 over a long plateau, is not overfitting in any way that matters.

Defaults: ``train="loss"``, ``validation="val_loss"`` (names or full-match regexes; on XGBoost
defaults read its metrics, e.g. ``train-logloss`` / ``validation-logloss``), ``train_mode="train"``, ``validation_mode="eval"`` (each
falls back to any mode holding the metric), ``tolerance=0.1``, ``min_delta=0.05`` (in the metric's
units), ``gap=0.1``, ``confirm=3``, ``trend_values=5``, ``trend_z=2.33`` (``inf`` switches the trend test
off), ``trend_min_delta=0.025`` (in the metric's units), ``higher_is_better=None``
(inferred from the validation metric's name: auc, accuracy, map, ndcg, f1... are better high),
``noise=3.0``, ``patience=1`` (the level test holds ``confirm`` evaluations itself; the trend test needs
``trend_values`` values), modes ``train`` and ``eval``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int, check_str
from .._config import MODES
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_optional_bool, check_regex, fmt, higher_is_better, matching_tensors
from ._loss import interval_groups, metric_with_walls, recent_values, value_interval
from ._registry import register_rule

_TRAIN_WINDOW = 5
_VAL_WINDOW = 3
#: The trend test reads at most this many validation values (the most recent since the best).
_TREND_WINDOW = 30


def _rolling_median(x: np.ndarray, k: int) -> np.ndarray:
    """Median of each value with up to ``k - 1`` values before it."""
    return np.asarray([float(np.median(x[max(0, i - k + 1) : i + 1])) for i in range(len(x))])


def validation_noise(values: np.ndarray) -> float:
    """Robust spread of the changes between consecutive values, trend removed (0 with < 3 changes)."""
    d = np.diff(values)
    if len(d) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def mann_kendall_z(values: np.ndarray) -> float:
    """Mann-Kendall trend statistic of a series (no tie correction): about N(0, 1) without a trend,
    positive for a rising one."""
    n = len(values)
    if n < 3:
        return 0.0
    i, j = np.triu_indices(n, 1)
    s = float(np.sum(np.sign(values[j] - values[i])))
    return float((s - np.sign(s)) / np.sqrt(n * (n - 1) * (2 * n + 5) / 18.0))


def theil_sen_last(values: np.ndarray) -> tuple[float, float]:
    """``(slope, fitted latest value)`` of the Theil-Sen line of a series against its index."""
    n = len(values)
    if n < 2:
        return 0.0, float(values[-1])
    i, j = np.triu_indices(n, 1)
    slope = float(np.median((values[j] - values[i]) / (j - i)))
    intercept = float(np.median(values - slope * np.arange(n)))
    return slope, intercept + slope * (n - 1)


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

    def named_inputs(self) -> dict[str, str]:
        return {"train": self.train, "validation": self.validation}

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
                 confirm: int = 3, trend_values: int = 5, trend_z: float = 2.33, trend_min_delta: float = 0.025,
                 higher_is_better: bool | None = None, noise: float = 3.0,
                 patience: int = 1, **common: Any) -> None:
        super().__init__(train, validation, train_mode, validation_mode, higher_is_better, patience=patience, **common)
        self.noise = check_float(noise, f"{self.name}.noise", minimum=0.0)
        self.tolerance = check_float(tolerance, f"{self.name}.tolerance", minimum=0.0)
        self.min_delta = check_float(min_delta, f"{self.name}.min_delta", minimum=0.0)
        self.gap = check_float(gap, f"{self.name}.gap", minimum=0.0)
        self.confirm = check_int(confirm, f"{self.name}.confirm", minimum=1)
        self.trend_values = check_int(trend_values, f"{self.name}.trend_values", minimum=3, maximum=_TREND_WINDOW)
        self.trend_z = check_float(trend_z, f"{self.name}.trend_z", minimum=0.0)
        self.trend_min_delta = check_float(trend_min_delta, f"{self.name}.trend_min_delta", minimum=0.0)

    # ------------------------------------------------------------------------------ the decision
    def _training(self, train: TrainSeries | None, walls: np.ndarray, k: int, best_i: int,
                  sign: float) -> tuple[bool, float | None, float | None]:
        """``(training still improving, t_k, t*)`` at validation value ``k`` (True without a training metric)."""
        if train is None:
            return True, None, None
        t_now = train_at(train, float(walls[k]))
        t_best = train_at(train, float(walls[best_i]))
        if t_now is None:
            return False, None, t_best
        fresh = train_count_at(train, float(walls[k])) > train_count_at(train, float(walls[best_i]))
        if t_best is not None and fresh and not sign * t_now < sign * t_best:
            return False, t_now, t_best  # training got worse too: divergence, not overfitting
        return True, t_now, t_best

    def _level(self, u: np.ndarray, v: np.ndarray, walls: np.ndarray, train: TrainSeries | None, k: int,
               sign: float) -> bool:
        """The level test at validation value ``k`` (``u``: values, ``v``: their running medians)."""
        best_i = int(np.argmin(v[:k]))
        v_best, v_now = float(v[best_i]), float(v[k])
        margin = max(self.tolerance * abs(v_best), self.min_delta, self.noise * validation_noise(u[: k + 1]))
        if not v_now > v_best + margin:
            return False
        improving, t_now, _ = self._training(train, walls, k, best_i, sign)
        return improving and self._gap(v_now, t_now, sign)

    def _gap(self, v: float, t_now: float | None, sign: float) -> bool:
        """Validation (``v``, in lower-is-better space) worse than training by more than ``gap``."""
        return t_now is None or v - sign * t_now > self.gap * abs(t_now)

    def assess(self, values: np.ndarray, walls: np.ndarray, train: TrainSeries | None,
               higher_is_better: bool) -> dict[str, Any] | None:
        """The verdict on the latest of ``values`` (pure): None, or what the finding reports
        (``test``: ``level`` or ``trend``; ``best``, ``now``, ``noise``, ``t_best``, ``t_now``; ``z`` for a trend)."""
        if len(values) < 2:
            return None
        sign = -1.0 if higher_is_better else 1.0  # compare in "lower is better" space
        u = sign * np.asarray(values, dtype=np.float64)
        v = _rolling_median(u, _VAL_WINDOW)
        t = len(u) - 1
        best_i = int(np.argmin(v[:-1]))
        v_best = float(v[best_i])
        sigma = validation_noise(u)
        improving, t_now, t_best = self._training(train, walls, t, best_i, sign)
        if not improving:
            return None
        fresh = train is not None and train_count_at(train, float(walls[t])) > train_count_at(train, float(walls[best_i]))
        out = {"best": sign * v_best, "noise": sigma, "t_now": t_now, "t_best": t_best, "t_fresh": fresh}
        recent = range(t - self.confirm + 1, t + 1)
        if t >= self.confirm and all(self._level(u, v, walls, train, k, sign) for k in recent):
            return {**out, "test": "level", "now": sign * float(v[-1])}
        w = u[best_i + 1:][-_TREND_WINDOW:]  # after the best: its lucky low would bias Z upwards
        if len(w) < self.trend_values:
            return None
        z = mann_kendall_z(w)
        if not z >= self.trend_z:
            return None
        _, fitted = theil_sen_last(w)
        margin = max(self.tolerance * abs(v_best), self.trend_min_delta, self.noise * sigma)
        if fitted > v_best + margin and self._gap(fitted, t_now, sign):
            return {**out, "test": "trend", "now": sign * fitted, "z": z}
        return None

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker, vname, tname in self.pairs(history):
            data = self.new_validation(history, worker, vname)
            if data is None:
                continue
            seen = True
            _, values, walls, _ = data
            hib = self.direction(vname)
            train = self.train_values(history, worker, tname)
            verdict = self.assess(values, walls, train, hib)
            if verdict is None:
                continue
            v_best, v_now, t_best, t_now = verdict["best"], verdict["now"], verdict["t_best"], verdict["t_now"]
            direction = "fallen" if hib else "risen"
            worse = abs(v_now - v_best) / abs(v_best) * 100 if v_best else float("inf")
            if verdict["test"] == "level":
                how = f"has {direction} to {fmt(v_now)}"
            else:
                how = (f"has been {'falling' if hib else 'rising'} steadily (Mann-Kendall z {fmt(verdict['z'])}; "
                       f"trend line now at {fmt(v_now)})")
            msg = f"{vname} {how} from its best {fmt(v_best)} ({fmt(worse)}% worse)"
            if t_now is not None and verdict["t_fresh"]:
                msg += (f" while {tname} stayed at or below its value then "
                        f"({fmt(t_best) if t_best is not None else '?'} -> {fmt(t_now)}, medians of its last "
                        f"{_TRAIN_WINDOW} saves)")
            elif t_now is not None:
                msg += (f" ({tname} has no value saved since that best, last {fmt(t_now)}: saved as often as "
                        f"{vname}, it would tell overfitting from divergence)")
            msg += (
                ": the model is overfitting. Usual fixes: early stopping at the best validation value, more "
                "training data or augmentation, regularisation (weight decay, dropout; XGBoost: lower max_depth, "
                "higher min_child_weight, subsample), or a smaller model."
            )
            details = {k: verdict[k] for k in ("best", "now", "noise", "test") if k in verdict}
            if "z" in verdict:
                details["z"] = verdict["z"]
            tensors = [vname] + ([tname] if tname else [])
            found.append(self.finding(step, mode, msg, tensors=tensors, worker=worker, **details))
        if not seen:
            return NO_DATA
        return found
