"""Overtraining: neither the validation nor the training metric improves any more.

Condition: the validation metric has not beaten its best by more than ``min_delta * |best|`` for
``val_patience`` new validation values, and the median of the training values of the last ``window``
save intervals is not better than ``(1 - min_delta)`` times the median of the ``window`` intervals
before (lower-is-better; signs flip for higher-is-better, each metric read in its own direction as in
``overfit``: the default ``train="loss"`` beside ``validation="val_acc"`` is a loss read lower-is-better
and an accuracy read higher-is-better). A save interval holds one training value
when one is saved per save step or round, ``I`` values when the training loss is kept at every step
(``every_step``, ``I`` the train save interval). So the rule judges once the training metric spans
``2 * window`` save intervals (40 by default: 400 rounds of a booster whose training metric is saved
every 10; trial 37k): a training shorter than that gets no finding, whatever its validations; a
smaller ``window`` judges earlier.

Defaults: ``train="loss"``, ``validation="val_loss"``, ``train_mode="train"``,
``validation_mode="eval"``, ``min_delta=0.01``, ``val_patience=10``, ``window=20`` (save intervals),
``higher_is_better=None`` (inferred from the names; given, it sets the validation metric's direction, and
the training metric's only where its own name tells none), modes ``train`` and ``eval``, severity ``info``
(not a fault: converged training fires it by design; pair it with ``stop_training`` to stop early).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int
from ._common import NO_DATA, fmt
from ._loss import value_interval
from ._registry import register_rule
from .overfit import _TrainValRule, _same_float, last_intervals


@register_rule
class Overtraining(_TrainValRule):
    """Training goes on although nothing improves (see the module docstring)."""

    name = "overtraining"
    summary = "neither the validation nor the training metric improves any more (an early-stopping signal)"
    default_severity = "info"

    def __init__(self, train: str = "loss", validation: str = "val_loss", train_mode: str = "train",
                 validation_mode: str = "eval", min_delta: float = 0.01, val_patience: int = 10, window: int = 20,
                 higher_is_better: bool | None = None, **common: Any) -> None:
        super().__init__(train, validation, train_mode, validation_mode, higher_is_better, **common)
        self.min_delta = check_float(min_delta, f"{self.name}.min_delta", minimum=0.0, maximum=1.0)
        self.val_patience = check_int(val_patience, f"{self.name}.val_patience", minimum=1)
        self.window = check_int(window, f"{self.name}.window", minimum=1)
        # per (worker, validation tensor): the scan below so far, continued with each new value (a
        # derived cache, rebuilt when the series' start changed: not part of state_dict)
        self._scans: dict[tuple[int, str], _Scan] = {}

    def check(self, history: History, step: int, mode: str) -> Any:
        found = []
        seen = False
        for worker, vname, tname in self.pairs(history):
            reader = self.new_validation(history, worker, vname)
            if reader is None:
                continue
            seen = True
            values = np.asarray(reader.values, dtype=np.float64)
            if len(values) <= self.val_patience:
                continue
            v_high, t_high = self.directions(vname, tname)
            sign = -1.0 if v_high else 1.0
            t_sign = -1.0 if t_high else 1.0  # (trial 32e: each metric in its own direction, as overfit's)
            scan = self._scans.get((worker, vname))
            if scan is None or not scan.continues(values, sign):
                scan = self._scans[(worker, vname)] = _Scan(sign)
            best, last_improved = scan.extend(values, self.min_delta)
            since = len(values) - 1 - last_improved
            if since < self.val_patience:
                continue
            train = self.train_values(history, worker, tname)
            t_msg = ""
            if train is not None:
                every = value_interval(history, tname or "")
                spans = last_intervals((np.asarray(train.walls), np.asarray(train.values, dtype=np.float64),
                                        np.asarray(train.steps, dtype=np.int64), every), self.window)
                if spans is None:
                    continue
                before = float(np.median(t_sign * spans[0]))
                now = float(np.median(t_sign * spans[1]))
                if now < before - self.min_delta * abs(before):
                    continue  # training still improves
                unit = "values" if every <= 1 else "save intervals"
                t_msg = (f" and {tname} is flat ({fmt(t_sign * before)} -> {fmt(t_sign * now)} over the last "
                         f"{2 * self.window} {unit})")
            first = float(sign * values[0])
            if best >= first - self.min_delta * abs(first):
                # it never beat its first value: nothing was learnt, not a converged training (trial
                # 17i: boosters at eta 1e-4 and at eta 10 were told "further training only costs
                # time" and to keep the best checkpoint)
                advice = (f"; it never beat its first value ({fmt(sign * first)}) by more than "
                          f"{fmt(self.min_delta * 100)}%: nothing was learnt, which is no converged training. Check "
                          f"the learning rate (far too low, or so high that the first steps diverged), the labels "
                          f"and the inputs")
            else:
                advice = (": further training only costs time. Stop here (early stopping with the best checkpoint), "
                          "or change the learning-rate schedule or the model")
            found.append(self.finding(
                step, mode,
                f"{vname} has not improved by more than {fmt(self.min_delta * 100)}% for {since} validations "
                f"(best {fmt(sign * best)}){t_msg}{advice}.",
                tensors=[vname] + ([tname] if tname else []), since=since, worker=worker,
            ))
        if not seen:
            return NO_DATA
        return found

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_scans": {}}

    def restart(self) -> None:
        super().restart()
        self._scans = {}


class _Scan:
    """The best validation value so far and the index of the last value that beat the best before
    it by more than ``min_delta * |best|`` (lower-is-better after ``sign``), over the values seen,
    extended value by value: an evaluation costs the new values, not the whole run."""

    __slots__ = ("sign", "n", "best", "last_improved", "first", "last")

    def __init__(self, sign: float) -> None:
        self.sign = sign
        self.n = 0
        self.best = self.first = self.last = float("nan")
        self.last_improved = 0

    def continues(self, values: np.ndarray, sign: float) -> bool:
        """Whether ``values`` is the series scanned so far plus new values."""
        if sign != self.sign or len(values) < self.n:
            return False
        return self.n == 0 or (_same_float(float(values[0]), self.first)
                               and _same_float(float(values[self.n - 1]), self.last))

    def extend(self, values: np.ndarray, min_delta: float) -> tuple[float, int]:
        v = self.sign * np.asarray(values[self.n:], dtype=np.float64)
        start = self.n
        if start == 0 and len(v):
            self.first, self.best = float(values[0]), float(v[0])  # (first as read; best after sign)
            v, start = v[1:], 1
        best, last_improved = self.best, self.last_improved
        for i, x in enumerate(v.tolist(), start):
            if x < best - min_delta * abs(best):
                last_improved = i
            if x < best:
                best = x
        self.best, self.last_improved, self.n = best, last_improved, len(values)
        if len(values):
            self.last = float(values[-1])
        return best, last_improved
