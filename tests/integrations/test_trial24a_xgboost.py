"""Trials 24a and 24d, XGBoost: collections saved at intervals of their own have the rounds after
their own last save recorded and judged at the last round (and recorded at a stop); continued
training plans the rounds it runs, not the loaded model's too; the model's state is no
hyperparameter; the two ``num_boost_round`` refusals say the same; a rule's metric name that
XGBoost does not log is said at the first round; docs/xgboost.md's Quick start and install line."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost._callback import hyperparameters  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARAMS = {"objective": "binary:logistic", "eta": 0.3, "max_depth": 3, "min_child_weight": 0, "lambda": 0, "seed": 0,
          "nthread": 1}
TREES_4 = {"losses": None, "metrics": None, "trees": {"save": {"interval": 4}}}
TREES_4_FI_7 = {**TREES_4, "feature_importance": {"save": {"interval": 7}}}
DEPTH_6 = [{"name": "tree_depth", "max_depth": 6, "actions": ["stop_training"]}]


def _data() -> tuple[Any, Any]:
    """A noisy binary task (15% flipped labels) on which unbounded trees grow deep."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=600, n_features=10, n_informative=4, flip_y=0.15, random_state=0)
    return xgb.DMatrix(X[:420], label=y[:420]), xgb.DMatrix(X[420:], label=y[420:])


class Depth(xgb.callback.TrainingCallback):
    """Listed before tripwire's callback: trees grow to depth 12 from the round after ``at`` on, and
    back to 3 from the round after ``until`` on."""

    def __init__(self, at: int, until: int | None = None) -> None:
        super().__init__()
        self.at, self.until = at, until

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch == self.at:
            model.set_param("max_depth", 12)
        if epoch == self.until:
            model.set_param("max_depth", 3)
        return False


def _train(tmp_path: Path, name: str, rounds: int, collections: dict[str, Any], depth: Depth,
           rules: list[Any] | None = None) -> tuple[Any, TripwireCallback, Any]:
    dtrain, dvalid = _data()
    cb = TripwireCallback(out_dir=tmp_path / name, collections=collections, rules=DEPTH_6 if rules is None else rules)
    booster = xgb.train(PARAMS, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "validation")],
                        callbacks=[depth, cb], verbose_eval=False)
    return booster, cb, tripwire.open_run(tmp_path / name)


def _steps(run: Any, name: str) -> list[int]:
    return [int(s) for s in run.series(name)[0]]


# ------------------------------------------------------------------ 24a finding 1: the last rounds
def test_a_deep_tree_recorded_at_a_last_round_that_saved_only_the_metrics_is_judged(tmp_path: Path) -> None:
    # trial 24a (A): 11 rounds, trees saved every 4, the metrics every 10: trees/depth 12 was stored at
    # round 10 when training ended, after the rules had judged round 10's metrics; tree_depth never
    # judged it (the run ended complete), while tripwire watch on the same run found it
    booster, cb, run = _train(tmp_path, "A", 11, TREES_4, Depth(8))
    steps, depths = run.series("trees/depth")
    assert steps.tolist() == [0, 4, 8, 10] and depths.tolist() == [3, 3, 3, 12]
    assert [(f.rule, f.step) for f in cb.findings] == [("tree_depth", 10)]
    assert cb.stopped_by is not None and run.status == "stopped" and booster.num_boosted_rounds() == 11


def test_the_finished_model_s_metrics_are_recorded_when_the_last_round_saved_a_tree_that_stops(tmp_path: Path) -> None:
    # trial 24a (B): 23 rounds; round 22 saved no collection, and trees/depth 12 recorded at the end asked
    # to stop: the evaluation sets' metrics of round 22, the finished model's validation score, were lost
    _, cb, run = _train(tmp_path, "B", 23, TREES_4, Depth(20))
    assert _steps(run, "validation-logloss") == [0, 10, 20, 22] and _steps(run, "train-logloss") == [0, 10, 20, 22]
    assert [(f.rule, f.step) for f in cb.findings] == [("tree_depth", 22)]


def test_each_collection_s_rounds_after_its_own_last_save_are_recorded_at_the_last_round(tmp_path: Path) -> None:
    # trial 24a (C): 22 rounds, trees every 4, importance every 7: round 21 saved importance (which read
    # its trees), and the depth-12 tree of round 21 was never recorded nor judged
    _, cb, run = _train(tmp_path, "C", 22, TREES_4_FI_7, Depth(20))
    steps, depths = run.series("trees/depth")
    assert steps.tolist()[-2:] == [20, 21] and depths.tolist()[-1] == 12
    assert _steps(run, "feature_importance/gain/f0") == [0, 7, 14, 21]
    assert [(f.rule, f.step) for f in cb.findings] == [("tree_depth", 21)]
    # (D): 17 rounds: round 16 saved trees, and the finished model's importance was not recorded
    booster, cb, run = _train(tmp_path, "D", 17, TREES_4_FI_7, Depth(100))
    assert _steps(run, "trees/depth") == [0, 4, 8, 12, 16]
    assert _steps(run, "feature_importance/gain/f0") == [0, 7, 14, 16]
    stored = {f"f{i}": float(run.series(f"feature_importance/gain/f{i}")[1][-1]) for i in range(10)}
    score = booster.get_score(importance_type="gain")
    total = sum(score.values())
    assert stored == pytest.approx({f: score.get(f, 0.0) / total for f in stored}, rel=1e-5)
    assert not cb.findings and run.status == "complete"


def test_a_deep_tree_read_for_the_importance_counts_in_the_next_trees_record(tmp_path: Path) -> None:
    # trial 24a: trees every 4, importance every 7: importance read rounds 13-14 at round 14, and the
    # trees record at round 16 held the depth of rounds 15-16 only: round 13's depth-12 tree escaped
    _, cb, run = _train(tmp_path, "mid", 20, TREES_4_FI_7, Depth(12, until=13), rules=[])
    steps, depths = run.series("trees/depth")
    assert steps.tolist() == [0, 4, 8, 12, 16, 19]
    assert depths.tolist() == [3, 3, 3, 3, 12, 3]


def test_a_stop_at_a_round_one_collection_saves_records_the_others_there(tmp_path: Path) -> None:
    # trial 24a (t35): tree_depth stopped boosting at round 16 (trees every 4), and the importance of the
    # model handed back was never recorded (last at round 14)
    booster, cb, run = _train(tmp_path, "stop", 40, TREES_4_FI_7, Depth(13))
    assert cb.stopped_by is not None and cb.stopped_by.step == 16 and booster.num_boosted_rounds() == 17
    assert _steps(run, "feature_importance/gain/f0") == [0, 7, 14, 16]
    assert _steps(run, "validation-logloss") == [0, 10, 16]
    assert [(f.rule, f.step) for f in run.findings] == [("tree_depth", 16)]  # (judged once)


# --------------------------------------------------------- 24a finding 3: continued training's length
@pytest.mark.parametrize("given", [None, 500])
def test_continued_training_plans_the_rounds_it_runs(tmp_path: Path, given: int | None) -> None:
    # trial 24a: a 2000-round model continued for 500 rounds planned 2500 (even with num_boost_round=500),
    # and loss_not_decreasing at eta=1e-6 stopped it 250 rounds in (50%) instead of 50 (10%)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 8))
    y = (X[:, 0] + rng.normal(scale=0.5, size=400) > 0).astype(float)
    dtrain, dvalid = xgb.DMatrix(X[:300], label=y[:300]), xgb.DMatrix(X[300:], label=y[300:])
    params = {"objective": "binary:logistic", "eta": 1e-6, "max_depth": 2, "nthread": 1}
    loaded = xgb.train(params, dtrain, 600)
    kw = {} if given is None else {"num_boost_round": given}
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["log", "stop_training"], **kw)
    xgb.train(params, dtrain, 500, xgb_model=loaded, evals=[(dtrain, "train"), (dvalid, "validation")],
              callbacks=[cb], verbose_eval=False)
    assert tripwire.open_run(tmp_path / "run").planned_steps == 500
    assert cb.stopped_by is not None and cb.stopped_by.rule == "loss_not_decreasing"
    assert cb.stopped_by.step == 600 + 50  # N = max(50, floor(0.1 * 500) - 10 + 1), from the training's first step


# ------------------------------------------------------ 24a findings 4 and 5: hyperparameters, errors
def test_the_model_s_state_is_not_recorded_as_a_hyperparameter(tmp_path: Path) -> None:
    # trial 24a: hyperparameters/num_trees read 1 (the trees after round 0) for a 50-round model
    dtrain, dvalid = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["hyperparameters"])
    xgb.train({**PARAMS, "objective": "multi:softprob", "num_class": 2}, dtrain, 5,
              evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    names = set(tripwire.open_run(tmp_path / "run").tensor_names())
    for state in ("num_trees", "num_feature", "num_target"):
        assert f"hyperparameters/{state}" not in names
    assert {"hyperparameters/eta", "hyperparameters/max_depth", "hyperparameters/num_class"} <= names
    assert "hyperparameters/num_trees" not in hyperparameters('{"gbtree_model_param": {"num_trees": "7"}}')


@pytest.mark.parametrize("value", [-5, 0, "a", 2.5, True])
def test_both_num_boost_round_refusals_state_the_same_accepted_values(tmp_path: Path, value: Any) -> None:
    # trial 24a: -5 was told "accepted: an integer >= 1", 'a' "accepted: an integer >= 1 or null"
    with pytest.raises(ConfigError, match=rf"^num_boost_round: got {re.escape(repr(value))}; accepted: an integer >= 1, "
                                          r"or None \(the num_boost_round of the xgb.train call"):
        TripwireCallback(out_dir=tmp_path / "run", num_boost_round=value)


# ------------------------------------------------- 24d finding 2: a metric name XGBoost does not log
class _FailAt(xgb.callback.TrainingCallback):
    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch == self.epoch:
            raise RuntimeError("planted")
        return False


def test_a_rule_metric_that_xgboost_does_not_log_is_said_at_the_first_round(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    # trial 24d: overfit given train-logloss/validation-logloss on a regression (which logs rmse) read
    # nothing all training, and only the end of training said so
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] + rng.normal(scale=0.1, size=300)
    dtrain, dvalid = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    rules = [{"name": "overfit", "train": "train-logloss", "validation": "validation-logloss", "actions": ["stop_training"]}]

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "matches no loss or metric" in r.getMessage()]

    params = {"objective": "reg:squarederror", "nthread": 1}
    cb = TripwireCallback(out_dir=tmp_path / "early", rules=rules)
    with caplog.at_level(logging.WARNING, logger="tripwire"), pytest.raises(RuntimeError, match="planted"):
        xgb.train(params, dtrain, 20, evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[cb, _FailAt(1)], verbose_eval=False)
    assert len(said()) == 2, said()  # before round 1 (a failed training says nothing at its end)
    assert "validation='validation-logloss' matches no loss or metric of this run; did you mean 'validation-rmse'?" \
        in said()[1] and "named at the first round" in said()[1]
    cb.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train(params, dtrain, 20, evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[TripwireCallback(out_dir=tmp_path / "once", rules=rules)], verbose_eval=False)
    assert len(said()) == 2, said()  # said once each, not again when training ends
    # the names XGBoost logs are not named; nor, twice, a default no evaluation set can feed
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train(params, dtrain, 3, evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[TripwireCallback(out_dir=tmp_path / "bare", rules=["overfit", "default"])], verbose_eval=False)
    assert not said()


# ------------------------------------------------------------ 24d findings 1 and 2: docs/xgboost.md
def test_the_docs_install_from_a_clone_and_the_quick_start_gives_a_bare_overfit() -> None:
    text = (ROOT / "docs" / "xgboost.md").read_text(encoding="utf-8")
    # trial 24d: README says tripwire is not on PyPI; `pip install 'tripwire[xgboost]'` found no distribution
    assert "pip install 'tripwire[" not in text and 'pip install -e ".[xgboost]"' in text
    quick = text.split("## Quick start", 1)[1].split("```", 2)[1]
    # trial 24d: train-logloss/validation-logloss read nothing on regression, multi-class and ranking
    assert '"name": "overfit"' in quick and "logloss" not in quick
