"""Trial 22h's XGBoost findings: a continued model's loaded trees counted in ``trees/depth`` (a
``tree_depth`` rule stopped a training whose own trees were shallow); multi-output regression and
``survival:aft`` with labels/predictions captured crashed the training; a ``custom_metric`` took
``overfit`` and the loss rules over from the built-in logloss; ``EarlyStopping(save_best=True)``
listed before the callback left the last round's trees out, or recorded the sliced model's
importance as the last round's."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost._trees import TreeStats, trees_from_round  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1, "seed": 0}


def _classes(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(scale=0.8, size=n) > 0).astype(np.float64)
    return X, y


def _depths(booster: Any) -> list[int]:
    """The depth (edges root to deepest leaf) of each tree of ``booster``, from its dump."""
    out = []
    for dump in booster.get_dump():
        out.append(max(line.count("\t") for line in dump.splitlines() if "leaf=" in line))
    return out


def _normalised_score(booster: Any, kind: str, n_features: int) -> list[float]:
    score = booster.get_score(importance_type=kind)
    total = sum(score.values())
    return [score.get(f"f{i}", 0.0) / total for i in range(n_features)]


# ------------------------------------------------------------------ 1. continued training
def test_trees_from_round_leaves_the_loaded_rounds_out() -> None:
    trees = [TreeStats(d, 1, 0.0, np.zeros(0, np.int64), np.zeros(0), np.zeros(0)) for d in (6, 6, 5, 5, 2, 2)]
    assert [t.depth for t in trees_from_round(trees, [2, 2, 2], 3, 2)] == [2, 2]
    assert [t.depth for t in trees_from_round(trees, [2, 2, 2], 3, 0)] == [6, 6, 5, 5, 2, 2]
    assert trees_from_round(trees, [2, 2, 2], 3, 3) == []
    assert [t.depth for t in trees_from_round(trees, [6], 3, 1)] == [5, 5, 2, 2]  # no per-round counts: shared evenly


@pytest.mark.parametrize("save_interval", [1, 10])
def test_continued_training_judges_only_the_trees_it_adds(tmp_path: Path, save_interval: int) -> None:
    X, y = _classes()
    dtrain, dvalid = xgb.DMatrix(X[:400], y[:400]), xgb.DMatrix(X[400:], y[400:])
    loaded = xgb.train({**PARAMS, "max_depth": 6}, dtrain, 10)  # trained without tripwire
    assert max(_depths(loaded)) == 6
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=save_interval,
                          include_collections=["feature_importance"],
                          rules=[{"name": "tree_depth", "max_depth": 4, "actions": ["log", "stop_training"]}])
    booster = xgb.train({**PARAMS, "max_depth": 2}, dtrain, 10, evals=[(dtrain, "train"), (dvalid, "validation")],
                        xgb_model=loaded, callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 20  # not stopped for trees it did not build
    assert cb.findings == [] and cb.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    steps, depth = run.series("trees/depth", "raw", "train")
    assert int(steps[0]) == 10 and depth.max() <= 2
    # importance stays the whole model's, the loaded trees included
    for kind in ("weight", "total_gain"):
        stored = [run.value(f"feature_importance/{kind}/f{i}", "raw", 19) for i in range(8)]
        assert stored == pytest.approx(_normalised_score(booster, kind, 8), abs=1e-6)


def test_continued_training_in_the_same_run_reads_the_rounds_since_its_last_save_step(tmp_path: Path) -> None:
    X, y = _classes()
    dtrain, dvalid = xgb.DMatrix(X[:400], y[:400]), xgb.DMatrix(X[400:], y[400:])
    kw: dict[str, Any] = {"out_dir": tmp_path / "run", "save_interval": 3, "collections": ["metrics", "trees"]}
    evals = [(dtrain, "train"), (dvalid, "validation")]
    first = xgb.train({**PARAMS, "max_depth": 3}, dtrain, 10, evals=evals, callbacks=[TripwireCallback(**kw)],
                      verbose_eval=False)
    booster = xgb.train({**PARAMS, "max_depth": 2}, dtrain, 7, evals=evals, xgb_model=first,
                        callbacks=[TripwireCallback(**kw)], verbose_eval=False)
    depths = _depths(booster)
    assert max(depths[:10]) == 3 and max(depths[10:]) == 2
    stored = dict(zip(*[a.tolist() for a in run_series(tmp_path / "run", "trees/depth")]))
    assert stored[9] == max(depths[7:10])
    assert stored[12] == max(depths[10:13]) == 2  # rounds 10-12 only (the run said 3)
    assert stored[15] == max(depths[13:16]) and stored[16] == depths[16]


def run_series(path: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    return tripwire.open_run(path).series(name, "raw", "train")


# --------------------------------------------------- 2. multi-output and survival:aft labels
@pytest.mark.parametrize("strategy", ["multi_output_tree", "one_output_per_tree"])
def test_multi_output_labels_and_predictions_have_the_same_shape(tmp_path: Path, strategy: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    Y = np.c_[X[:, 0] + rng.normal(scale=0.1, size=300), -X[:, 1]]
    dtrain, dvalid = xgb.DMatrix(X[:200], Y[:200]), xgb.DMatrix(X[200:], Y[200:])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["labels", "predictions"])
    booster = xgb.train({"tree_method": "hist", "multi_strategy": strategy, "nthread": 1}, dtrain, 3,
                        evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    labels, preds = run.array("labels", 2, mode="eval"), run.array("predictions", 2, mode="eval")
    assert labels.shape == preds.shape == (100, 2)
    assert labels == pytest.approx(Y[200:].astype(np.float32))
    assert preds == pytest.approx(booster.predict(dvalid), abs=1e-6)


def test_survival_aft_captures_its_predictions_and_says_why_not_its_labels(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    t = np.exp(X[:, 0] + rng.normal(scale=0.3, size=300))
    dtrain, dvalid = xgb.DMatrix(X[:200]), xgb.DMatrix(X[200:])
    for d, rows in ((dtrain, slice(0, 200)), (dvalid, slice(200, 300))):
        d.set_float_info("label_lower_bound", t[rows])
        d.set_float_info("label_upper_bound", np.where(np.arange(len(t[rows])) % 3, t[rows], np.inf))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["labels", "predictions"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster = xgb.train({"objective": "survival:aft", "nthread": 1}, dtrain, 3,
                            evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert "labels" not in run.tensor_names()
    assert run.array("predictions", 2, mode="eval") == pytest.approx(booster.predict(dvalid), rel=1e-5)
    said = [r.getMessage() for r in caplog.records if "labels" in r.getMessage()]
    assert len(said) == 1 and "label_lower_bound" in said[0] and "survival:aft" in said[0], said


# --------------------------------------------------------------------- 3. custom_metric
def _overfitting() -> tuple[Any, Any]:
    from sklearn.datasets import make_classification

    X, y = make_classification(1000, 20, n_informative=5, flip_y=0.25, random_state=0)
    return xgb.DMatrix(X[:600], y[:600]), xgb.DMatrix(X[600:], y[600:])


def _accuracy(preds: np.ndarray, d: Any) -> tuple[str, float]:
    return "accuracy", float(np.mean((preds > 0.5) == d.get_label()))


def _my_err(preds: np.ndarray, d: Any) -> tuple[str, float]:
    return "my-err", float(np.mean((preds > 0.5) != d.get_label()))


@pytest.mark.parametrize(("metric", "name"), [(_accuracy, "accuracy"), (_my_err, "my-err")])
def test_a_custom_metric_does_not_take_the_default_rules_from_a_builtin_loss(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, metric: Any, name: str) -> None:
    dtrain, dvalid = _overfitting()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default", "overfit"], actions=["log", "stop_training"])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        booster = xgb.train({**PARAMS, "max_depth": 8, "eta": 0.3, "min_child_weight": 0}, dtrain, 200,
                            evals=[(dtrain, "train"), (dvalid, "validation")], custom_metric=metric, callbacks=[cb],
                            verbose_eval=False)
    # the overfitting booster (validation logloss 0.53 -> 0.88) is caught as it is without a custom metric
    assert cb.stopped_by is not None and cb.stopped_by.rule == "overfit"
    assert booster.num_boosted_rounds() < 200
    said = [r.getMessage() for r in caplog.records if "reads" in r.getMessage()]
    overfit = next(m for m in said if "'overfit'" in m)
    assert "train='train-logloss', validation='validation-logloss'" in overfit
    assert f"the custom metric '{name}' is not read" in overfit and f"validation='validation-{name}'" in overfit
    assert any("loss='train-logloss'" in m for m in said if "loss_not_decreasing" in m)


def test_a_custom_metric_alone_is_read(tmp_path: Path) -> None:
    dtrain, dvalid = _overfitting()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["overfit"], actions=["log"])
    params = {k: v for k, v in PARAMS.items() if k != "eval_metric"}
    xgb.train({**params, "disable_default_eval_metric": 1, "max_depth": 2}, dtrain, 3,
              evals=[(dtrain, "train"), (dvalid, "validation")], custom_metric=_my_err, callbacks=[cb],
              verbose_eval=False)
    assert tripwire.open_run(tmp_path / "run").rule_inputs["overfit"] == {
        "train": "train-my-err", "validation": "validation-my-err"}


def test_a_custom_metric_named_by_a_rule_is_read(tmp_path: Path) -> None:
    dtrain, dvalid = _overfitting()
    cb = TripwireCallback(out_dir=tmp_path / "run", actions=["log"],
                          rules=[{"name": "overfit", "train": "train-my-err", "validation": "validation-my-err"}])
    xgb.train({**PARAMS, "max_depth": 2}, dtrain, 3, evals=[(dtrain, "train"), (dvalid, "validation")],
              custom_metric=_my_err, callbacks=[cb], verbose_eval=False)
    assert "overfit" not in tripwire.open_run(tmp_path / "run").rule_inputs  # nothing re-pointed


# --------------------------------------------------- 4. EarlyStopping(save_best=True) first
@pytest.mark.parametrize("save_interval", [1, 10])
def test_early_stopping_save_best_before_the_callback_records_the_trained_model_s_last_round(
        tmp_path: Path, save_interval: int) -> None:
    dtrain, dvalid = _overfitting()
    params = {**PARAMS, "max_depth": 8, "eta": 0.3, "min_child_weight": 0}
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=save_interval,
                          collections=["metrics", "trees", "feature_importance"])
    booster = xgb.train(params, dtrain, 100, evals=[(dtrain, "train"), (dvalid, "validation")], verbose_eval=False,
                        callbacks=[xgb.callback.EarlyStopping(rounds=3, save_best=True), cb])
    full = xgb.train(params, dtrain, 100, evals=[(dtrain, "train"), (dvalid, "validation")], verbose_eval=False,
                     callbacks=[xgb.callback.EarlyStopping(rounds=3, save_best=False)])
    last = full.num_boosted_rounds() - 1  # the round at which training stopped
    assert booster.num_boosted_rounds() < last + 1  # XGBoost returned a slice
    run = tripwire.open_run(tmp_path / "run")
    for name in ("validation-logloss", "trees/depth", "feature_importance/weight/f17"):
        assert run.tensor(name).steps()[-1] == last, name
    since = (last - 1) // save_interval * save_interval + 1  # the rounds since the last save step
    assert run.value("trees/depth", "raw", last) == max(_depths(full[since:]))
    for kind in ("weight", "total_gain"):
        stored = [run.value(f"feature_importance/{kind}/f{i}", "raw", last) for i in range(20)]
        assert stored == pytest.approx(_normalised_score(full, kind, 20), abs=1e-6), kind


class _Rows:
    """Just what the callback reads from a Booster, for hooks driven by hand (see test_xgboost.py)."""

    TREE = {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [0, 0, 0],
            "loss_changes": [5.0, 0.0, 0.0], "sum_hessian": [10.0, 5.0, 5.0]}

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.feature_names = ["a", "b"]

    def num_boosted_rounds(self) -> int:
        return self.rounds

    def num_features(self) -> int:
        return 2

    def __getitem__(self, s: slice) -> _Rows:
        return _Rows(len(range(self.rounds)[s]))

    def save_raw(self, raw_format: str) -> bytearray:
        import json

        doc = {"learner": {"gradient_booster": {"name": "gbtree", "model": {
            "trees": [self.TREE] * self.rounds, "iteration_indptr": list(range(self.rounds + 1))}}}}
        return bytearray(json.dumps(doc).encode())

    def save_config(self) -> str:
        return "{}"


def _trained_then_sliced(cb: TripwireCallback) -> _Rows:
    """Hooks driven by hand: 5 rounds trained, the callback's after_iteration sees 4 (EarlyStopping listed
    before it ends round 4 first), and a 2-round slice is returned; the trained booster is gone with this
    function's frame (xgb.train holds it while after_training runs)."""
    trained = _Rows(0)
    cb.before_training(trained)
    log: dict[str, dict[str, list[float]]] = {"train": {"logloss": []}, "validation": {"logloss": []}}
    for epoch in range(5):
        trained.rounds += 1
        log["train"]["logloss"].append(0.6 - 0.1 * epoch)
        log["validation"]["logloss"].append(0.6 + 0.01 * epoch)
        if epoch < 4:
            cb.after_iteration(trained, epoch, log)
    return trained[:2]


def test_a_sliced_model_whose_trained_model_is_gone_records_the_metrics_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=10, collections=["metrics", "trees", "feature_importance"])
    sliced = _trained_then_sliced(cb)
    gc.collect()
    assert cb._booster is not None and cb._booster() is None
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert cb.after_training(sliced) is sliced
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("validation-logloss").steps() == [0, 4]
    # never the slice's importance labelled with round 4
    assert run.tensor("trees/depth").steps() == [0] and run.tensor("feature_importance/weight/a").steps() == [0]
    said = [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]
    assert len(said) == 1 and "round 4" in said[0] and "holds 2 rounds of the 5 rounds trained" in said[0], said
