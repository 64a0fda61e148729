"""Trial 30c: XGBoost's TrainingCallback beyond binary classification.

F1 a vector ``base_score``/``quantile_alpha`` (multi-class, quantile, multi-output) was left out of the
hyperparameters; F2 the INFO line offered a better-high custom metric to the loss rules; F3 a leaf
refresh (``process_type: update``) lost its trees, with XGBoost's check of tripwire's own slice as the
reason; F4 a stop by XGBoost's ``EarlyStopping`` read ``complete`` with no reason; F5 the fix hint named
``validation-logloss`` where the run logs no such metric; F6 the ``eval_is_train`` fix for a ranker split
its queries apart; F7 ``tree_depth`` at a continued training's first round said "the rounds up to 15"
(and its no-split test counted the loaded rounds); F8 aliases and XGBoost's internal switches among the
hyperparameters; F9 the ``xgb.cv`` refusal offered no workaround.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost._callback import hyperparameters  # noqa: E402

PARAMS = {"max_depth": 3, "nthread": 1}


def _data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    return X, X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)


def _hp(run_dir: Path) -> dict[str, float]:
    run = tripwire.open_run(run_dir)
    return {n.split("/", 1)[1]: float(run.series(n)[1][0])
            for n in run.tensor_names() if n.startswith("hyperparameters/")}


# ------------------------------------------------------------------ F1, F8: the hyperparameters
def test_a_multiclass_base_score_is_stored_one_number_per_class(tmp_path: Path) -> None:
    X, t = _data()
    y = np.digitize(t, [-0.5, 0.5])  # 3 classes
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["hyperparameters"], rules=[])
    booster = xgb.train({**PARAMS, "objective": "multi:softprob", "num_class": 3}, xgb.DMatrix(X, label=y), 2,
                        callbacks=[cb])
    want = json.loads(booster.save_config())["learner"]["learner_model_param"]["base_score"]
    values = [float(v) for v in want.strip("[]").split(",")]
    hp = _hp(tmp_path / "run")
    assert [hp[f"base_score/{i}"] for i in range(3)] == pytest.approx(values)
    assert "base_score" not in hp and "base_score/3" not in hp and hp["num_class"] == 3


def test_quantile_alphas_are_stored_in_order(tmp_path: Path) -> None:
    X, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["hyperparameters"], rules=[])
    xgb.train({**PARAMS, "objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9]},
              xgb.DMatrix(X, label=y), 2, callbacks=[cb])
    hp = _hp(tmp_path / "run")
    assert [hp[f"quantile_alpha/{i}"] for i in range(3)] == pytest.approx([0.1, 0.5, 0.9])
    assert {"base_score/0", "base_score/1", "base_score/2"} <= set(hp)


def test_a_binary_base_score_keeps_its_plain_name() -> None:
    X, y = _data()
    booster = xgb.train({**PARAMS, "objective": "binary:logistic", "base_score": 0.4}, xgb.DMatrix(X, label=y > 0), 1)
    hp = hyperparameters(booster.save_config())
    assert hp["hyperparameters/base_score"] == pytest.approx(0.4)
    assert not any(k.startswith("hyperparameters/base_score/") for k in hp)


def test_each_parameter_is_stored_once_under_xgboosts_name_and_internal_switches_are_left_out() -> None:
    X, y = _data()
    booster = xgb.train({**PARAMS, "eta": 0.2, "reg_lambda": 3.0, "alpha": 0.5, "gamma": 0.1, "seed": 7},
                        xgb.DMatrix(X, label=y), 1)
    hp = {k.split("/", 1)[1]: v for k, v in hyperparameters(booster.save_config()).items()}
    assert hp["eta"] == pytest.approx(0.2) and hp["lambda"] == 3.0 and hp["alpha"] == 0.5
    assert hp["gamma"] == pytest.approx(0.1) and hp["seed"] == 7 and "nthread" in hp
    for alias in ("learning_rate", "reg_lambda", "reg_alpha", "min_split_loss", "n_jobs", "random_state"):
        assert alias not in hp, alias
    for internal in ("debug_synchronize", "max_cached_hist_node", "fail_on_invalid_gpu_id", "validate_parameters"):
        assert internal not in hp, internal
    # an alias alone (no parameter of XGBoost's name beside it) is stored under XGBoost's name
    alone = hyperparameters('{"p": {"learning_rate": "0.25", "max_row_perbatch": "18446744073709551615"}}')
    assert alone == {"hyperparameters/eta": 0.25}


# ---------------------------------------------------------- F2: the INFO line's custom metric
def _r2(predt: np.ndarray, d: Any) -> tuple[str, float]:
    y = d.get_label()
    return "r2", float(1 - np.sum((y - predt) ** 2) / np.sum((y - y.mean()) ** 2))


def _my_mse(predt: np.ndarray, d: Any) -> tuple[str, float]:
    return "my_mse", float(np.mean((d.get_label() - predt) ** 2))


def _reads_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture, metric: Any) -> list[str]:
    X, y = _data()
    d, dv = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default", "overfit"])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train({**PARAMS, "eval_metric": "rmse"}, d, 3, evals=[(d, "train"), (dv, "validation")],
                  custom_metric=metric, callbacks=[cb], verbose_eval=False)
    return [r.getMessage() for r in caplog.records if " reads " in r.getMessage()]


def test_the_loss_rules_are_never_offered_a_better_high_custom_metric(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said = _reads_lines(tmp_path, caplog, _r2)
    loss = next(m for m in said if "'loss_not_decreasing'" in m)
    assert "loss='train-rmse'" in loss
    assert "loss='train-r2'" not in loss
    assert "the custom metric 'r2' is not read: it is better high, and this rule reads a value that should fall" in loss
    overfit = next(m for m in said if "'overfit'" in m)  # (overfit judges a better-high metric: offered)
    assert "train='train-r2', validation='validation-r2'" in overfit


def test_the_loss_rules_are_offered_a_better_low_custom_metric(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said = _reads_lines(tmp_path, caplog, _my_mse)
    loss = next(m for m in said if "'loss_not_decreasing'" in m)
    assert "name it to have it read: loss='train-my_mse'" in loss and "better high" not in loss


def test_of_several_custom_metrics_the_loss_rules_are_offered_the_better_low_one() -> None:
    from tripwire.integrations.xgboost._callback import _custom_note

    note = _custom_note(["r2", "my_mse"], {"loss": "train-rmse"})
    assert "name it to have it read: loss='train-my_mse'" in note and "'r2' is better high" in note
    assert "loss='train-r2'" not in note


# ------------------------------------------------------------ F3: process_type update (refresh)
def _depth(tree: dict[str, Any]) -> int:
    left, right, best, stack = tree["left_children"], tree["right_children"], 0, [(0, 0)]
    while stack:
        i, depth = stack.pop()
        if left[i] == -1:
            best = max(best, depth)
        else:
            stack += [(left[i], depth + 1), (right[i], depth + 1)]
    return best


@pytest.mark.filterwarnings("ignore:.*manually specified the .updater. parameter")
def test_a_leaf_refresh_records_the_refreshed_trees_and_the_importance(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, t = _data(400)
    y = np.digitize(t, [-0.5, 0.5])
    d1, d2 = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    params = {**PARAMS, "objective": "multi:softprob", "num_class": 3}
    loaded = xgb.train(params, d1, 5)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "tree_depth", "max_depth": 8}],
                          include_collections=["feature_importance"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        refreshed = xgb.train({**params, "process_type": "update", "updater": "refresh"}, d2, 5,
                              evals=[(d2, "train")], callbacks=[cb], xgb_model=loaded, verbose_eval=False)
    said = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert not any("not captured" in m or "Not all trees" in m or "nothing to read" in m for m in said), said
    run = tripwire.open_run(tmp_path / "run")
    steps, depth = run.series("trees/depth")
    assert steps.tolist() == [0, 1, 2, 3, 4]  # (the model holds 0 rounds as the update starts)
    trees = json.loads(bytes(refreshed.save_raw("json")))["learner"]["gradient_booster"]["model"]["trees"]
    assert depth.tolist() == [max(_depth(tr) for tr in trees[3 * r:3 * r + 3]) for r in range(5)]
    score = refreshed.get_score(importance_type="total_gain")
    total = sum(score.values())
    stored = [run.series(f"feature_importance/total_gain/f{i}")[1][-1] for i in range(6)]
    assert stored == pytest.approx([score.get(f"f{i}", 0.0) / total for i in range(6)], rel=1e-4)
    assert run.status == "complete"


# ----------------------------------------------------------------- F4: EarlyStopping's stop
def _noisy() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 6))
    y = ((X[:, 0] + rng.normal(size=500)) > 0).astype(int)
    return xgb.DMatrix(X[:400], label=y[:400]), xgb.DMatrix(X[400:], label=y[400:])


@pytest.mark.parametrize("how", ["early_stopping_rounds", "before", "after"])
def test_a_stop_by_xgboosts_early_stopping_is_the_runs_stop(tmp_path: Path, how: str) -> None:
    dtrain, dvalid = _noisy()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "tree_depth", "max_depth": 20}])
    es = xgb.callback.EarlyStopping(rounds=3)
    kwargs: dict[str, Any] = ({"early_stopping_rounds": 3, "callbacks": [cb]} if how == "early_stopping_rounds"
                              else {"callbacks": [es, cb] if how == "before" else [cb, es]})
    params = {**PARAMS, "max_depth": 8, "eta": 0.5, "objective": "binary:logistic", "eval_metric": "logloss"}
    booster = xgb.train(params, dtrain, 200, evals=[(dtrain, "train"), (dvalid, "validation")], verbose_eval=False, **kwargs)
    rounds = booster.num_boosted_rounds()
    assert rounds < 200
    assert cb.stopped_by is None
    assert cb.stop_reason is not None and cb.stop_reason.startswith(
        f"boosting was stopped outside tripwire at round {rounds - 1} ({rounds} rounds of the 200 asked for): "
        "EarlyStopping(data_name='validation', metric_name='logloss'): early stopping: validation-logloss did not "
        "fall by more than min_delta=0 in the last 3 rounds (rounds=3); best ")
    assert cb.stop_reason.endswith(f" at round {booster.best_iteration}")
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    assert run.series("validation-logloss")[0][-1] == rounds - 1  # (the stopped round recorded)


def test_a_stop_by_another_callback_is_said_and_a_full_training_stays_complete(tmp_path: Path) -> None:
    class Enough(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            return epoch == 4

    dtrain, dvalid = _noisy()
    cb = TripwireCallback(out_dir=tmp_path / "other", rules=[])
    xgb.train(PARAMS, dtrain, 30, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb, Enough()],
              verbose_eval=False)
    assert cb.stop_reason == ("boosting was stopped outside tripwire at round 4 (5 rounds of the 30 asked for): by "
                              "another callback (Enough), whose after_iteration (or before_iteration) returned True")
    assert tripwire.open_run(tmp_path / "other").status == "stopped"
    # an EarlyStopping that never ran out of patience: the training ran its rounds
    cb = TripwireCallback(out_dir=tmp_path / "full", rules=[])
    xgb.train(PARAMS, dtrain, 5, evals=[(dtrain, "train"), (dvalid, "validation")], early_stopping_rounds=50,
              callbacks=[cb], verbose_eval=False)
    assert cb.stop_reason is None and tripwire.open_run(tmp_path / "full").status == "complete"


def test_a_sklearn_early_stop_read_back_from_the_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 6))
    y = ((X[:, 0] + rng.normal(size=500)) > 0).astype(int)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[])
    model = xgb.XGBClassifier(n_estimators=200, max_depth=8, learning_rate=0.5, n_jobs=1, early_stopping_rounds=3,
                              callbacks=[cb])
    model.fit(X[:400], y[:400], eval_set=[(X[:400], y[:400]), (X[400:], y[400:])], verbose=False)
    assert "(XGBoost's validation_1-logloss) did not fall" in str(cb.stop_reason)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and any("outside tripwire" in str(m.get("stop_reason"))
                                           for m in run.end_markers.values())


# -------------------------------------------------------------- F5: the no-training-set hint
def _no_train_warning(caplog: pytest.LogCaptureFixture) -> str:
    said = [r.getMessage() for r in caplog.records if "no evaluation set is the training data" in r.getMessage()]
    assert len(said) == 1, said
    return said[0]


def test_the_no_training_set_hint_names_only_a_metric_the_run_logs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, y = _data()
    d, dv = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "eval_metric": "mae"}, d, 2, evals=[(dv, "validation")],
                  callbacks=[TripwireCallback(out_dir=tmp_path / "a", rules=["default"])], verbose_eval=False)
    said = _no_train_warning(caplog)
    assert "loss='validation-mae', say" in said and "logloss" not in said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):  # no evaluation set at all
        xgb.train(PARAMS, d, 2, callbacks=[TripwireCallback(out_dir=tmp_path / "b", rules=["default"])])
    said = _no_train_warning(caplog)
    assert "loss=" not in said and "with no evaluation set, XGBoost logs no metric at all" in said


def _ranking(n_queries: int = 30, per: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_queries * per, 5))
    qid = np.repeat(np.arange(n_queries), per)
    rel = np.clip(np.round(X[:, 0] + rng.normal(scale=0.7, size=len(X))) + 1, 0, 3).astype(int)
    return X, rel, qid


def test_a_ranker_with_only_better_high_metrics_is_told_the_loss_rules_cannot_read_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, rel, qid = _ranking()
    tr = qid < 20
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.XGBRanker(n_estimators=3, max_depth=2, n_jobs=1, callbacks=[cb], objective="rank:pairwise").fit(
            X[tr], rel[tr], qid=qid[tr], eval_set=[(X[~tr], rel[~tr])], eval_qid=[qid[~tr]], verbose=False)
    said = _no_train_warning(caplog)
    assert "logloss" not in said and "loss='" not in said
    assert "every metric logged is better high (validation-ndcg@32)" in said
    assert "eval_qid=[qid, qid_valid]" in said


# ----------------------------------------------------------- F6: eval_is_train for a ranker
def test_the_eval_is_train_fix_for_a_ranker_splits_by_query(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, rel, qid = _ranking()
    cb = TripwireCallback(out_dir=tmp_path / "sk", rules=["overfit"])
    xgb.XGBRanker(n_estimators=3, max_depth=2, n_jobs=1, callbacks=[cb], objective="rank:ndcg").fit(
        X, rel, qid=qid, eval_set=[(X, rel)], eval_qid=[qid], verbose=False)
    found = next(f for f in cb.findings if f.rule == "eval_is_train")
    assert "GroupShuffleSplit" in found.message and "eval_qid=[qid_train, qid_valid]" in found.message
    assert "qid=qid_train" in found.message and "never train_test_split" in found.message
    d1 = xgb.DMatrix(X, label=rel, qid=qid)
    cb = TripwireCallback(out_dir=tmp_path / "train", rules=["overfit"])
    xgb.train({**PARAMS, "objective": "rank:pairwise"}, d1, 3, evals=[(d1, "train"), (d1, "validation")],
              callbacks=[cb], verbose_eval=False)
    found = next(f for f in cb.findings if f.rule == "eval_is_train")
    assert "xgb.DMatrix(X_valid, label=y_valid, qid=qid_valid)" in found.message
    assert "GroupShuffleSplit" in found.message
    # (a classifier keeps train_test_split)
    Xc, yc = _data()
    cb = TripwireCallback(out_dir=tmp_path / "clf", rules=["overfit"])
    xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, callbacks=[cb]).fit(
        Xc, yc > 0, eval_set=[(Xc, yc > 0)], verbose=False)
    found = next(f for f in cb.findings if f.rule == "eval_is_train")
    assert "sklearn's train_test_split" in found.message and "GroupShuffleSplit" not in found.message


# ---------------------------------------------------- F7: a continued training's first round
def test_tree_depth_at_a_continued_trainings_first_round_names_that_round(tmp_path: Path) -> None:
    X, y = _data()
    d = xgb.DMatrix(X, label=y)
    rules = [{"name": "tree_depth", "max_depth": 3}]
    cb = TripwireCallback(out_dir=tmp_path / "same", save_interval=1, rules=rules)
    first = xgb.train({**PARAMS, "max_depth": 2}, d, 15, evals=[(d, "train")], callbacks=[cb], verbose_eval=False)
    xgb.train({**PARAMS, "max_depth": 6}, d, 3, evals=[(d, "train")], callbacks=[cb], xgb_model=first,
              verbose_eval=False)
    found = [f for f in cb.findings if f.rule == "tree_depth"]
    assert found and found[0].step == 15 and found[0].message.startswith("round 15 added a tree of depth")
    cb = TripwireCallback(out_dir=tmp_path / "new", save_interval=5, rules=rules)  # a new run; saved every 5
    xgb.train({**PARAMS, "max_depth": 6}, d, 10, evals=[(d, "train")], callbacks=[cb], xgb_model=first,
              verbose_eval=False)
    found = [f for f in cb.findings if f.rule == "tree_depth"]
    assert found and found[0].step == 15 and found[0].message.startswith("round 15 added")


def test_the_no_split_test_of_a_continued_training_counts_its_own_rounds(tmp_path: Path) -> None:
    X, y = _data()
    d = xgb.DMatrix(X, label=y)
    first = xgb.train(PARAMS, d, 5)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "tree_depth", "max_depth": 8}])
    xgb.train({**PARAMS, "min_child_weight": 1e9}, d, 5, evals=[(d, "train")], callbacks=[cb], xgb_model=first,
              verbose_eval=False)
    found = [f for f in cb.findings if f.rule == "tree_depth"]
    assert [f.step for f in found] == [7]  # (three rounds of its own: 5, 6, 7; not at its first round)
    assert "no tree of rounds 5-7 (3 rounds" in found[0].message and "continued from round 5" in found[0].message


# --------------------------------------------------------------------------------- F9: xgb.cv
def test_the_xgb_cv_refusal_names_a_workaround(tmp_path: Path) -> None:
    X, y = _data()
    with pytest.raises(TypeError, match=r"xgb\.cv is not supported.*train each fold with xgb\.train and a callback of "
                                        r"its own, each with its own out_dir.*cross_val_score"):
        xgb.cv(PARAMS, xgb.DMatrix(X, label=y), 2, nfold=2, callbacks=[TripwireCallback(out_dir=tmp_path / "cv")])
