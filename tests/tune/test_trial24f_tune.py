"""The tuner's classes given a wrong argument (trial 24f):

- a misspelled keyword of Hyperband, RandomSearch, GridSearch, Tuner, Integer, Continuous or
  Categorical is a TypeError (a ConfigError too) naming the class, the keyword, a "did you mean"
  and the accepted keywords (it was Python's bare "got an unexpected keyword argument");
- numpy integers are integers wherever an integer is taken (resources, ``num_points``, ``max_jobs``,
  ``max_parallel_jobs``, ``seed``), kept as Python ints; ``Categorical`` takes numpy scalars as the
  Python values they hold (``np.int64(1)`` was refused, ``np.float64(0.1)`` kept as numpy's);
- ``trial_metric=""`` is refused when a callback is made (XGBoost refused it at the first boosting
  round only, from inside ``xgb.train``);
- ``TuningResult.from_journal(None)`` names the argument (it was "expected str, bytes or os.PathLike").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.tune import (Categorical, Continuous, GridSearch, Hyperband, Integer, RandomSearch, Tuner,
                           TuningResult)


def _train(params, trial):
    return float(params["x"])


@pytest.mark.parametrize("make, said", [
    (lambda: Hyperband(reducton_factor=3),
     r"^Hyperband\(reducton_factor=3\): unknown argument 'reducton_factor'; did you mean 'reduction_factor'\? "
     r"\(accepted: min_resource, max_resource, reduction_factor, sampler, "),
    (lambda: RandomSearch(max_resorce=3), r"^RandomSearch\(max_resorce=3\): .*did you mean 'max_resource'\? "
                                          r"\(accepted: max_resource\)"),
    (lambda: GridSearch(num_pionts=3), r"^GridSearch\(num_pionts=3\): .*did you mean 'num_points'\? \(accepted: "
                                       r"max_resource, num_points, integer_grid\)"),
    (lambda: Tuner(_train, {"x": Integer(1, 3)}, max_job=3),
     r"^Tuner\(max_job=3\): unknown argument 'max_job'; did you mean 'max_jobs'\? \(accepted: train, space, "),
    (lambda: Integer(1, 5, scael="log"), r"^Integer\(scael='log'\): .*did you mean 'scale'\? \(accepted: low, high, "
                                         r"scale\)"),
    (lambda: Continuous(0.1, 1.0, scal="log"), r"^Continuous\(scal='log'\): .*did you mean 'scale'\?"),
    (lambda: Categorical(valus=[1, 2]), r"^Categorical\(valus=\[1, 2\]\): .*did you mean 'values'\?"),
])
def test_a_misspelled_keyword_is_named_with_did_you_mean_and_stays_a_type_error(make, said: str) -> None:
    with pytest.raises(TypeError, match=said) as info:
        make()
    assert isinstance(info.value, tripwire.ConfigError)


def test_a_strategy_mapping_and_a_range_mapping_still_name_their_place() -> None:
    from tripwire.tune._strategy import strategy_from_dict
    from tripwire.tune._space import Space

    with pytest.raises(tripwire.ConfigError, match=r"strategy \(hyperband\)\.reducton_factor: unknown key .*did you "
                                                   r"mean 'reduction_factor'"):
        strategy_from_dict({"type": "hyperband", "reducton_factor": 3})
    with pytest.raises(tripwire.ConfigError, match=r"space\['x'\]: integer range\.scael: unknown key"):
        Space.from_dict({"x": {"type": "integer", "low": 1, "high": 3, "scael": "log"}})


def test_tuner_resume_names_a_misspelled_limit() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"cannot override \['max_job'\]; did you mean 'max_jobs'\?"):
        Tuner.resume("nowhere.db", max_job=3)


def test_numpy_integers_are_integers_in_the_strategies_and_the_tuner() -> None:
    h = Hyperband(min_resource=np.int64(1), max_resource=np.int64(27), reduction_factor=np.int32(3))
    assert (h.min_resource, h.max_resource, h.reduction_factor) == (1, 27, 3)
    assert all(type(v) is int for v in (h.min_resource, h.max_resource, h.reduction_factor))
    assert json.dumps(h.to_dict())  # (plain numbers: the journal holds them)
    tpe_args = Hyperband(1, 27, 3, min_points=np.int64(4))  # (the sampler's count too)
    assert tpe_args.min_points == 4 and type(tpe_args.min_points) is int
    r = RandomSearch(max_resource=np.int64(5))
    assert r.max_resource == 5 and type(r.max_resource) is int
    g = GridSearch(max_resource=np.int64(4), num_points=np.int64(3))
    assert (g.max_resource, g.num_points) == (4, 3) and type(g.num_points) is int
    t = Tuner(_train, {"x": Integer(1, 3)}, max_jobs=np.int64(2), max_parallel_jobs=np.int64(1), seed=np.int64(0))
    assert (t.max_jobs, t.max_parallel_jobs, t.seed) == (2, 1, 0)
    assert all(type(v) is int for v in (t.max_jobs, t.max_parallel_jobs, t.seed))
    assert Integer(np.int64(1), np.int64(5)).to_dict()["high"] == 5
    for bad in (np.bool_(True), True, 2.5):  # (a bool, numpy's too, is no integer)
        with pytest.raises(tripwire.ConfigError, match="must be an int >= 1"):
            Tuner(_train, {"x": Integer(1, 3)}, max_jobs=bad)
    with pytest.raises(tripwire.ConfigError, match=r"GridSearch num_points=np.int64\(0\) must be an int >= 1"):
        GridSearch(num_points=np.int64(0))


def test_categorical_takes_numpy_scalars_as_python_values() -> None:
    c = Categorical([np.int64(1), 2, np.float64(0.5), np.bool_(False), np.str_("relu")])
    assert c.values == [1, 2, 0.5, False, "relu"]
    assert [type(v) for v in c.values] == [int, int, float, bool, str]
    assert json.dumps(c.to_dict())
    with pytest.raises(tripwire.ConfigError, match=r"holds 1 and 1, which are equal|holds 1 twice"):
        Categorical([np.int64(1), 1])
    with pytest.raises(tripwire.ConfigError, match=r"holds nan"):
        Categorical([np.float64("nan"), 1.0])


def test_a_trial_gets_python_values_of_numpy_choices() -> None:
    from tripwire.tune._space import Space

    space = Space({"x": Categorical([np.int64(1), np.int64(2)])})
    assert [type(p["x"]) for p in space.grid()] == [int, int]
    assert type(space.sample(0, 0)["x"]) is int


@pytest.mark.parametrize("metric", ["", "   "])
def test_an_empty_trial_metric_is_refused_by_the_shared_check(metric: str) -> None:
    from tripwire._validate import check_trial

    with pytest.raises(tripwire.ConfigError, match=r"^trial_metric: got '\s*'; accepted: a metric name \(e\.g\. "
                                                   r"'val_loss'\), or None"):
        check_trial(_Trial(), metric, example="e.g. 'val_loss'")
    check_trial(_Trial(), "val_loss", example="")
    check_trial(None, None, example="")


class _Trial:
    number, attempt, max_resource = 0, 1, 5

    def report(self, step, value):
        return False


def test_xgboost_refuses_an_empty_trial_metric_when_the_callback_is_made(tmp_path: Path) -> None:
    pytest.importorskip("xgboost")
    from tripwire.integrations.xgboost import TripwireCallback

    with pytest.raises(tripwire.ConfigError, match=r"^trial_metric: got ''; accepted: a metric name"):
        TripwireCallback(trial=_Trial(), trial_metric="", out_dir=str(tmp_path))


def test_keras_refuses_an_empty_trial_metric_when_the_callback_is_made(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    pytest.importorskip("keras")
    from tripwire.integrations.keras import TripwireCallback

    with pytest.raises(tripwire.ConfigError, match=r"^trial_metric: got ''; accepted: a metric name"):
        TripwireCallback(trial=_Trial(), trial_metric="", out_dir=str(tmp_path))


def test_lightning_refuses_an_empty_trial_metric_when_the_callback_is_made(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    from tripwire.integrations.lightning import TripwireCallback

    with pytest.raises(tripwire.ConfigError, match=r"^trial_metric: got ''; accepted: a metric name"):
        TripwireCallback(trial=_Trial(), trial_metric="", out_dir=str(tmp_path))


@pytest.mark.parametrize("path", [None, 5, ""])
def test_from_journal_names_a_path_that_is_none(path) -> None:
    with pytest.raises(tripwire.ConfigError, match=r"^TuningResult\.from_journal: got .*; accepted: the path of a "
                                                   r"tuning job's journal"):
        TuningResult.from_journal(path)
    with pytest.raises(tripwire.ConfigError, match=r"^Tuner\.resume: got .*; accepted: the path of a tuning job's"):
        Tuner.resume(path)
