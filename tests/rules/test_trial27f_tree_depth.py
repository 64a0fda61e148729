"""Trial 27f, finding 5: with all-NaN or constant features no tree ever splits (``trees/depth`` 0 from
round 0), and the only finding came at round 50, from ``loss_not_decreasing``, with a neural
network's causes. ``tree_depth`` now says so after ``no_split_rounds`` rounds (3) with booster causes;
a booster whose first trees split and whose late trees are single leaves (nothing left to gain) is
not flagged."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tripwire
from tripwire.rules import TreeDepth

xgb = pytest.importorskip("xgboost")
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def _depths(depths: list[float], steps: list[int] | None = None, **rule: object) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[TreeDepth(**rule)], save_interval=1)
    for step, d in zip(steps if steps is not None else range(len(depths)), depths):
        session.step("train", step, {"trees/depth": (float(d), "trees")})
    return [f for f in session.findings if f.kind == "finding"]


def test_no_split_from_the_start_is_found_at_the_third_round() -> None:
    found = _depths([0, 0, 0, 0, 0])
    assert len(found) == 1 and found[0].rule == "tree_depth" and found[0].step == 2
    f = found[0]
    assert f.details["test"] == "no_split" and f.details["rounds"] == 3
    assert "no tree of rounds 0-2" in f.message and "single leaf (depth 0)" in f.message
    for cause in ("constant", "all missing", "min_child_weight", "gamma", "labels that are all the same"):
        assert cause in f.message
    assert "optimizer" not in f.message and "learning rate" not in f.message


def test_two_rounds_are_not_enough_and_the_parameter_sets_the_rounds() -> None:
    assert _depths([0, 0]) == []
    assert [f.step for f in _depths([0, 0, 0, 0, 0, 0], no_split_rounds=5)] == [4]
    assert _depths([0] * 20, no_split_rounds=0) == []  # (0: the test is off)


def test_a_save_interval_counts_the_rounds_each_record_covers() -> None:
    # trees/depth saved every 10 rounds (the deepest tree since the last record): round 0 alone is one
    # round, the record at round 10 covers rounds 0-10
    found = _depths([0, 0, 0], steps=[0, 10, 20])
    assert [f.step for f in found] == [10] and "rounds 0-10" in found[0].message


@pytest.mark.parametrize("depths", [[1, 0, 0, 0, 0, 0], [3, 2, 1, 0, 0, 0, 0], [0, 1, 0, 0, 0]])
def test_a_booster_whose_first_trees_split_is_not_flagged(depths: list[float]) -> None:
    assert _depths(depths) == []


def test_deeper_than_the_limit_still_fires() -> None:
    found = _depths([12], max_depth=8)
    assert len(found) == 1 and "added a tree of depth 12 (limit 8)" in found[0].message


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_no_split_rounds_is_checked(bad: object) -> None:
    with pytest.raises(tripwire.ConfigError, match=r"tree_depth\.no_split_rounds"):
        TreeDepth(no_split_rounds=bad)


# ----------------------------------------------------------------------------- real boosters
def _data() -> tuple[np.ndarray, ...]:
    X, y = load_breast_cancer(return_X_y=True)
    return tuple(train_test_split(X, y, test_size=0.3, random_state=0, stratify=y))


RECOMMENDED_DEPTH = {"name": "tree_depth", "max_depth": 8, "actions": ["stop_training"]}


@pytest.mark.parametrize("fill", ["nan", "constant"])
def test_booster_on_featureless_data_is_stopped_at_round_2(tmp_path, fill: str) -> None:
    Xtr, Xva, ytr, yva = _data()
    value = np.nan if fill == "nan" else 1.0
    dtr = xgb.DMatrix(np.full_like(Xtr, value), label=ytr)
    dva = xgb.DMatrix(np.full_like(Xva, value), label=yva)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), save_interval=1, rules=[RECOMMENDED_DEPTH])
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.1, "nthread": 1}, dtr, 200,
                        evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 3
    assert cb.stopped_by is not None and cb.stopped_by.rule == "tree_depth" and cb.stopped_by.step == 2
    assert cb.stopped_by.details["test"] == "no_split"
    # tripwire watch judges the stored run the same way
    run = tripwire.open_run(str(tmp_path / "run"))
    assert [(f.rule, f.step) for f in run.findings] == [("tree_depth", 2)]


def test_min_child_weight_too_large_is_found(tmp_path) -> None:
    Xtr, Xva, ytr, yva = _data()
    dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=[{"name": "tree_depth", "actions": ["log"]}])
    xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.1, "min_child_weight": 500, "nthread": 1}, dtr,
              30, evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    # (the default save interval, 10: the record at round 10 covers rounds 0-10)
    assert [(f.rule, f.step) for f in cb.findings] == [("tree_depth", 10)]
    assert "min_child_weight too large" in cb.findings[0].message


@pytest.mark.parametrize("save_interval", [1, 10])
def test_healthy_booster_whose_late_trees_are_single_leaves_is_not_flagged(tmp_path, save_interval: int,
                                                                              caplog) -> None:
    # min_child_weight 5, eta 0.3: the trees make no split from about round 27 on (nothing left to gain)
    Xtr, Xva, ytr, yva = _data()
    dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), save_interval=save_interval, rules=[RECOMMENDED_DEPTH])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "min_child_weight": 5,
                             "nthread": 1}, dtr, 200, evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb],
                            verbose_eval=False)
    assert booster.num_boosted_rounds() == 200 and cb.findings == []
    steps, depth = tripwire.open_run(str(tmp_path / "run")).series("trees/depth")
    assert depth[0] > 0 and (np.asarray(depth) == 0).any()  # (the case: late single-leaf trees)
