"""``Hyperband(sampler="tpe")``: the BOHB-style model-based sampler (Optuna's TPE in ask/tell mode)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._errors import ConfigError
from tripwire.tune import Categorical, Continuous, Hyperband, Integer, Space, Tuner
from tripwire.tune._strategy import strategy_from_dict

pytest.importorskip("optuna")

SPACE = Space({"x": Continuous(0.0, 1.0), "n": Integer(1, 10), "m": Continuous(0.001, 0.99, scale="reverse_log"),
               "c": Categorical(["a", "b", None])})
LEVELS = [1, 3, 9, 27]


def _score(p: dict) -> float:
    return -(p["x"] - 0.3) ** 2 - ((p["n"] - 4) / 10) ** 2 - (0.1 if p["c"] == "b" else 0.0)


def _fed(seed: int = 0, n: int = 30, **kw):
    s = Hyperband(1, 27, 3, sampler="tpe", **kw).sampler(SPACE, seed, "max")
    for number in range(n):
        p = s(number)
        for step in range(1, 28):
            s.observe(number, p, step, _score(p) * (1 - math.exp(-step / 3)))
    return s


@pytest.mark.parametrize("kw, match", [
    ({"sampler": "bayes"}, r"sampler: got 'bayes'; accepted: 'random', 'tpe' \(also 'bohb'"),
    ({"sampler": "tpe", "random_fraction": 1.5}, r"random_fraction=1.5 must be a number in \[0, 1\]"),
    ({"sampler": "tpe", "min_points": 1}, r"min_points=1 must be None or an int >= 2"),
])
def test_validation(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Hyperband(1, 27, 3, **kw)


def test_missing_optuna_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ImportError, match=r"tripwire\[bohb\]"):
        Hyperband(1, 27, 3, sampler="tpe")
    Hyperband(1, 27, 3)  # the default sampler needs nothing


def test_round_trip_and_default_dict_unchanged() -> None:
    assert Hyperband(1, 27, 3).to_dict() == {"type": "hyperband", "min_resource": 1, "max_resource": 27,
                                             "reduction_factor": 3}
    h = Hyperband(1, 27, 3, sampler="tpe", random_fraction=0.25, min_points=5)
    assert strategy_from_dict(h.to_dict()) == h and "sampler='tpe'" in repr(h)


def test_random_until_enough_results_then_the_model() -> None:
    s = Hyperband(1, 27, 3, sampler="tpe").sampler(SPACE, 7, "max")
    assert s.levels == [*LEVELS, 27] or s.levels == LEVELS  # rung levels and max_resource
    assert s.min_points == len(SPACE.ranges) + 2
    assert [s(n) for n in range(5)] == [SPACE.sample(7, n) for n in range(5)]  # no results yet: random
    s.observe(0, SPACE.sample(7, 0), 2, 0.5)            # not a level: ignored
    s.observe(1, SPACE.sample(7, 1), 1, float("nan"))   # NaN: ignored
    assert s.model_level() is None
    fed = _fed(seed=7)
    assert fed.model_level() == 27                       # the highest level with min_points results
    props = [fed(n) for n in range(100, 160)]
    modelled = [p for n, p in zip(range(100, 160), props) if p != SPACE.sample(7, n)]
    assert len(modelled) >= 25                           # about 2/3 of them come from the model
    for p in props:                                      # every proposal is a valid point of the space
        assert 0 <= p["x"] <= 1 and isinstance(p["n"], int) and 1 <= p["n"] <= 10
        assert 0.001 <= p["m"] <= 0.99 and p["c"] in ("a", "b", None)
    rnd = [SPACE.sample(7, n) for n in range(100, 160)]
    mean = lambda ps: sum(_score(p) for p in ps) / len(ps)  # noqa: E731
    assert mean(modelled) > mean(rnd)                    # the model proposes better configurations


def test_deterministic_for_the_same_observations() -> None:
    a, b = _fed(seed=3), _fed(seed=3)
    assert [a(n) for n in range(30, 45)] == [b(n) for n in range(30, 45)]
    c = _fed(seed=4)
    assert [a(n) for n in range(45, 50)] != [c(n) for n in range(45, 50)]


def test_tuner_with_tpe_sampler(tmp_path: Path) -> None:
    kw = dict(space={"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3, sampler="tpe", min_points=3),
              max_jobs=24, max_parallel_jobs=1, seed=2)
    a = Tuner(tt.train_curve, journal=str(tmp_path / "a.db"), **kw).fit()
    b = Tuner(tt.train_curve, journal=str(tmp_path / "b.db"), **kw).fit()
    assert [t.params for t in a.trials] == [t.params for t in b.trials]   # one worker: same order, same proposals
    random_x = [Space.from_dict(kw["space"]).sample(2, n)["x"] for n in range(24)]
    xs = [t.params["x"] for t in a.trials]
    assert xs[:3] == random_x[:3] and xs != random_x                        # random first, then the model
    assert sum(x != r for x, r in zip(xs[12:], random_x[12:])) >= 4          # about 2/3 from the model
    assert a.counts()["stopped"] > 0 and a.best is not None
    resumed = Tuner.resume(tmp_path / "a.db", max_jobs=30).fit()           # observations replayed from the journal
    assert [t.params for t in resumed.trials[:24]] == [t.params for t in a.trials]
    assert len(resumed.trials) == 30
