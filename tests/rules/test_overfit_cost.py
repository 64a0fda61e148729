"""``overfit`` costs the same per evaluation however long the run (trial 14b, finding 5), and decides
exactly what the whole-series algorithm it replaced decided.

The old algorithm recomputed everything over the whole validation series at every evaluation (a
running median per value, the noise over every change, scans of the training series): 12.7 ms a round
after 2,000 XGBoost rounds. It is kept below, verbatim, as the reference (``SlowOverfit``); its training
lookups are the module's own ``train_at`` and ``train_count_at``, unchanged (the incremental form still
uses them for series written out of order)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tripwire import History
from tripwire.rules import Overfit
from tripwire.rules import overfit as overfit_module
from tripwire.rules._common import NO_DATA
from tripwire.rules._common import series_any_mode
from tripwire.rules._loss import value_interval
from tripwire.rules.overfit import _TREND_WINDOW, _VAL_WINDOW, train_at, train_count_at


# --------------------------------------------------------------- the reference: the old algorithm
def ref_rolling_median(x: np.ndarray, k: int) -> np.ndarray:
    return np.asarray([float(np.median(x[max(0, i - k + 1): i + 1])) for i in range(len(x))])


def ref_validation_noise(values: np.ndarray) -> float:
    d = np.diff(values)
    if len(d) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def ref_sigma(values: np.ndarray) -> float:
    """The rule's noise: the larger of the whole series' and that of its last 10 changes (trial 28c)."""
    return max(ref_validation_noise(values), ref_validation_noise(values[-11:]))


def metric_with_walls(history: Any, name: str, mode: str, worker: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The whole-series read as it was: ``(steps, values, wall_times, mode)``, finite values only, the
    wall time of a value that of the latest record of its step."""
    steps, values, used = series_any_mode(history, name, mode, worker)
    rsteps, rwalls = history.wall_times(used, worker)
    walls_of = dict(zip(rsteps.tolist(), rwalls.tolist()))
    walls = np.asarray([walls_of.get(int(s), np.nan) for s in steps.tolist()], dtype=np.float64)
    keep = np.isfinite(values)
    return steps[keep], values[keep], walls[keep], used


class SlowOverfit(Overfit):
    """``overfit`` as it was before the incremental forms: records each verdict in ``verdicts``."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.verdicts: list[Any] = []
        self._seen: dict[str, int] = {}

    def _ref_training(self, train: Any, walls: np.ndarray, k: int, best_i: int, sign: float) -> Any:
        if train is None:
            return True, None, None
        t_now = train_at(train, float(walls[k]))
        t_best = train_at(train, float(walls[best_i]))
        if t_now is None:
            return False, None, t_best
        fresh = train_count_at(train, float(walls[k])) > train_count_at(train, float(walls[best_i]))
        if t_best is not None and fresh and not sign * t_now < sign * t_best:
            return False, t_now, t_best
        return True, t_now, t_best

    def _ref_level(self, u: np.ndarray, v: np.ndarray, walls: np.ndarray, train: Any, k: int, sign: float) -> bool:
        best_i = int(np.argmin(v[:k]))
        v_best, v_now = float(v[best_i]), float(v[k])
        margin = max(self.tolerance * abs(v_best), self.min_delta, self.noise * ref_sigma(u[: k + 1]))
        if not v_now > v_best + margin:
            return False
        improving, t_now, _ = self._ref_training(train, walls, k, best_i, sign)
        return improving and self._gap(v_now, t_now, sign)

    def ref_assess(self, values: np.ndarray, walls: np.ndarray, train: Any, higher_is_better: bool) -> Any:
        if len(values) < 2:
            return None
        sign = -1.0 if higher_is_better else 1.0
        u = sign * np.asarray(values, dtype=np.float64)
        v = ref_rolling_median(u, _VAL_WINDOW)
        t = len(u) - 1
        best_i = int(np.argmin(v[:-1]))
        v_best = float(v[best_i])
        sigma = ref_sigma(u)
        improving, t_now, t_best = self._ref_training(train, walls, t, best_i, sign)
        if not improving:
            return None
        fresh = train is not None and train_count_at(train, float(walls[t])) > train_count_at(train, float(walls[best_i]))
        out = {"best": sign * v_best, "noise": sigma, "t_now": t_now, "t_best": t_best, "t_fresh": fresh}
        recent = range(t - self.confirm + 1, t + 1)
        if t >= self.confirm and all(self._ref_level(u, v, walls, train, k, sign) for k in recent):
            return {**out, "test": "level", "now": sign * float(v[-1])}
        w = u[best_i + 1:][-_TREND_WINDOW:]
        if len(w) < self.trend_values:
            return None
        return self._trend(w, v_best, sigma, t_now, sign, out)  # (the trend test itself did not change)

    def check(self, history: History, step: int, mode: str) -> Any:
        seen = False
        for worker, vname, tname in self.pairs(history):
            steps, values, walls, _ = metric_with_walls(history, vname, self.validation_mode, worker)
            key = f"{worker}:{vname}"
            if not len(steps) or self._seen.get(key) == len(steps):
                continue
            self._seen[key] = len(steps)
            seen = True
            train = None
            if tname is not None:
                tsteps, tvalues, twalls, _ = metric_with_walls(history, tname, self.train_mode, worker)
                if len(tvalues):
                    train = (twalls, tvalues, tsteps, value_interval(history, tname))
            self.verdicts.append(self.ref_assess(values, walls, train, self.direction(vname)))
        return None if seen else NO_DATA


class Recording(Overfit):
    """The rule as it is, recording each verdict of ``check`` in ``verdicts``."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.verdicts: list[Any] = []

    def _judge(self, st: Any, walls: Any, train: Any) -> Any:
        verdict = super()._judge(st, walls, train)
        self.verdicts.append(verdict)
        return verdict


# -------------------------------------------------------------------------------- the replays
def _add(history: History, mode: str, step: int, wall: float, name: str, value: float, collection: str = "losses") -> None:
    history.add_step(mode, step, 0, wall, [(name, ("raw",))], np.asarray([value]), declare={name: [collection]})


def replay(val: np.ndarray, train: np.ndarray, rules: list[Any], train_every: int = 1, every_step: int = 0,
           vname: str = "val_loss", tname: str = "loss") -> History:
    """XGBoost's layout: a validation value each round, the training metric every ``train_every``
    rounds; ``every_step``: instead, ``every_step`` training values per round (the training loss kept
    at every step, read in save intervals). Each rule's ``check`` runs after each validation value."""
    history = History()
    if every_step:
        history.every_step = {"losses": every_step}
    wall = 0.0
    for r, (v, t) in enumerate(zip(val, train)):
        if every_step:
            for j in range(every_step):
                wall += 0.1
                _add(history, "train", r * every_step + j, wall, tname, float(t) * (1 + 0.01 * math.sin(j)))
        elif r % train_every == 0:
            wall += 0.1
            _add(history, "train", r, wall, tname, float(t))
        wall += 0.1
        _add(history, "eval", r, wall, vname, float(v), "metrics" if "auc" in vname else "losses")
        for rule in rules:
            rule.check(history, r, "eval")
    return history


N = 260


def scenarios() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    k = np.arange(N, dtype=float)
    falling = 0.6 * np.exp(-k / 60) + 0.05
    noise = rng.standard_normal(N)
    return {
        # rising from the start, training falling: the level and the trend both fire early
        "rising": (0.5 + 0.002 * k + 0.01 * noise, falling),
        # a flat, noisy validation loss with ties (rounded): mostly quiet
        "noisy_flat": (np.round(0.5 + 0.03 * noise, 2), falling),
        # falls to a minimum at round 90, then a slow climb: overfitting after the minimum
        "overfit_after_min": (0.3 + 0.3 * np.exp(-k / 30) + 0.0015 * np.maximum(k - 90, 0) + 0.004 * noise, falling),
        # both rise after round 80: divergence, vetoed by the training metric
        "diverging": (0.4 + 0.004 * np.maximum(k - 80, 0) + 0.005 * noise, 0.3 + 0.004 * np.maximum(k - 80, 0)),
    }


VARIANTS = {
    "defaults": {},
    "sensitive": {"tolerance": 0.02, "min_delta": 0.0, "trend_min_delta": 0.0, "noise": 1.0, "confirm": 2},
}


@pytest.mark.parametrize("layout", [{"train_every": 1}, {"train_every": 10}, {"every_step": 4}])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_same_verdicts_as_the_whole_series_algorithm(variant: str, layout: dict[str, int]) -> None:
    fired = {"level": 0, "trend": 0}
    for name, (val, train) in scenarios().items():
        fast, slow = Recording(**VARIANTS[variant]), SlowOverfit(**VARIANTS[variant])
        replay(val, train, [fast, slow], **layout)
        assert len(fast.verdicts) == len(slow.verdicts) == N, name
        for r, (a, b) in enumerate(zip(fast.verdicts, slow.verdicts)):
            assert a == b, (name, r, a, b)  # the same floats, not only the same decision
            if a:
                fired[a["test"]] += 1
    assert fired["level"] and (fired["trend"] or variant != "defaults")  # both tests were exercised


def test_same_verdicts_on_a_higher_is_better_metric() -> None:
    rng = np.random.default_rng(3)
    k = np.arange(N, dtype=float)
    val = 0.95 - 0.2 * np.exp(-k / 30) - 0.001 * np.maximum(k - 100, 0) + 0.003 * rng.standard_normal(N)
    train = 0.99 - 0.3 * np.exp(-k / 40)
    kw = {"train": "train-auc", "validation": "validation-auc"}
    fast, slow = Recording(**kw), SlowOverfit(**kw)
    replay(val, train, [fast, slow], train_every=5, vname="validation-auc", tname="train-auc")
    assert fast.verdicts == slow.verdicts and any(fast.verdicts)


def test_assess_is_unchanged_on_prefixes() -> None:
    val = scenarios()["overfit_after_min"][0][:150]
    walls = np.arange(len(val), dtype=float)
    train = (walls - 0.5, np.geomspace(0.5, 0.05, len(val)), np.arange(len(val)), 1)
    rule, ref = Overfit(), SlowOverfit()
    for n in range(1, len(val) + 1):
        assert rule.assess(val[:n], walls[:n], train, False) == ref.ref_assess(val[:n], walls[:n], train, False), n


def test_noise_matches_the_whole_series_formula() -> None:
    from tripwire.rules.overfit import _Noise

    rng = np.random.default_rng(1)
    for series in (rng.standard_normal(300), np.round(rng.standard_normal(300), 1), np.repeat([0.5, 0.6, 0.4], 40),
                   np.cumsum(rng.standard_normal(200)), np.linspace(0, 1, 50)):
        noise = _Noise()
        for n, x in enumerate(series.tolist(), 1):
            assert noise.add(x) == ref_validation_noise(series[:n]), n


def test_rewritten_records_are_read_again() -> None:
    # a record written later for a step already read (a resumed run) changes that value's wall time:
    # the incremental reader must see it as the whole-series reader does
    val = scenarios()["overfit_after_min"][0][:120]
    fast, slow = Recording(), SlowOverfit()
    history = replay(val, np.geomspace(0.5, 0.05, 120), [fast, slow], train_every=3)
    _add(history, "eval", 50, 1e6, "other", 1.0)  # a later record of eval step 50
    _add(history, "train", 200, 1e6 + 1, "loss", 0.01)
    _add(history, "eval", 120, 1e6 + 2, "val_loss", 0.9)
    for rule in (fast, slow):
        rule.check(history, 120, "eval")
    assert fast.verdicts == slow.verdicts


# ------------------------------------------------------------------- the cost does not grow
class _CountingNumpy:
    """Stands in for ``np`` inside the overfit module: counts calls and the largest array handed over."""

    def __init__(self) -> None:
        self.calls = 0
        self.largest = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(np, name)
        if not callable(target) or isinstance(target, type):
            return target

        def counted(*args: Any, **kw: Any) -> Any:
            self.calls += 1
            for a in args:
                if isinstance(a, (np.ndarray, list, tuple)):
                    self.largest = max(self.largest, len(a))
            return target(*args, **kw)

        return counted


def _cost_per_evaluation(monkeypatch: pytest.MonkeyPatch, rounds: int, layout: dict[str, int]) -> tuple[int, int, int]:
    """(numpy calls, largest array handed to numpy, values read) of the rule's last 20 evaluations."""
    counter = _CountingNumpy()
    monkeypatch.setattr(overfit_module, "np", counter)
    reads: list[int] = []
    reader = getattr(overfit_module, "_SeriesReader", None)  # absent before: the whole series was read
    if reader is not None:
        take = reader._take

        def counted_take(self: Any, steps: list[int], values: list[float], walls_of: dict[int, float]) -> None:
            reads[-1] += len(steps)
            take(self, steps, values, walls_of)

        monkeypatch.setattr(reader, "_take", counted_take)
    rng = np.random.default_rng(0)
    val = 0.5 + 0.03 * rng.standard_normal(rounds)  # noisy plateau: nothing fires, every path is read
    train = np.geomspace(0.5, 0.05, rounds)

    class Probe(Overfit):
        def check(self, history: History, step: int, mode: str) -> Any:
            if step >= rounds - 20:
                counter.calls = counter.largest = 0
            reads.append(0)
            out = super().check(history, step, mode)
            if step >= rounds - 20:
                worst[0] = max(worst[0], counter.calls)
                worst[1] = max(worst[1], counter.largest)
                worst[2] = max(worst[2], reads[-1])
            return out

    worst = [0, 0, 0]
    replay(val, train, [Probe()], **layout)
    monkeypatch.undo()
    return worst[0], worst[1], worst[2]


@pytest.mark.parametrize("layout", [{"train_every": 10}, {"every_step": 4}])
def test_cost_per_evaluation_does_not_grow_with_the_run(monkeypatch: pytest.MonkeyPatch, layout: dict[str, int]) -> None:
    short = _cost_per_evaluation(monkeypatch, 100, layout)
    long = _cost_per_evaluation(monkeypatch, 1500, layout)
    # as many numpy calls after 1,500 rounds as after 100 (the old algorithm made one per value), no
    # array larger than the pairs of the trend window (Mann-Kendall, Theil-Sen: at most 30 values), and
    # only the values written since the last evaluation read (one validation value, the training
    # values of one round)
    assert long[0] <= max(short[0], 20)
    assert long[1] <= _TREND_WINDOW * (_TREND_WINDOW - 1) // 2
    assert long[2] <= 1 + layout.get("every_step", 1)
