"""Overfit: the validation metric gets worse while the training metric keeps improving.

Condition (written for lower-is-better metrics; each metric is read in its own direction, a
higher-is-better one with its values negated):
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
metric (median of its values over its last 5 saves, fewer while fewer were saved: its last 5 values
when one is saved per save step or round, the values of the last ``4 * I + 1`` steps when the training
loss is kept at every step, ``I`` the train save interval) now / when ``v*`` was seen (``t_t < t*`` is waived while no training value has
been saved since ``v*``: a training metric saved every ``I`` steps next to a validation metric saved
every round, as XGBoost's are with ``save: {modes: {eval: {interval: 1}}}`` (by default both every 10), would otherwise hold the verdict back up to ``I`` steps, one save
interval that has to fit inside the 10% of training the rule has; the next training value still
vetoes), and ``sigma`` the validation noise: the robust spread of its changes from one evaluation to
the next, ``sigma = max(s(all), s(recent))``, ``s = 1.4826 * median(|d_i - median(d)|) / sqrt(2)`` with
``d_i = val_i - val_(i-1)`` over every validation value so far (``all``) and over the last 10 changes
(``recent``; 0 with fewer than 3 changes): the noise of a loss that dropped after a long flat plateau
is its noise since the drop, which the plateau's many small changes hide.

The gap clauses (``v_k - t_k > gap * |t_k|``, ``l(u) - t_t > gap * |t_t|``) compare the two metrics'
values, so they apply only where both are read in the same direction (``loss`` / ``val_loss``,
``train_acc`` / ``val_acc``); where the directions differ (the default ``train="loss"`` beside
``validation="val_acc"``: two different quantities) they hold, and the rest of the condition decides:
the validation metric worse than its best by the margin, and the training metric still improving in
its own direction (``t_k < t*_k``: a falling loss, a rising accuracy). Which way each metric is read:
the validation metric's direction is ``higher_is_better`` where given, else its name's (auc, accuracy,
map, ndcg, f1, ...: higher; loss, error, rmse, logloss, ...: lower), else (a name that tells neither,
such as ``val_skill``) the training metric's name's where it is better high (a score; a training loss
tells nothing of another quantity's direction), else lower (said once in a WARNING: give
``higher_is_better`` for a metric of yours); the training metric's is its name's, else the validation
metric's.

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
units), ``gap=0.1``, ``confirm=3``, ``trend_values=5``, ``trend_z=2.33`` (``inf``, ``.inf`` in YAML,
switches the trend test off), ``trend_min_delta=0.025`` (in the metric's units), ``higher_is_better=None``
(the validation metric's direction, inferred as above; given, it sets the validation metric's alone,
and the training metric's only where the training metric's name tells neither direction),
``noise=3.0``, ``patience=1`` (the level test holds ``confirm`` evaluations itself; the trend test needs
``trend_values`` values), modes ``train`` and ``eval``.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import logging

import numpy as np

from .._history import History
from .._validate import check_float, check_int, check_str
from .._config import MODES
from ._base import Requirement
from ._common import (_HIGHER_IS_BETTER, _LOWER_IS_BETTER, NO_DATA, BuiltinRule, check_optional_bool, check_regex, fmt,
                      higher_is_better, matching_tensors, series_any_mode, since_step)
from ._loss import interval_groups, recent_values, value_interval
from ._registry import register_rule

logger = logging.getLogger("tripwire")

_TRAIN_WINDOW = 5
_VAL_WINDOW = 3
#: The noise is the larger of that of every validation value so far and that of the last this many
#: changes (trial 28c: after a long flat plateau the whole series' noise was a fifth of the noise
#: once the loss dropped, and one noisy bounce after the drop read as overfitting).
_NOISE_RECENT = 10
#: The trend test reads at most this many validation values (the most recent since the best).
_TREND_WINDOW = 30
#: A best validation value at one of the first this many evaluations (``b``, of at least ``2 b + 1``:
#: the first of 3 or more, the second of 5 or more) is named in the message: the model may never have
#: generalised at all.
_EARLY_BEST = 2


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


def train_steps_at(train: TrainSeries, wall: float) -> np.ndarray | None:
    """The steps of the training values :func:`train_at` takes the median of at ``wall`` (None while
    none was written): the last ``_TRAIN_WINDOW`` saves' (fewer while fewer were saved)."""
    walls, _, steps, every = train
    idx = np.flatnonzero(walls <= wall + 1e-9)
    if not len(idx):
        return None
    upto = int(idx[-1]) + 1
    return recent_values(steps[:upto], steps[:upto], _TRAIN_WINDOW, every)


def train_said(steps: Sequence[int], every: int) -> tuple[str, bool]:
    """``(what a training value of an overfit message is, whether it is the median of a whole window
    of _TRAIN_WINDOW saves)`` for the value taken over ``steps`` (:func:`train_steps_at`; ``every``:
    steps per value interval): ``its value at step 0``, ``the mean of its values at steps 0 and 10``,
    ``the median of its 4 values at steps 0, 10, 20 and 30``, ``the median of its 41 values at steps
    70-110``. Trial 28f: "medians of its last 5 saves" was said of one value and of 4 saves."""
    s = [int(x) for x in steps]
    n = len(s)
    full = n == _TRAIN_WINDOW if every <= 1 else bool(n) and min(s) <= s[-1] - (_TRAIN_WINDOW - 1) * every
    if n == 1:
        return f"its value at step {s[0]}", full
    where = (_steps_text(s) if n <= _TRAIN_WINDOW or all(b - a == 1 for a, b in zip(s, s[1:]))
             else f"steps {min(s)} to {max(s)}")
    return (f"the mean of its values at {where}" if n == 2 else f"the median of its {n} values at {where}"), full


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


# ------------------------------------------------------------------ incremental forms (same floats)
# One evaluation used to recompute the running medians, the noise and the training lookups over the
# whole series: its cost grew with the run (12.7 ms a round after 2,000 XGBoost rounds). The forms
# below keep what earlier evaluations computed and add each new value once, so that an evaluation
# costs O(log n) plus the fixed windows (3 values, at most _TREND_WINDOW values, 5 training saves),
# and they give the same floats as the whole-series functions above (tests/rules/test_overfit_cost.py
# replays long series through both).
def _median_of_few(values: Sequence[float]) -> float:
    """``float(np.median(values))`` of 1 to 3 values, without numpy."""
    n = len(values)
    if n == 1:
        return float(values[0])
    if n == 2:
        return (values[0] + values[1]) / 2.0
    a, b, c = values
    return float(max(min(a, b), min(max(a, b), c)))


def _kth_of_two(a: Callable[[int], float], na: int, b: Callable[[int], float], nb: int, k: int) -> float:
    """The ``k``-th smallest (0-based) of the union of two ascending sequences given by index."""
    lo, hi = max(0, k + 1 - nb), min(k + 1, na)
    while lo < hi:  # the fewest values of ``a`` among the k + 1 smallest
        i = (lo + hi) // 2
        if a(i) < b(k - i):
            lo = i + 1
        else:
            hi = i
    j = k + 1 - lo
    if lo == 0:
        return b(j - 1)
    if j == 0:
        return a(lo - 1)
    return max(a(lo - 1), b(j - 1))


class _Noise:
    """The validation noise of a growing series (``1.4826 * MAD(diff) / sqrt(2)``, 0 with fewer than 3
    changes), one value at a time: the changes kept sorted, their
    median read off the middle, the median absolute deviation selected from the two sorted halves
    (``|d - m|`` ascends away from the median on each side) in O(log n)."""

    __slots__ = ("changes", "last")

    def __init__(self) -> None:
        self.changes: list[float] = []
        self.last: float | None = None

    def add(self, x: float) -> float:
        """Take the next value; the noise of the series so far."""
        if self.last is not None:
            bisect.insort(self.changes, x - self.last)
        self.last = x
        d = self.changes
        m = len(d)
        if m < 3:
            return 0.0
        h = m // 2
        med = d[h] if m % 2 else (d[h - 1] + d[h]) / 2.0
        split = bisect.bisect_left(d, med)

        def below(i: int) -> float:  # |d - med| of the values below the median, nearest first
            return med - d[split - 1 - i]

        def above(i: int) -> float:
            return d[split + i] - med

        na, nb = split, m - split
        if m % 2:
            mad = _kth_of_two(below, na, above, nb, h)
        else:
            mad = (_kth_of_two(below, na, above, nb, h - 1) + _kth_of_two(below, na, above, nb, h)) / 2.0
        return 1.4826 * mad / math.sqrt(2.0)


def _steps_text(steps: Sequence[int]) -> str:
    """``step 4``, ``steps 3 and 4``, ``steps 2-4`` (consecutive) or ``steps 80, 90 and 100``."""
    s = [int(x) for x in steps]
    if len(s) == 1:
        return f"step {s[0]}"
    if len(s) > 2 and all(b - a == 1 for a, b in zip(s, s[1:])):
        return f"steps {s[0]}-{s[-1]}"
    return f"steps {', '.join(map(str, s[:-1]))} and {s[-1]}"


def _median_of(k: int, steps: Sequence[int]) -> str:
    """What the running median at validation value ``k`` (0-based) is, by the steps of its values
    (``steps``: the step of each validation value, the numbering of the finding's own step; trial
    27f: "evaluation 7", counted from 1 over the validation values, was XGBoost's round 6):
    ``the median of the values at steps 2-4``; ``the value at step 0`` (the first has no window yet)."""
    first = max(0, k - _VAL_WINDOW + 1)
    if first == k:
        return f"the value at step {steps[k]}"
    return f"the {'mean' if k - first == 1 else 'median'} of the values at {_steps_text(steps[first:k + 1])}"


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``22nd`` ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _at_step(history: History, used_mode: str, step: int, worker: int) -> str:
    """``step 6``, or ``step 92, after train step 400`` where the validation's steps count its own
    batches (Keras, Lightning: the train step it came after, as a finding's own step is shown); a step
    of mode ``train``, or one at its train step (XGBoost's rounds), is said alone."""
    if used_mode != "train":
        try:
            after = int(history.train_steps(used_mode, [step], worker)[0])
        except Exception:  # noqa: BLE001 - a history that cannot place it: the step alone
            after = -1
        if after >= 0 and after != step:
            return f"step {step}, after train step {after}"
    return f"step {step}"


def _single_values(st: _ValState, higher_is_better: bool, where: Callable[[int], str]) -> tuple[str, str]:
    """``("the latest value 0.95", "its lowest value 0.5, at step 3")``: the single values beside the
    medians an overfit finding compares (``st``: every validation value so far; ``where(k)``: how the
    step of validation value ``k`` is said)."""
    u = st.u
    k = min(range(len(u)), key=u.__getitem__)  # (the first of equal ones)
    return (f"the latest value {fmt(st.sign * u[-1])}",
            f"its {'highest' if higher_is_better else 'lowest'} value {fmt(st.sign * u[k])}, at {where(k)}")


def _recent_noise(values: Sequence[float]) -> float:
    """``1.4826 * MAD(diff) / sqrt(2)`` of ``values`` (the last ``_NOISE_RECENT + 1``), 0 with fewer
    than 3 changes: the noise since a change of regime, which the whole series' hides (trial 28c)."""
    d = np.diff(np.asarray(values, dtype=np.float64))
    if len(d) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


class _ValState:
    """What the decision reads of one validation series, kept per value (lower-is-better space):
    ``u`` the values, ``v`` their running medians (``_VAL_WINDOW``), ``best[k]`` the index of the best
    median before value ``k`` (the first of equal ones; -1 for ``k = 0``), ``sigma[k]`` the noise of
    the values up to ``k``."""

    __slots__ = ("sign", "u", "v", "best", "sigma", "_noise", "_min", "_argmin")

    def __init__(self, sign: float) -> None:
        self.sign = sign
        self.u: list[float] = []
        self.v: list[float] = []
        self.best: list[int] = []
        self.sigma: list[float] = []
        self._noise = _Noise()
        self._min = math.inf
        self._argmin = -1

    def extend(self, values: Sequence[float]) -> None:
        """Add the values after the ones already held (``values``: the new ones only)."""
        for raw in values:
            x = self.sign * float(raw)
            k = len(self.u)
            self.u.append(x)
            med = _median_of_few(self.u[-_VAL_WINDOW:])
            self.best.append(self._argmin)
            self.v.append(med)
            if med < self._min:
                self._min, self._argmin = med, k
            overall = self._noise.add(x)
            recent = _recent_noise(self.u[-(_NOISE_RECENT + 1):]) if len(self.u) > _NOISE_RECENT + 1 else overall
            self.sigma.append(max(overall, recent))


class _TrainIndex:
    """:func:`train_at` and :func:`train_count_at` of one training series. While its wall times and steps
    ascend (as a run writes them) a lookup is a bisection and a median over the last saves; otherwise
    (a stored run appended to by a second training) the scans above. ``sign``: the training metric's
    own direction (1.0 lower-is-better, -1.0 higher-is-better), or None: the validation metric's."""

    __slots__ = ("walls", "values", "steps", "every", "ordered", "sign", "_arrays")

    def __init__(self, walls: Sequence[float], values: Sequence[float], steps: Sequence[int], every: int,
                 ordered: bool | None = None, sign: float | None = None) -> None:
        self.walls, self.values, self.steps, self.every = walls, values, steps, every
        self.sign = sign
        if ordered is None:
            w, s = np.asarray(walls, dtype=np.float64), np.asarray(steps)
            ordered = bool(np.all(np.isfinite(w)) and np.all(np.diff(w) >= 0) and np.all(np.diff(s) >= 0))
        self.ordered = ordered
        self._arrays: TrainSeries | None = None

    @classmethod
    def of(cls, train: TrainSeries | None, sign: float | None = None) -> _TrainIndex | None:
        return None if train is None else cls(train[0], train[1], train[2], train[3], sign=sign)

    def _series(self) -> TrainSeries:
        if self._arrays is None:
            self._arrays = (np.asarray(self.walls, dtype=np.float64), np.asarray(self.values, dtype=np.float64),
                            np.asarray(self.steps, dtype=np.int64), self.every)
        return self._arrays

    def count_at(self, wall: float) -> int:
        """How many training values were written at or before ``wall``."""
        if not self.ordered:
            return train_count_at(self._series(), wall)
        return bisect.bisect_right(self.walls, wall + 1e-9)

    def _span(self, wall: float) -> tuple[int, int]:
        """``(lo, upto)``: the training values over the last few saves written at or before ``wall``
        are ``values[lo:upto]`` (``upto`` 0: none); for an ordered series."""
        upto = bisect.bisect_right(self.walls, wall + 1e-9)
        if not upto:
            return 0, 0
        if self.every <= 1:
            return max(0, upto - _TRAIN_WINDOW), upto
        return bisect.bisect_left(self.steps, self.steps[upto - 1] - (_TRAIN_WINDOW - 1) * self.every, 0, upto), upto

    def at(self, wall: float) -> float | None:
        """Median of the training values over the last few saves written at or before ``wall``."""
        if not self.ordered:
            return train_at(self._series(), wall)
        lo, upto = self._span(wall)
        if not upto:
            return None
        return float(np.median(np.asarray(self.values[lo:upto], dtype=np.float64)))

    def steps_at(self, wall: float) -> list[int] | None:
        """The steps of the values :meth:`at` takes the median of (None where it is None)."""
        if not self.ordered:
            steps = train_steps_at(self._series(), wall)
            return None if steps is None else [int(x) for x in steps]
        lo, upto = self._span(wall)
        return [int(x) for x in self.steps[lo:upto]] if upto else None


def _same_float(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)


def _walls_of_values(steps: Sequence[int], rsteps: Sequence[int], rwalls: Sequence[float]) -> list[float]:
    """The wall time of each value of a series (``steps``: their steps, in write order) from the
    records of its mode (``rsteps``, ``rwalls``, in write order; NaN for a step without a record).

    A step with as many records as values takes each value's own record, in order: the values of a
    step are a subsequence of its records, so equal counts pair them one to one. A hand loop that
    restarts its step count every epoch (``enumerate(loader)``'s index; trial 27g) writes steps 0-43
    once an epoch; each of their values took the latest epoch's wall time, so that none counted as
    written before a validation, and ``overfit`` judged a training loss that rose 100-fold as having
    no value then ("? -> 268.3"). A step whose records outnumber its values (a record of that step
    without the tensor) takes its latest record's, as a step written once does."""
    records: dict[int, list[float]] = {}
    for s, w in zip(rsteps, rwalls):
        records.setdefault(s, []).append(w)
    counts: dict[int, int] = {}
    for s in steps:
        counts[s] = counts.get(s, 0) + 1
    seen: dict[int, int] = {}
    out: list[float] = []
    for s in steps:
        walls = records.get(s)
        if not walls:
            out.append(math.nan)
            continue
        k = seen[s] = seen.get(s, -1) + 1
        out.append(walls[k] if len(walls) == counts[s] else walls[-1])
    return out


class _SeriesReader:
    """One scalar's finite values with their wall times, read from a History as it grows: each read
    takes only the values and records written since the last one (the wall time of a value: that of
    the latest record of its step). When something read before may have changed (a new record for a
    step already read, another History, the series found in another mode) it reads everything again."""

    __slots__ = ("history", "used", "raw", "rec", "last", "max_step", "steps", "values", "walls", "ordered", "version",
                 "floor")

    def __init__(self) -> None:
        self.history: Any = None
        self.used = ""
        self.version = 0
        #: the first step read: that of the training the rule is armed for (trials 25a, 25c)
        self.floor = 0
        self._clear()

    def _clear(self) -> None:
        self.raw = self.rec = 0
        self.last: tuple[int, float] | None = None
        self.max_step = -math.inf
        self.steps: list[int] = []
        self.values: list[float] = []
        self.walls: list[float] = []
        self.ordered = True
        self.version += 1

    def _take(self, steps: list[int], values: list[float], walls: list[float]) -> None:
        """Add values with their wall times (``walls``: one per value, :func:`_walls_of_values`)."""
        for s, v, w in zip(steps, values, walls):
            if s > self.max_step:
                self.max_step = s
            if not math.isfinite(v) or s < self.floor:
                continue
            if not math.isfinite(w) or (self.steps and not (w >= self.walls[-1] and s >= self.steps[-1])):
                self.ordered = False
            self.steps.append(s)
            self.values.append(v)
            self.walls.append(w)

    def read(self, history: History, name: str, mode: str, worker: int,
             armed_from: Mapping[str, int] | None = None) -> _SeriesReader:
        """Bring the series up to date; returns itself. ``armed_from``: per mode, the first step of the
        training read (:attr:`BuiltinRule.armed_from`); the values before it are left out."""
        steps, values, used = series_any_mode(history, name, mode, worker)
        n = len(steps)
        floor = int((armed_from or {}).get(used, 0))
        same = (self.history is not None and self.history() is history and used == self.used and n >= self.raw
                and floor == self.floor
                and (self.last is None or (int(steps[self.raw - 1]) == self.last[0]
                                           and _same_float(float(values[self.raw - 1]), self.last[1]))))
        if same and n == self.raw:
            return self
        rsteps, rwalls = history.wall_times(used, worker)
        if same and len(rsteps) > self.rec:
            rnew = rsteps[self.rec:].tolist()
            new_steps = steps[self.raw:].tolist()
            # the wall time of a value read before changes only with a new record for its step
            if min(rnew) > self.max_step and set(new_steps) <= set(rnew):
                self._take(new_steps, values[self.raw:].tolist(),
                           _walls_of_values(new_steps, rnew, rwalls[self.rec:].tolist()))
                self._done(history, used, steps, values, len(rsteps))
                return self
        self._clear()
        self.floor = floor
        # (from the training's first step on: a bisection, not the earlier trainings' values)
        i, r = since_step(steps, floor), since_step(rsteps, floor)
        kept = steps[i:].tolist()
        self._take(kept, values[i:].tolist(), _walls_of_values(kept, rsteps[r:].tolist(), rwalls[r:].tolist()))
        self._done(history, used, steps, values, len(rsteps))
        return self

    def _done(self, history: History, used: str, steps: np.ndarray, values: np.ndarray, records: int) -> None:
        self.history = weakref.ref(history)
        self.used = used
        self.raw = len(steps)
        self.rec = records
        self.last = (int(steps[-1]), float(values[-1])) if self.raw else None


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
        # incremental reads per (worker, tensor, mode): derived from the History (rebuilt when missing
        # or stale), so not part of state_dict
        self._readers: dict[tuple[int, str, str], _SeriesReader] = {}

    def __getstate__(self) -> dict[str, Any]:
        # the readers hold a weak reference to the History (no pickling) and are rebuilt from it
        return {**self.__dict__, "_readers": {}}

    def named_inputs(self) -> dict[str, str]:
        return {"train": self.train, "validation": self.validation}

    def requirements(self) -> list[Requirement]:
        modes = tuple(dict.fromkeys((self.train_mode, self.validation_mode)))
        return [Requirement("losses", reductions=("raw",), modes=modes), Requirement("metrics", reductions=("raw",), modes=modes)]

    def direction(self, name: str) -> bool:
        """Whether the validation metric ``name`` is better high: ``higher_is_better`` where given, else
        from its name (:func:`higher_is_better`; a name that tells neither: lower)."""
        return higher_is_better(name) if self.higher_is_better is None else self.higher_is_better

    def directions(self, vname: str, tname: str | None) -> tuple[bool, bool]:
        """``(validation better high, training better high)``, each metric read in its own direction
        (trial 32e: one direction, the validation's, read for both made a falling training loss beside a
        validation accuracy "training got worse", and ``overfit`` could never fire). The validation
        metric's: ``higher_is_better`` where given, else its name's, else (a name that tells neither)
        the training metric's name's where it is better high (a score; a loss's direction tells nothing of
        another quantity's), else lower, said once in a WARNING. The training metric's: its name's, else (a name that
        tells neither, or no training metric) the validation metric's. A name tells a direction where
        :func:`higher_is_better`'s patterns match it (``loss``, ``error``, ``rmse``...: lower; ``auc``,
        ``accuracy``, ``f1``...: higher); ``higher_is_better`` sets the validation metric's alone, and
        the training metric's only where its own name tells neither."""
        t_told = None if tname is None else told_direction(tname)
        if self.higher_is_better is not None:
            v_hib = self.higher_is_better
        else:
            v_told = told_direction(vname)
            # (a name that tells nothing takes a training score's direction, not a training loss's: trial 43k,
            # val_kappa beside the default train="loss" was read better low, and a rising kappa stopped the fit)
            v_hib = v_told if v_told is not None else t_told is True
            if v_told is None and t_told is not True:
                self._say_guessed(vname)
        return v_hib, (v_hib if t_told is None else t_told)

    def _say_guessed(self, vname: str) -> None:
        """A WARNING, once per metric: neither metric's name tells a direction, and lower is taken
        (trial 43h: a custom metric ``skill``, an R^2, better high, was read better low in silence, and
        its overfitting, the validation value falling, went unseen; the loss rules say it of a metric
        that is better high)."""
        said = self.__dict__.setdefault("_said_guessed", set())
        if vname in said:
            return
        said.add(vname)
        logger.warning("tripwire: %s reads %r as better low: neither its name nor the training metric's tells a "
                       "direction (loss, error, rmse: low; auc, accuracy, f1: high); give higher_is_better: true "
                       "where it is better high", self.name, vname)

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

    def _read(self, history: History, worker: int, name: str, mode: str) -> _SeriesReader:
        key = (worker, name, mode)
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = _SeriesReader()
        return reader.read(history, name, mode, worker, self.armed_from)

    def restart(self) -> None:
        super().restart()
        self._last_seen, self._readers = {}, {}  # (the earlier trainings' values and counts)

    def new_validation(self, history: History, worker: int, vname: str) -> _SeriesReader | None:
        """The validation tensor's finite values with their wall times, or None when it holds no value
        it did not hold at the last evaluation."""
        reader = self._read(history, worker, vname, self.validation_mode)
        count = len(reader.values)
        key = f"{worker}:{vname}"
        if not count or self._last_seen.get(key) == count:
            return None
        self._last_seen[key] = count
        return reader

    def train_values(self, history: History, worker: int, tname: str | None) -> _SeriesReader | None:
        """The training tensor's finite values with their wall times (None without any)."""
        if tname is None:
            return None
        reader = self._read(history, worker, tname, self.train_mode)
        return reader if reader.values else None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "last_seen": dict(self._last_seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._last_seen = {str(k): int(v) for k, v in state.get("last_seen", {}).items()}


def told_direction(name: str) -> bool | None:
    """Whether the metric ``name`` is better high as its name tells it (:func:`higher_is_better`'s
    patterns: True for ``auc``, ``accuracy``, ``f1``...; False for ``loss``, ``error``, ``rmse``...), or
    None where its name matches neither (``val_skill``: :func:`higher_is_better` reads it as lower)."""
    base = name.rsplit("/", 1)[-1]
    metric = base.split("-", 1)[1] if "-" in base else ""  # (as higher_is_better reads it: XGBoost's "validation-auc")
    base = metric or base
    if _LOWER_IS_BETTER.search(base):
        return False
    if _HIGHER_IS_BETTER.search(base):
        return True
    return None


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

        # summaries of the values read so far per (worker, tensor): derived, not part of state_dict
        self._states: dict[tuple[int, str], tuple[int, _ValState]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_states": {}}

    def restart(self) -> None:
        super().restart()
        self._states = {}

    # ------------------------------------------------------------------------------ the decision
    def _training(self, train: _TrainIndex | None, walls: Sequence[float], k: int, best_i: int,
                  sign: float) -> tuple[bool, float | None, float | None]:
        """``(training still improving, t_k, t*)`` at validation value ``k`` (True without a training
        metric); the training metric read in its own direction (``train.sign``; None: ``sign``, the
        validation metric's)."""
        if train is None:
            return True, None, None
        t_now = train.at(float(walls[k]))
        t_best = train.at(float(walls[best_i]))
        if t_now is None:
            return False, None, t_best
        fresh = train.count_at(float(walls[k])) > train.count_at(float(walls[best_i]))
        tsign = sign if train.sign is None else train.sign
        if t_best is not None and fresh and not tsign * t_now < tsign * t_best:
            return False, t_now, t_best  # training got worse too: divergence, not overfitting
        return True, t_now, t_best

    def _level(self, st: _ValState, walls: Sequence[float], train: _TrainIndex | None, k: int) -> bool:
        """The level test at validation value ``k``."""
        best_i = st.best[k]
        v_best, v_now = st.v[best_i], st.v[k]
        margin = max(self.tolerance * abs(v_best), self.min_delta, self.noise * st.sigma[k])
        if not v_now > v_best + margin:
            return False
        improving, t_now, _ = self._training(train, walls, k, best_i, st.sign)
        return improving and self._gap(v_now, t_now, st.sign, None if train is None else train.sign)

    def _gap(self, v: float, t_now: float | None, sign: float, train_sign: float | None = None) -> bool:
        """Validation (``v``, in lower-is-better space) worse than training by more than ``gap``. Holds
        without a training value, and where the training metric is read in the other direction
        (``train_sign``, None: ``sign``): a training loss beside a validation accuracy are different
        quantities, whose values say nothing of each other (trial 32e)."""
        if t_now is None or (train_sign is not None and train_sign != sign):
            return True
        return v - sign * t_now > self.gap * abs(t_now)

    def assess(self, values: np.ndarray, walls: np.ndarray, train: TrainSeries | None,
               higher_is_better: bool, train_higher_is_better: bool | None = None) -> dict[str, Any] | None:
        """The verdict on the latest of ``values`` (pure): None, or what the finding reports
        (``test``: ``level`` or ``trend``; ``best``, ``now``, ``noise``, ``t_best``, ``t_now``; ``z`` for a
        trend). ``higher_is_better``: the validation metric's direction; ``train_higher_is_better``: the
        training metric's (None: the validation metric's)."""
        st = _ValState(-1.0 if higher_is_better else 1.0)  # compare in "lower is better" space
        st.extend(np.asarray(values, dtype=np.float64).tolist())
        tsign = None if train_higher_is_better is None else (-1.0 if train_higher_is_better else 1.0)
        return self._judge(st, walls, _TrainIndex.of(train, tsign))

    def _judge(self, st: _ValState, walls: Sequence[float], train: _TrainIndex | None) -> dict[str, Any] | None:
        """:meth:`assess` on the summaries of the values so far: O(log n) lookups and fixed windows."""
        n = len(st.u)
        if n < 2:
            return None
        sign = st.sign
        t = n - 1
        best_i = st.best[t]
        v_best = st.v[best_i]
        sigma = st.sigma[t]
        improving, t_now, t_best = self._training(train, walls, t, best_i, sign)
        if not improving:
            return None
        fresh = train is not None and train.count_at(float(walls[t])) > train.count_at(float(walls[best_i]))
        out = {"best": sign * v_best, "noise": sigma, "t_now": t_now, "t_best": t_best, "t_fresh": fresh}
        recent = range(t - self.confirm + 1, t + 1)
        if t >= self.confirm and all(self._level(st, walls, train, k) for k in recent):
            return {**out, "test": "level", "now": sign * st.v[t]}
        # after the best: its lucky low would bias Z upwards
        start = max(best_i + 1, n - _TREND_WINDOW)
        if n - start < self.trend_values:
            return None
        return self._trend(np.asarray(st.u[start:], dtype=np.float64), v_best, sigma, t_now, sign, out,
                           None if train is None else train.sign)

    def _trend(self, w: np.ndarray, v_best: float, sigma: float, t_now: float | None, sign: float,
               out: dict[str, Any], train_sign: float | None = None) -> dict[str, Any] | None:
        """The trend test on ``w``, the validation values after the best (lower-is-better space;
        ``train_sign``: the training metric's direction, as :meth:`_gap` reads it)."""
        z = mann_kendall_z(w)
        if not z >= self.trend_z:
            return None
        _, fitted = theil_sen_last(w)
        margin = max(self.tolerance * abs(v_best), self.trend_min_delta, self.noise * sigma)
        if fitted > v_best + margin and self._gap(fitted, t_now, sign, train_sign):
            return {**out, "test": "trend", "now": sign * fitted, "z": z}
        return None

    def _train_index(self, history: History, worker: int, tname: str | None,
                     higher_is_better: bool | None = None) -> _TrainIndex | None:
        """The training metric's values (None without any); ``higher_is_better``: its direction (None:
        the validation metric's)."""
        r = self.train_values(history, worker, tname)
        if r is None:
            return None
        sign = None if higher_is_better is None else (-1.0 if higher_is_better else 1.0)
        return _TrainIndex(r.walls, r.values, r.steps, value_interval(history, tname or ""), ordered=r.ordered,
                           sign=sign)

    def _summaries(self, worker: int, vname: str, reader: _SeriesReader, sign: float) -> _ValState:
        key = (worker, vname)
        version, st = self._states.get(key, (-1, None))
        if st is None or version != reader.version or st.sign != sign or len(st.u) > len(reader.values):
            st = _ValState(sign)
        st.extend(reader.values[len(st.u):])
        self._states[key] = (reader.version, st)
        return st

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker, vname, tname in self.pairs(history):
            reader = self.new_validation(history, worker, vname)
            if reader is None:
                continue
            seen = True
            hib, t_hib = self.directions(vname, tname)
            st = self._summaries(worker, vname, reader, -1.0 if hib else 1.0)
            train = self._train_index(history, worker, tname, t_hib)
            verdict = self._judge(st, reader.walls, train)
            if verdict is None:
                continue
            v_best, v_now, t_best, t_now = verdict["best"], verdict["now"], verdict["t_best"], verdict["t_now"]
            direction = "fallen" if hib else "risen"
            worse = abs(v_now - v_best) / abs(v_best) * 100 if v_best else float("inf")
            # the values compared are running medians (or the trend line): each is said as what it is,
            # beside the latest and the best single value (trial 26d/26c: "risen to 0.86 from its best
            # 0.52" read as two values of the series, whose best was 0.5 and latest 0.95)
            # each value named by its step, the numbering of the finding's own step (trial 27f: "at
            # evaluation 7", counted from 1 over the validation values, was XGBoost's round 6)
            steps = reader.steps

            def where(k: int) -> str:
                return _at_step(history, reader.used, steps[k], worker)

            latest, top = _single_values(st, hib, where)
            if verdict["test"] == "level":
                how = f"has {direction} to {fmt(v_now)} ({_median_of(len(st.u) - 1, steps)}; {latest})"
            else:
                how = (f"has been {'falling' if hib else 'rising'} steadily (Mann-Kendall z {fmt(verdict['z'])}; "
                       f"trend line now at {fmt(v_now)}; {latest})")
            best_what = _median_of(st.best[len(st.u) - 1], steps)
            msg = f"{vname} {how} from its best {fmt(v_best)} ({best_what}; {top}) ({fmt(worse)}% worse)"
            # each training value said as what it is: the values it was taken from counted (trial 28f:
            # "medians of its last 5 saves" of a single value, and of an XGBoost metric's 4 saves)
            now_said, now_full = ("", False) if train is None or t_now is None else \
                train_said(train.steps_at(float(reader.walls[len(st.u) - 1])) or [], train.every)
            if t_now is not None and verdict["t_fresh"] and t_best is not None:
                best_said, best_full = ("", False) if train is None else \
                    train_said(train.steps_at(float(reader.walls[st.best[len(st.u) - 1]])) or [], train.every)
                # (trial 19a: "at or below" was said of an accuracy that rose from 0.725 to 0.99)
                said = (f", medians of its last {_TRAIN_WINDOW} saves" if best_full and now_full else
                        f": {best_said}, then {now_said}")
                msg += (f" while {tname} stayed at or {'above' if t_hib else 'below'} its value then "
                        f"({fmt(t_best)} -> {fmt(t_now)}{said})")
            elif t_now is not None and verdict["t_fresh"]:
                # no training value before the best (a validation before training began): nothing to compare
                # with, so no claim (trial 27g: "stayed at or below its value then (? -> 268.3 ...)")
                msg += (f" ({tname} had no value saved at or before that best, so whether it improved since is not "
                        f"known; now {fmt(t_now)}, "
                        f"{f'the median of its last {_TRAIN_WINDOW} saves' if now_full else now_said})")
            elif t_now is not None:
                msg += (f" ({tname} has no value saved since that best, last {fmt(t_now)}: saved as often as "
                        f"{vname}, it would tell overfitting from divergence)")
            msg += (
                ": the model is overfitting. Usual fixes: early stopping at the best validation value, more "
                "training data or augmentation, regularisation (weight decay, dropout; XGBoost: lower max_depth, "
                "higher min_child_weight, subsample), or a smaller model."
            )
            evaluations = len(st.u)
            best_at = st.best[evaluations - 1] + 1  # (1: the first validation value)
            # (trial 24b: a constant training label, best at evaluation 1 of 4, was told "overfitting" alone)
            if best_at <= _EARLY_BEST and evaluations >= 2 * best_at + 1:
                # (trial 18e: a model memorising shuffled labels was told to stop early at a chance-level best)
                msg += (f" Its best came at the {_ordinal(best_at)} of {evaluations} evaluations "
                        f"({where(best_at - 1)}): a model that "
                        "never generalised is as likely (labels not matching inputs, such as shuffled training labels "
                        "it memorises; a validation set from another distribution); check that before keeping the "
                        "best checkpoint.")
            details = {k: verdict[k] for k in ("best", "now", "noise", "test") if k in verdict}
            details["best_at"] = best_at
            details["best_step"] = int(steps[best_at - 1])
            if "z" in verdict:
                details["z"] = verdict["z"]
            tensors = [vname] + ([tname] if tname else [])
            found.append(self.finding(step, mode, msg, tensors=tensors, worker=worker, **details))
        if not seen:
            return NO_DATA
        return found
