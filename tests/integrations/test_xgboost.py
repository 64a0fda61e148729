"""tripwire.integrations.xgboost: validation, pure helpers, hooks driven by hand against a fake
booster, real ``xgb.train`` / sklearn / ``xgboost.dask`` runs with planted faults and healthy twins,
and the overhead benchmark's smoke check."""

from __future__ import annotations

import json
import re
import logging
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
import tripwire.tune  # noqa: E402
from tripwire import ConfigError, Requirement, Rule, TrainingStopped  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost._callback import _same_data, hyperparameters  # noqa: E402
from tripwire.integrations.xgboost._evals import resolve_eval_sets  # noqa: E402
from tripwire.integrations.xgboost._trees import (  # noqa: E402
    IMPORTANCE_TYPES,
    ImportanceAccumulator,
    parse_model,
    round_summary,
    tree_stats,
)

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ test rules
class DeepTrees(Rule):
    """Fires when the trees of the latest round are deeper than ``max_depth``:
    ``trees/depth > max_depth`` (default 6)."""

    name = "test_deep_trees"

    def __init__(self, max_depth: int = 6, **common: Any) -> None:
        super().__init__(**common)
        self.max_depth = max_depth

    def requirements(self) -> list[Requirement]:
        return [Requirement("trees", reductions=("raw",), max_interval=1)]

    def check(self, history, step, mode):
        if not history.has_tensor("trees/depth"):
            return None
        latest = history.latest("trees/depth", "raw", "train", history.workers[0])
        if latest is not None and latest[1] > self.max_depth:
            return self.finding(step, mode, f"depth {latest[1]:g} > {self.max_depth}", ["trees/depth"], value=latest[1])
        return None


STOP = ["stop_training"]


def _noise(n: int = 600, features: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels independent of the features: deep trees chase noise (the planted tree_depth fault)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, features)), (rng.random(n) < 0.5).astype(np.float64)


def _leaky(n: int = 600, seed: int = 0, leak: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Eight weakly informative features; with ``leak`` a ninth is the label plus a little noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = ((X @ rng.normal(size=8) + rng.normal(scale=2.0, size=n)) > 0).astype(np.float64)
    extra = y + rng.normal(scale=0.05, size=n) if leak else rng.normal(size=n)
    return np.column_stack([X, extra]), y


PARAMS = {"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1, "seed": 0}


# ------------------------------------------------------------------------------- validation
def test_missing_xgboost_names_both_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    import tripwire.integrations.xgboost as pkg

    monkeypatch.setitem(sys.modules, "xgboost", None)
    with pytest.raises(ImportError, match=r"tripwire\[xgboost\].*tripwire\[xgboost-cpu\]"):
        pkg.__getattr__("TripwireCallback")
    with pytest.raises(AttributeError, match="Nope"):
        pkg.__getattr__("Nope")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"trial_metric": "validation-auc"}, "trial_metric.*without a trial"),
        ({"trial": object()}, "trial: got .*report"),
        ({"eval_names": "train"}, "eval_names: got 'train'"),
        ({"eval_names": {"validation_0": "my-train"}}, r"eval_names\['validation_0'\].*without '-'"),
        ({"ranks": [-1]}, "ranks: got \\[-1\\]"),
        ({"ranks": "some"}, "ranks: got 'some'"),
        ({"validation_set": ""}, "validation_set: got ''"),
        ({"num_boost_round": 0}, "num_boost_round: got 0; accepted: an integer >= 1"),
        ({"num_boost_round": "100"}, "num_boost_round: got '100'"),
        ({"save_intervall": 3}, "unknown argument 'save_intervall'; did you mean 'save_interval'"),
        ({"rules": ["no_such_rule"]}, "unknown rule 'no_such_rule'"),
        ({"rules": ["dead_relu"]}, r"rules\[0\]: dead_relu needs 'relu_outputs', which the xgboost integration"),
        ({"rules": ["default", "exploding_gradient"]}, r"rules\[1\]: exploding_gradient needs 'gradients'"),
        ({"actions": ["stop-training"]}, r"actions\[0\]: unknown action 'stop-training'"),
        ({"save_interval": 0}, "interval: got 0"),
        (
            {"rules": [DeepTrees()], "collections": {"trees": {"save": {"modes": {"train": {"enabled": False}}}}}},
            "collections.trees.save.modes.train: disabled, but rule 'test_deep_trees' needs",
        ),
    ],
)
def test_bad_arguments_are_rejected_at_construction(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TripwireCallback(out_dir=tmp_path, **kwargs)


def test_is_a_training_callback_and_fixes_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cb = TripwireCallback(name="my-run")
    assert isinstance(cb, xgb.callback.TrainingCallback)
    # reported as every integration reports it (trial 26f), written by the workers at its absolute path
    assert cb.out_dir == Path("tripwire-runs", "my-run")
    assert cb.config.out_dir == str(tmp_path / "tripwire-runs" / "my-run")  # absolute: workers agree on it
    assert cb.findings == [] and cb.stopped_by is None


def test_xgb_cv_is_refused(tmp_path: Path) -> None:
    X, y = _noise(100)
    with pytest.raises(TypeError, match="xgb.cv is not supported"):
        xgb.cv(PARAMS, xgb.DMatrix(X, label=y), 2, nfold=2, callbacks=[TripwireCallback(out_dir=tmp_path)])


# ------------------------------------------------------------------------------ pure helpers
def _tree(left, right, split, loss, hess) -> dict[str, Any]:
    return {"left_children": left, "right_children": right, "split_indices": split, "loss_changes": loss,
            "sum_hessian": hess}


# root splits f0; node 1 splits f1; nodes 2, 3, 4 are leaves; nodes 5-7 are unreachable (pruned).
TREE_A = _tree([1, 3, -1, -1, -1, 6, -1, -1], [2, 4, -1, -1, -1, 7, -1, -1], [0, 1, 0, 0, 0, 3, 0, 0],
               [10.0, 4.0, 0, 0, 0, 99.0, 0, 0], [100.0, 60.0, 40.0, 30.0, 30.0, 5.0, 1, 1])
# a chain: root f2 -> right f2 -> right f0 (depth 3, 4 leaves)
TREE_B = _tree([1, -1, 3, -1, 5, -1, -1], [2, -1, 4, -1, 6, -1, -1], [2, 0, 2, 0, 0, 0, 0],
               [6.0, 0, 3.0, 0, 1.0, 0, 0], [50.0, 10.0, 40.0, 20.0, 20.0, 10.0, 10.0])
LEAF = _tree([-1], [-1], [0], [0.0], [7.0])


def test_tree_stats_counts_reachable_nodes_and_real_depth() -> None:
    a, b, leaf = tree_stats(TREE_A), tree_stats(TREE_B), tree_stats(LEAF)
    assert (a.depth, a.leaves, a.gain) == (2, 3, 14.0)  # node 5 (gain 99) is not reachable
    assert sorted(a.features.tolist()) == [0, 1]
    assert (b.depth, b.leaves, b.gain) == (3, 4, 10.0)  # log2(largest id 6) would say 2
    assert (leaf.depth, leaf.leaves, leaf.gain) == (0, 1, 0.0)
    summary = round_summary([a, b, leaf])
    assert (summary.depth, summary.leaves, summary.gain, summary.count) == (3, 8, 24.0, 3)
    assert summary.as_tensors() == {"trees/depth": 3.0, "trees/leaves": 8.0, "trees/gain": 24.0}


def test_importance_accumulator_by_hand() -> None:
    acc = ImportanceAccumulator(4)
    assert all(not v.any() for v in acc.normalised().values())  # nothing split yet: zeros, no NaN
    acc.add([tree_stats(TREE_A), tree_stats(TREE_B)])
    raw = acc.raw()
    assert raw["weight"].tolist() == [2, 1, 2, 0]
    assert raw["total_gain"].tolist() == [11.0, 4.0, 9.0, 0.0]
    assert raw["gain"].tolist() == [5.5, 4.0, 4.5, 0.0]
    assert raw["total_cover"].tolist() == [120.0, 60.0, 90.0, 0.0]
    norm = acc.normalised()
    for kind in IMPORTANCE_TYPES:
        assert norm[kind].sum() == pytest.approx(1.0)
    assert norm["weight"].tolist() == pytest.approx([0.4, 0.2, 0.4, 0.0])
    restored = ImportanceAccumulator(0)
    restored.load_state_dict(json.loads(json.dumps(acc.state_dict())))
    assert restored.raw()["gain"].tolist() == raw["gain"].tolist()
    with pytest.raises(ValueError, match="n_features: got -1"):
        ImportanceAccumulator(-1)


def test_importance_matches_get_score_and_depth_matches_dump() -> None:
    X, y = _leaky(300)
    booster = xgb.train({**PARAMS, "max_depth": 4}, xgb.DMatrix(X, label=y), 6)
    trees, per_round = parse_model(json.loads(bytes(booster.save_raw("json"))))
    assert per_round == [1] * 6
    acc = ImportanceAccumulator(booster.num_features())
    acc.add(trees)
    raw = acc.raw()
    for kind in IMPORTANCE_TYPES:
        score = booster.get_score(importance_type=kind)
        expected = [score.get(f"f{i}", 0.0) for i in range(booster.num_features())]
        assert raw[kind] == pytest.approx(expected, rel=1e-4), kind

    def depth(node: dict[str, Any]) -> int:
        return 1 + max(depth(c) for c in node["children"]) if "children" in node else 0

    dumps = [json.loads(d) for d in booster.get_dump(dump_format="json")]
    assert [t.depth for t in trees] == [depth(d) for d in dumps]
    assert max(t.depth for t in trees) <= 4


def test_parse_model_without_trees() -> None:
    with pytest.raises(ValueError, match="'gblinear' has no trees"):
        parse_model({"learner": {"gradient_booster": {"name": "gblinear", "model": {"weights": [0.0]}}}})
    with pytest.raises(ValueError, match="not an XGBoost JSON model"):
        parse_model({"nope": 1})


def test_eval_set_names_and_modes() -> None:
    def named(raw, flags, mapping="auto"):
        return [(s.name, s.mode) for s in resolve_eval_sets(raw, flags, mapping)]

    # sklearn: eval_set=[(X, y), (Xv, yv)] where the first is the training data
    assert named(["validation_0", "validation_1"], [True, False]) == [("train", "train"), ("validation", "eval")]
    assert named(["validation_0", "validation_1"], [True, False], None) == [("validation_0", "train"), ("validation_1", "eval")]
    assert named(["validation_0"], [False]) == [("validation", "eval")]
    assert named(["validation_0", "validation_1", "validation_2"], [False, False, False]) == [
        ("validation_0", "eval"), ("validation_1", "eval"), ("validation_2", "eval")]
    # xgb.train: names kept; a separate DMatrix named "train" still counts as training data
    assert named(["train", "valid"], [False, False]) == [("train", "train"), ("valid", "eval")]
    assert named(["dtrain", "dvalid"], [None, None], {"dtrain": "train", "dvalid": "validation"}) == [
        ("train", "train"), ("validation", "eval")]
    with pytest.raises(ConfigError, match="no evaluation set named 'valid'.*are: train, validation"):
        resolve_eval_sets(["train", "validation"], [True, False], {"valid": "x"})
    with pytest.raises(ConfigError, match="'train' and 'validation' would both be named 'train'"):
        resolve_eval_sets(["train", "validation"], [True, False], {"validation": "train"})


def test_two_sets_mapped_to_one_name_are_refused_by_the_constructor(tmp_path: Path) -> None:
    # trial 37f: the clash, known from the mapping alone, was refused only inside fit(), leaving a failed run
    with pytest.raises(ConfigError, match="'validation_0' and 'validation_1' would both be named 'train'"):
        TripwireCallback(eval_names={"validation_0": "train", "validation_1": "train"}, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_hyperparameters_are_numeric_leaves_of_the_config() -> None:
    booster = xgb.train({**PARAMS, "max_depth": 3, "eta": 0.25}, xgb.DMatrix(*_noise(50)), 1)
    hp = hyperparameters(booster.save_config())
    assert hp["hyperparameters/max_depth"] == 3.0
    assert hp["hyperparameters/eta"] == pytest.approx(0.25)
    assert "hyperparameters/base_score" in hp  # "[5E-1]"-style values are read
    assert "hyperparameters/objective" not in hp and "hyperparameters/tree_method" not in hp  # strings skipped
    assert not any(k.endswith("/version") for k in hp)


# -------------------------------------------------------------------- hooks driven by hand
class FakeBooster:
    """Just what the callback reads from a Booster: rounds of hand-made trees."""

    def __init__(self, rounds: list[list[dict[str, Any]]], n_features: int = 4) -> None:
        self.rounds = rounds
        self.feature_names = ["age", "income", "zip", "noise"][:n_features]
        self._n = n_features

    def num_boosted_rounds(self) -> int:
        return len(self.rounds)

    def num_features(self) -> int:
        return self._n

    def __getitem__(self, s: slice) -> FakeBooster:
        return type(self)(self.rounds[s], self._n)

    def save_raw(self, raw_format: str) -> bytearray:
        assert raw_format == "json"
        trees = [t for r in self.rounds for t in r]
        indptr = np.cumsum([0] + [len(r) for r in self.rounds]).tolist()
        doc = {"learner": {"gradient_booster": {"name": "gbtree", "model": {"trees": trees, "iteration_indptr": indptr}}}}
        return bytearray(json.dumps(doc).encode())

    def save_config(self) -> str:
        return json.dumps({"learner": {"tree_train_param": {"max_depth": "12", "eta": "0.3", "tree_method": "hist"}}})


class FakeTrial:
    def __init__(self, stop_at: int | None = None) -> None:
        self.reports: list[tuple[int, float]] = []
        self.stop_at = stop_at
        self.stop_reason = None

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        if self.stop_at is not None and step >= self.stop_at:
            self.stop_reason = f"below the rung at step {step}"
            return True
        return False


def _log(rounds: int) -> dict[str, dict[str, list[float]]]:
    return {"train": {"logloss": [0.6 - 0.05 * i for i in range(rounds)]},
            "validation": {"logloss": [0.65 - 0.01 * i for i in range(rounds)], "auc": [0.7 + 0.01 * i for i in range(rounds)]}}


def _drive(cb: TripwireCallback, rounds: list[list[dict[str, Any]]], n: int | None = None) -> tuple[FakeBooster, int]:
    """Call the hooks as XGBoost's loop would; returns the booster and the rounds run."""
    booster = FakeBooster([])
    assert cb.before_training(booster) is booster
    done = 0
    for epoch in range(n if n is not None else len(rounds)):
        booster.rounds.append(rounds[epoch])
        done += 1
        if cb.after_iteration(booster, epoch, _log(epoch + 1)):
            break
    cb.after_training(booster)
    return booster, done


def test_hooks_by_hand_capture_every_collection(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          collections=["metrics", "trees", "feature_importance", "hyperparameters"])
    _, done = _drive(cb, [[TREE_A], [TREE_B], [TREE_A, LEAF]])
    assert done == 3 and cb.stopped_by is None and cb.findings == []
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert run.tensor_names(collection="metrics") == ["train-logloss", "validation-auc", "validation-logloss"]
    # without the DMatrix objects (no XGBoost loop above us) the set named "train" is the training data
    assert run.steps("train") == [0, 1, 2] and run.steps("eval") == [0, 1, 2]
    assert run.series("train-logloss", "raw", "train")[1].tolist() == pytest.approx([0.6, 0.55, 0.5])
    assert run.series("validation-auc", "raw", "eval")[1].tolist() == pytest.approx([0.7, 0.71, 0.72])
    assert run.series("trees/depth", "raw", "train")[1].tolist() == [2, 3, 2]
    assert run.series("trees/leaves", "raw", "train")[1].tolist() == [3, 4, 4]
    assert run.series("trees/gain", "raw", "train")[1].tolist() == [14, 10, 14]
    # cumulative total gain after round 1: age 11, income 4, zip 9 -> normalised over 24
    assert run.value("feature_importance/total_gain/age", "raw", 1) == pytest.approx(11 / 24)
    assert run.value("feature_importance/weight/noise", "raw", 2) == 0.0
    assert run.steps("train") == [0, 1, 2]
    assert run.value("hyperparameters/max_depth", "raw", 0) == 12.0
    assert run.series("hyperparameters/eta", "raw", "train")[0].tolist() == [0]  # once, at the first round


def test_hooks_by_hand_default_config_is_light(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run")
    _drive(cb, [[TREE_A]] * 12)
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("train") == [0, 10, 11]  # default save interval 10 (11: the last round, at the end), metrics only
    assert set(run.collections()) == {"metrics"}


def test_hooks_by_hand_rule_stops_boosting(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": f"{__name__}:DeepTrees", "max_depth": 2, "actions": STOP}])
    _, done = _drive(cb, [[TREE_A], [TREE_A], [TREE_B], [TREE_A]])
    assert done == 3  # TREE_B (depth 3) arrives in round 2 (step 2)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "test_deep_trees" and cb.stopped_by.step == 2
    assert "depth 3 > 2" in cb.stop_reason
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and [f.rule for f in run.findings] == ["test_deep_trees"]


def test_hooks_by_hand_rule_without_stop_action_only_records(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[DeepTrees(max_depth=2)])
    _, done = _drive(cb, [[TREE_B]] * 4)
    assert done == 4 and cb.stopped_by is None
    assert [f.step for f in cb.findings] == [0]  # once per rule unless repeat


def test_hooks_by_hand_trial_reports_and_stops(tmp_path: Path) -> None:
    trial = FakeTrial(stop_at=3)
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="validation-auc")
    _, done = _drive(cb, [[LEAF]] * 6)
    assert done == 3
    assert trial.reports == [(1, pytest.approx(0.7)), (2, pytest.approx(0.71)), (3, pytest.approx(0.72))]
    assert cb.stopped_by is None and "the tuner stopped the trial after 3 rounds: below the rung" in cb.stop_reason
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


class FakeCollective:
    """Rank 0 of two: the other worker's flags (rule stop 2: a broken run, 1: an info finding's
    stop) join ours by MAX, as XGBoost's allreduce would."""

    Op = types.SimpleNamespace(MAX="max", SUM="sum")

    def __init__(self, other_rule_flag: float) -> None:
        self.other = np.array([other_rule_flag, 0.0, 0.0])

    def get_rank(self) -> int:
        return 0

    def get_world_size(self) -> int:
        return 2

    def allreduce(self, data: np.ndarray, op: str) -> np.ndarray:
        assert op == "max"
        return np.maximum(data, self.other)


@pytest.mark.parametrize("other, marked", [(2.0, True), (1.0, False)])
def test_hooks_by_hand_a_rule_stop_on_another_worker_marks_the_trial_when_the_run_is_broken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other: float, marked: bool) -> None:
    import tripwire.integrations.xgboost._callback as xcb

    monkeypatch.setattr(xcb, "collective", FakeCollective(other))
    trial = FakeTrial()
    trial.rule_stops = []  # type: ignore[attr-defined]
    trial.rule_stopped = lambda rule, message: trial.rule_stops.append((rule, message))  # type: ignore[attr-defined]
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="validation-auc")
    _, done = _drive(cb, [[LEAF]] * 4)
    assert done == 1 and cb.stopped_by is None  # every worker stops at the round the other one did
    assert "a rule stopped training on another worker at round 1" in cb.stop_reason
    # a broken run on any worker is never the tuner's best; an info finding's stop (overtraining) is
    assert trial.rule_stops == ([("distributed_stop", cb.stop_reason)] if marked else [])


def test_hooks_by_hand_trial_default_metric_and_unknown_metric(tmp_path: Path) -> None:
    trial = FakeTrial()
    cb = TripwireCallback(out_dir=tmp_path / "a", trial=trial)  # last metric of the last set: validation-auc
    _drive(cb, [[LEAF]] * 2)
    assert [v for _, v in trial.reports] == pytest.approx([0.7, 0.71])
    cb = TripwireCallback(out_dir=tmp_path / "b", trial=FakeTrial(), trial_metric="validation-aucpr")
    with pytest.raises(ConfigError, match="trial_metric: got 'validation-aucpr'.*available: train-logloss, "
                                          "validation-logloss, validation-auc"):
        _drive(cb, [[LEAF]])
    assert tripwire.open_run(tmp_path / "b").status == "failed"


def test_hooks_by_hand_gblinear_skips_trees_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Linear(FakeBooster):
        def save_raw(self, raw_format: str) -> bytearray:
            return bytearray(json.dumps({"learner": {"gradient_booster": {"name": "gblinear", "model": {}}}}).encode())

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["metrics", "trees"])
    booster = Linear([])
    cb.before_training(booster)
    for epoch in range(3):
        booster.rounds.append([])
        assert cb.after_iteration(booster, epoch, _log(epoch + 1)) is False
    cb.after_training(booster)
    assert sum("trees and feature importance are not captured" in r.message for r in caplog.records) == 1
    assert "trees" not in tripwire.open_run(tmp_path / "run").collections()


def test_real_gblinear_says_why_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _train_dm(*_noise(300), 200)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["metrics", "trees"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "booster": "gblinear"}, dtrain, 3, evals=[(dvalid, "validation")], callbacks=[cb])
    said = [r.getMessage() for r in caplog.records if "not captured" in r.getMessage()]
    assert said == ["tripwire: trees and feature importance are not captured: the booster is gblinear "
                    "(a linear model: no trees)"]  # (XGBoost's own error carried a C++ stack trace)
    # trial 16d: and not again at the end, as collections that captured nothing (three warnings in all)
    assert not [r for r in caplog.records if "captured nothing" in r.getMessage()]


def test_state_dict_and_pickle(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[DeepTrees(max_depth=2, patience=2)])
    booster = FakeBooster([])
    cb.before_training(booster)
    booster.rounds.append([TREE_B])
    cb.after_iteration(booster, 0, _log(1))
    state = cb.state_dict()
    assert state["session"]["rules"][0]["tripwire"]["streak"] == {"train": 1}
    clone = pickle.loads(pickle.dumps(cb))  # mid-training: the session stays behind, the copy starts fresh
    assert clone._session is None and clone._pending_state is None and clone.out_dir == cb.out_dir
    cb.after_training(booster)
    fresh = TripwireCallback(out_dir=tmp_path / "run2", rules=[DeepTrees(max_depth=2, patience=2)])
    fresh.load_state_dict(state)
    booster = FakeBooster([[TREE_B]])  # continued from the saved model: round 1 comes next
    fresh.before_training(booster)
    booster.rounds.append([TREE_B])
    fresh.after_iteration(booster, 0, _log(1))  # the streak continues: patience 2 is reached
    assert [f.rule for f in fresh.findings] == ["test_deep_trees"]
    fresh.after_training(booster)


# ------------------------------------------------------------------------ real xgb.train runs
def _train_dm(X: np.ndarray, y: np.ndarray, split: int = 450) -> tuple[Any, Any]:
    return xgb.DMatrix(X[:split], label=y[:split]), xgb.DMatrix(X[split:], label=y[split:])


@pytest.mark.parametrize(("max_depth", "stops"), [(12, True), (3, False)])
def test_xgb_train_tree_depth_rule_stops_and_healthy_twin_completes(tmp_path: Path, max_depth: int, stops: bool) -> None:
    dtrain, dvalid = _train_dm(*_noise(600))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "tree_depth", "max_depth": 6, "actions": STOP}])
    booster = xgb.train({**PARAMS, "max_depth": max_depth}, dtrain, 30,
                        evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    if stops:
        assert booster.num_boosted_rounds() == cb.stopped_by.step + 1 < 30
        assert cb.stopped_by.rule == "tree_depth" and run.status == "stopped"
        assert cb.stopped_by.details["depth"] > 6
    else:
        assert booster.num_boosted_rounds() == 30 and cb.stopped_by is None and cb.findings == []
        assert run.status == "complete"
        assert run.series("trees/depth", "raw", "train")[1].max() <= 3
    assert "train-logloss" in run.tensor_names(collection="metrics")
    assert run.steps("eval")[0] == 0 and "validation-logloss" in run.tensor_names(collection="metrics")


@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("fault", [True, False])
def test_xgb_train_overfit_rule_on_train_and_validation_metrics(tmp_path: Path, fault: bool, named: bool) -> None:
    X, y = _leaky(2000, seed=2, leak=False)
    n_train = 150 if fault else 1500  # the fault: a tiny training set, deep trees, a large step
    dtrain, dvalid = xgb.DMatrix(X[:n_train], label=y[:n_train]), xgb.DMatrix(X[1500:], label=y[1500:])
    params = {**PARAMS, "max_depth": 8, "eta": 0.3, "min_child_weight": 0} if fault else {**PARAMS, "max_depth": 3, "eta": 0.1}
    names = {"train": "train-logloss", "validation": "validation-logloss"} if named else {}  # else XGBoost's for the defaults
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "overfit", **names, "actions": STOP}])
    booster = xgb.train(params, dtrain, 60, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                        verbose_eval=False)
    if fault:
        assert cb.stopped_by is not None and cb.stopped_by.rule == "overfit"
        assert set(cb.stopped_by.tensors) == {"validation-logloss", "train-logloss"}
        assert booster.num_boosted_rounds() == cb.stopped_by.step + 1 < 60
    else:
        assert cb.findings == [] and booster.num_boosted_rounds() == 60


def _rules_only(bound: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in bound.items() if k != "*"}


def test_default_rule_names_bind_to_xgboost_metrics() -> None:
    from tripwire.integrations.xgboost._callback import bind_default_metric_names
    from tripwire.integrations.xgboost._evals import EvalSet
    from tripwire.rules import build_rules

    rules = build_rules(["loss_not_decreasing", {"name": "oscillating_loss", "loss": "mine"}, "overfit",
                         {"name": "overtraining", "validation": "valid-auc"}])
    sets = [EvalSet("dtrain", "train", "train", 0, True), EvalSet("valid", "valid", "eval", 1, False)]
    log = {"dtrain": {"auc": [0.9], "logloss": [0.3]}, "valid": {"auc": [0.8], "logloss": [0.4]}}
    bound = bind_default_metric_names(rules, sets, log, "valid")
    assert bound.pop("*") == {"loss": "train-logloss", "validation": "valid-logloss", "train": "train-logloss"}  # any rule's
    assert bound == {"loss_not_decreasing": {"loss": "train-logloss"},  # the last lower-is-better metric
                     "overfit": {"train": "train-logloss", "validation": "valid-logloss"},  # the last one, as XGBoost
                     "overtraining": {"train": "train-logloss"}}  # (validation named by the user: kept)
    assert [r.named_inputs() for r in rules][1] == {"loss": "mine"}
    # eval_metric=["logloss", "auc"]: auc is XGBoost's last, but a train auc reaches 1.0 within a few
    # rounds of an overfitting booster, after which overfit can never fire (trial 17e): logloss
    rules = build_rules(["overfit"])
    log = {"dtrain": {"logloss": [0.3], "auc": [0.9]}, "valid": {"logloss": [0.4], "auc": [0.8]}}
    assert _rules_only(bind_default_metric_names(rules, sets, log, "valid")) == {
        "overfit": {"train": "train-logloss", "validation": "valid-logloss"}}
    rules = build_rules(["overfit"])  # only saturating metrics: the last one, as before
    log = {"dtrain": {"error": [0.1], "auc": [0.9]}, "valid": {"error": [0.2], "auc": [0.8]}}
    assert _rules_only(bind_default_metric_names(rules, sets, log, "valid")) == {"overfit": {"train": "train-auc", "validation": "valid-auc"}}
    auc_only = build_rules(["loss_not_decreasing"])
    assert _rules_only(bind_default_metric_names(auc_only, sets, {"dtrain": {"auc": [0.9]}, "valid": {"auc": [0.8]}}, "valid")) == {}


def test_default_rule_set_catches_boosting_that_learns_nothing(tmp_path: Path) -> None:
    X, y = _leaky(600, seed=3, leak=False)
    dtrain = xgb.DMatrix(X, label=y)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["record", "stop_training"])
    booster = xgb.train({**PARAMS, "eta": 0.0}, dtrain, 300, evals=[(dtrain, "train")], callbacks=[cb], verbose_eval=False)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "loss_not_decreasing"
    assert list(cb.stopped_by.tensors) == ["train-logloss"] and booster.num_boosted_rounds() < 100


@pytest.mark.parametrize("fault", [True, False])
def test_xgb_train_class_imbalance_reads_validation_labels_and_predictions(tmp_path: Path, fault: bool) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = (rng.random(3000) < 0.05).astype(np.float64)  # 95:5
    X[y == 1, 0] += 1.0
    dtrain, dvalid = xgb.DMatrix(X[:2000], label=y[:2000]), xgb.DMatrix(X[2000:], label=y[2000:])
    params = {**PARAMS, "max_depth": 3, "scale_pos_weight": 1 if fault else 19}  # the fix: class weights
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "class_imbalance", "actions": STOP}])
    booster = xgb.train(params, dtrain, 15, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                        verbose_eval=False)
    if fault:
        assert cb.stopped_by is not None and cb.stopped_by.rule == "class_imbalance" and cb.stopped_by.mode == "eval"
        assert booster.num_boosted_rounds() == cb.stopped_by.step + 1 < 15
    else:
        assert cb.findings == [] and booster.num_boosted_rounds() == 15


def test_class_imbalance_waits_for_a_booster_that_ranks_the_minority_well(tmp_path: Path) -> None:
    """Trial 16d: a booster at eta 0.05 predicts about the prior for every sample in its first
    rounds (minority recall 0, AUC near 1); class_imbalance stopped it at round 1, where it would
    have reached a minority recall near 0.9. A class the model ranks well is not neglected."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=4000, n_features=20, n_informative=5, weights=[0.95, 0.05], class_sep=2.0,
                               flip_y=0.0, random_state=6)
    dtrain, dvalid = xgb.DMatrix(X[:3000], label=y[:3000]), xgb.DMatrix(X[3000:], label=y[3000:])
    params = {**PARAMS, "max_depth": 6, "eta": 0.05}
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "class_imbalance", "actions": STOP}])
    booster = xgb.train(params, dtrain, 60, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.findings == [] and booster.num_boosted_rounds() == 60
    early = booster.predict(dvalid, iteration_range=(0, 2)) > 0.5
    late = booster.predict(dvalid) > 0.5
    minority = y[3000:] == 1
    assert early[minority].mean() == 0 and late[minority].mean() > 0.5  # (the slow start, then learnt)
    # max_auc=1.0: recall alone decides, as before
    cb = TripwireCallback(out_dir=tmp_path / "recall", save_interval=1,
                          rules=[{"name": "class_imbalance", "max_auc": 1.0, "actions": STOP}])
    booster = xgb.train(params, dtrain, 60, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.stopped_by is not None and cb.stopped_by.step == 1


def test_class_imbalance_reads_logitraw_margins_as_logistic_probabilities(tmp_path: Path) -> None:
    """Trial 17e: binary:logitraw margins were cut at 0.5 as probabilities; a class-weighted model
    (the fixed twin above) was stopped with a minority recall of 0.23 where its own was 0.83."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = (rng.random(3000) < 0.05).astype(np.float64)
    X[y == 1, 0] += 1.0
    dtrain, dvalid = xgb.DMatrix(X[:2000], label=y[:2000]), xgb.DMatrix(X[2000:], label=y[2000:])
    params = {**PARAMS, "objective": "binary:logitraw", "max_depth": 3, "scale_pos_weight": 19}
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "class_imbalance", "actions": STOP}])
    booster = xgb.train(params, dtrain, 15, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                        verbose_eval=False)
    assert cb.findings == [] and booster.num_boosted_rounds() == 15
    margin = booster.predict(dvalid, iteration_range=(0, 15))
    stored = tripwire.open_run(tmp_path / "run").array("predictions", 14, mode="eval")
    assert stored == pytest.approx(1 / (1 + np.exp(-margin)), abs=1e-6)  # as binary:logistic would give them


def test_a_ranking_objective_feeds_no_class_rule(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 17e: relevance grades read as classes and ranking scores as class predictions: a
    perfect ranker (validation ndcg 1.0) was stopped by class_imbalance at round 1."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 5))
    grade = np.digitize(X[:, 0], [0.6, 1.6]).astype(np.float64)  # relevance 0/1/2, mostly 0
    dtrain = xgb.DMatrix(X[:800], label=grade[:800])
    dvalid = xgb.DMatrix(X[800:], label=grade[800:])
    dtrain.set_group([20] * 40)
    dvalid.set_group([20] * 20)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "class_imbalance", "actions": STOP}])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster = xgb.train({"objective": "rank:pairwise", "eval_metric": "ndcg@5", "nthread": 1, "seed": 0}, dtrain, 10,
                            evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.findings == [] and booster.num_boosted_rounds() == 10
    assert any("objective 'rank:pairwise' ranks" in r.getMessage() for r in caplog.records)
    assert "labels" not in tripwire.open_run(tmp_path / "run").tensor_names()


def test_labels_alone_warn_of_no_predictions(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, y = _noise(400, seed=1)
    dtrain, dvalid = _train_dm(X, (X[:, 0] > 0).astype(np.float64), 300)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, include_collections=["labels"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train(PARAMS, dtrain, 4, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert not [r for r in caplog.records if "went to no collection" in r.getMessage()], caplog.text
    run = tripwire.open_run(tmp_path / "run")
    # (3: the known last round takes every collection, the labels too; trial 35d)
    assert run.array_steps("labels", mode="eval") == [0, 2, 3] and "predictions" not in run.tensor_names()


def test_xgb_train_labels_and_predictions_on_save_steps_only(tmp_path: Path) -> None:
    X, y = _noise(400, seed=1)
    y3 = (np.abs(X[:, 0]) * 2).astype(int).clip(0, 2).astype(np.float64)
    dtrain, dvalid = _train_dm(X, y3, 300)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=4, collections=["metrics", "labels", "predictions"])
    booster = xgb.train({**PARAMS, "objective": "multi:softprob", "num_class": 3, "eval_metric": "mlogloss", "max_depth": 3},
                        dtrain, 9, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.array_steps("labels", mode="eval") == [0, 4, 8]
    assert run.array("labels", 8, mode="eval").tolist() == dvalid.get_label().tolist()
    preds = run.array("predictions", 8, mode="eval")
    assert preds.shape == (100, 3)
    assert preds == pytest.approx(booster.predict(dvalid, iteration_range=(0, 9)), abs=1e-6)
    assert run.array("predictions", 0, mode="eval") == pytest.approx(booster.predict(dvalid, iteration_range=(0, 1)), abs=1e-6)


def test_a_training_that_raised_is_marked_failed_when_the_callback_trains_again(tmp_path: Path) -> None:
    dtrain, dvalid = _train_dm(*_noise(300), 200)

    def broken(preds: np.ndarray, dtrain: Any) -> Any:  # a custom objective that raises at round 2
        broken.calls += 1  # type: ignore[attr-defined]
        if broken.calls == 3:  # type: ignore[attr-defined]
            raise ValueError("bad gradient")
        return preds - dtrain.get_label(), np.ones_like(preds)

    broken.calls = 0  # type: ignore[attr-defined]
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    with pytest.raises(ValueError, match="bad gradient"):
        xgb.train({**PARAMS, "objective": "reg:squarederror"}, dtrain, 5, evals=[(dvalid, "validation")],
                  obj=broken, callbacks=[cb])
    assert tripwire.open_run(tmp_path / "run").status == "running"  # XGBoost called no after_training
    first = cb._session
    closed: list[str | None] = []
    real_close = first.close
    first.close = lambda status=None: (closed.append(status), real_close(status))[1]  # type: ignore[method-assign]
    xgb.train(PARAMS, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb])  # the same callback again
    assert closed == ["failed"]  # (it was closed as complete)
    assert tripwire.open_run(tmp_path / "run").status == "complete"  # the second training's end


def test_xgb_train_raise_action_and_continued_training(tmp_path: Path) -> None:
    dtrain, dvalid = _train_dm(*_noise(600))
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[DeepTrees(max_depth=6, actions=["raise"])])
    with pytest.raises(TrainingStopped, match="test_deep_trees"):
        xgb.train({**PARAMS, "max_depth": 12}, dtrain, 10, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert tripwire.open_run(tmp_path / "run").status == "stopped"
    # continued training counts rounds on from the model's own (steps and trial steps keep increasing)
    first = xgb.train({**PARAMS, "max_depth": 2}, dtrain, 3)
    trial = FakeTrial()
    cb = TripwireCallback(out_dir=tmp_path / "more", save_interval=1, trial=trial, trial_metric="validation-logloss")
    xgb.train({**PARAMS, "max_depth": 2}, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb],
              xgb_model=first, verbose_eval=False)
    assert [s for s, _ in trial.reports] == [4, 5]
    assert tripwire.open_run(tmp_path / "more").steps("eval") == [3, 4]


def test_continuing_a_booster_into_its_run_does_not_warn_but_a_second_training_from_round_0_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _train_dm(*_noise(300))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        first = xgb.train(PARAMS, dtrain, 3, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
        second = xgb.train(PARAMS, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb], xgb_model=first,
                           verbose_eval=False)
        again = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)  # a new callback, same out_dir
        xgb.train(PARAMS, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[again], xgb_model=second, verbose_eval=False)
    assert not [r for r in caplog.records if "already holds records" in r.getMessage()]
    assert tripwire.open_run(tmp_path / "run").steps("eval") == [0, 1, 2, 3, 4, 5, 6]
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train(PARAMS, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert len([r for r in caplog.records if "already holds records" in r.getMessage()]) == 1


def test_num_boost_round_sets_the_planned_length_for_the_rules(tmp_path: Path) -> None:
    dtrain, dvalid = _train_dm(*_noise(300))
    first = xgb.train({**PARAMS, "max_depth": 2}, dtrain, 3)
    cases = {"read from xgb.train": ({}, 4), "given": ({"num_boost_round": 40}, 40),
             "trial": ({"trial": tripwire.tune.Trial(0, {}, min_resource=1, max_resource=7)}, 7),
             # the rounds this training runs, not the loaded model's (trial 24a: 3 + 5 and 3 + 4)
             "continued": ({"num_boost_round": 5, "xgb_model": first}, 5),
             "continued, read": ({"xgb_model": first}, 4)}
    for name, (kwargs, planned) in cases.items():
        model = kwargs.pop("xgb_model", None)
        cb = TripwireCallback(out_dir=tmp_path / name, **kwargs)
        xgb.train({**PARAMS, "max_depth": 2}, dtrain, 4, evals=[(dvalid, "validation")], callbacks=[cb],
                  xgb_model=model, verbose_eval=False)
        assert tripwire.open_run(tmp_path / name).planned_steps == planned, name  # what the rules and watch use


def test_watch_rebuilds_the_loss_rules_as_the_training_bound_them(tmp_path: Path) -> None:
    # in process the loss rules' default loss='loss' reads train-logloss; watch over the stored
    # run rebuilt them with loss='loss', which matched nothing
    from tripwire._watch import Watcher

    dtrain, dvalid = _train_dm(*_noise(300), 200)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], save_interval=1)
    xgb.train(PARAMS, dtrain, 4, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
    run = tripwire.open_run(tmp_path / "run")
    assert run.rule_inputs == {"loss_not_decreasing": {"loss": "train-logloss"}, "oscillating_loss": {"loss": "train-logloss"},
                               "*": {"loss": "train-logloss", "validation": "validation-logloss", "train": "train-logloss"}}
    watcher = Watcher(tmp_path / "run")
    watcher.poll()
    assert watcher.unmatched() == [] and watcher.unfed() == {}
    assert {r.name: r.loss for r in watcher._rules_for(0) if hasattr(r, "loss")}["loss_not_decreasing"] == "train-logloss"
    # a --config that names the parameter keeps it
    explicit = Watcher(tmp_path / "run", {"rules": [{"name": "loss_not_decreasing", "loss": "validation-logloss"}]})
    explicit.poll()
    assert explicit._rules_for(0)[0].loss == "validation-logloss"
    # trial 16d: a rule the training did not run (a watch --config of its own) got no XGBoost names:
    # watch exited 3 ("loss='loss' matches no loss or metric") over a run that could not learn
    other = TripwireCallback(out_dir=tmp_path / "tree_only", rules=[{"name": "tree_depth", "max_depth": 10}])
    xgb.train(PARAMS, dtrain, 4, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[other])
    watched = Watcher(tmp_path / "tree_only", {"rules": ["default", "overfit"]})
    watched.poll()
    rules = {r.name: r for r in watched._rules_for(0)}
    assert rules["loss_not_decreasing"].loss == "train-logloss" and watched.unmatched() == []
    assert (rules["overfit"].train, rules["overfit"].validation) == ("train-logloss", "validation-logloss")


def test_a_misspelled_tree_tensor_is_named_at_close(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _train_dm(*_noise(300), 200)
    rules = [{"name": "tree_depth", "max_depth": 2, "tensor": "trees/dpth", "actions": STOP}]
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=rules, save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "max_depth": 6}, dtrain, 5, evals=[(dvalid, "validation")], callbacks=[cb])
    assert cb.findings == []  # it read nothing: said at the end, with the name it meant
    assert ("rule 'tree_depth': tensor='trees/dpth' matches no trees tensor of this run; did you mean "
            "'trees/depth'? (captured: trees/depth, trees/gain, trees/leaves)") in caplog.text


def test_xgb_train_with_a_tuner_trial(tmp_path: Path) -> None:
    dtrain, dvalid = _train_dm(*_leaky(500, leak=False), 400)
    trial = tripwire.tune.Trial(0, {}, min_resource=1, max_resource=7)  # no scheduler: stops at max_resource
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="validation-logloss")
    booster = xgb.train({**PARAMS, "max_depth": 3}, dtrain, 50, evals=[(dtrain, "train"), (dvalid, "validation")],
                        callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 7 and trial.last_step == 7 and trial.should_stop
    assert "reached max_resource=7" in cb.stop_reason
    assert tripwire.open_run(tmp_path / "run").status == "complete"  # its whole budget: not a cut training
    # asked for max_resource rounds (the docs' pattern): it ran them all, nothing stopped it
    trial = tripwire.tune.Trial(1, {}, min_resource=1, max_resource=7)
    cb = TripwireCallback(out_dir=tmp_path / "run2", trial=trial, trial_metric="validation-logloss")
    booster = xgb.train({**PARAMS, "max_depth": 3}, dtrain, trial.max_resource, evals=[(dvalid, "validation")],
                        callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 7 and cb.stop_reason is None
    assert tripwire.open_run(tmp_path / "run2").status == "complete"


# ------------------------------------------------------------------------------- sklearn API
@pytest.mark.parametrize("leak", [True, False])
def test_sklearn_leaking_feature_stops_and_names_follow_the_rules(tmp_path: Path, leak: bool) -> None:
    X, y = _leaky(600, leak=leak)
    Xt, yt, Xv, yv = X[:450], y[:450], X[450:], y[450:]
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[
        {"name": "feature_importance_overweight", "start_step": 2, "actions": STOP}])
    model = xgb.XGBClassifier(n_estimators=25, max_depth=3, n_jobs=1, random_state=0, callbacks=[cb])
    model.fit(Xt, yt, eval_set=[(Xt, yt), (Xv, yv)], verbose=False)
    run = tripwire.open_run(tmp_path / "run")
    # validation_0 is the training data (same objects) -> train; validation_1 -> validation
    assert {"train-logloss", "validation-logloss"} <= set(run.tensor_names(collection="metrics"))
    assert run.steps("train")[:1] == [0] and run.steps("eval")[:1] == [0]
    rounds = model.get_booster().num_boosted_rounds()
    if leak:
        assert cb.stopped_by is not None and cb.stopped_by.rule == "feature_importance_overweight"
        assert cb.stopped_by.tensors == ("feature_importance/total_gain/f8",)
        assert rounds == cb.stopped_by.step + 1 < 25  # stopped at the round the rule fired
    else:
        assert rounds == 25 and cb.stopped_by is None
    # the callback survives sklearn's cloning and pickling
    clone = pickle.loads(pickle.dumps(model))
    assert clone.callbacks[0].out_dir == cb.out_dir


@pytest.mark.parametrize("how", ["sample_weight", "slices"])
def test_sklearn_training_data_rebuilt_by_xgboost_is_still_the_training_set(tmp_path: Path, how: str) -> None:
    # fit(sample_weight=) makes the sklearn API build a second, unweighted matrix for eval_set[0];
    # X[:450] given twice is two objects: both used to stay validation_0 / validation_1, and the
    # validation labels and predictions were taken from the training data, silently
    X, y = _leaky(600, leak=False)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["metrics", "labels", "predictions"])
    model = xgb.XGBClassifier(n_estimators=4, max_depth=2, n_jobs=1, random_state=0, callbacks=[cb])
    if how == "sample_weight":
        Xt, yt = X[:450], y[:450]
        model.fit(Xt, yt, sample_weight=np.linspace(0.5, 1.5, 450), eval_set=[(Xt, yt), (X[450:], y[450:])], verbose=False)
    else:
        model.fit(X[:450], y[:450], eval_set=[(X[:450], y[:450]), (X[450:], y[450:])], verbose=False)
    run = tripwire.open_run(tmp_path / "run")
    assert set(run.tensor_names(collection="metrics")) == {"train-logloss", "validation-logloss"}
    assert run.array("labels", 3, mode="eval").tolist() == y[450:].tolist()
    assert run.array("predictions", 3, mode="eval").shape == (150,)
    # a validation set of another content is never taken for the training data
    assert not _same_data(xgb.DMatrix(X[:450], y[:450]), xgb.DMatrix(X[:450] + 1e-9, y[:450]))
    assert not _same_data(xgb.DMatrix(X[:450], y[:450]), xgb.DMatrix(X[:450], 1 - y[:450]))
    assert _same_data(xgb.DMatrix(X[:450], y[:450]), xgb.DMatrix(X[:450].copy(), y[:450].copy()))


# -------------------------------------------------------- fresh-user trial 13c (XGBoost findings)
def test_no_training_set_among_the_evaluation_sets_is_said_once_at_the_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # sklearn's usual eval_set=[(Xv, yv)]: the train-side loss rules read nothing, and nothing said so
    X, y = _leaky(400, leak=False)
    Xt, yt, Xv, yv = X[:300], y[:300], X[300:], y[300:]
    said = "no evaluation set is the training data"
    for name, eval_set, rules in [
        ("valid only", [(Xv, yv)], ["default", "overfit"]),
        ("named", [(Xv, yv)], [{"name": "loss_not_decreasing", "loss": "validation-logloss"}]),
        ("with train", [(Xt, yt), (Xv, yv)], ["default", "overfit"]),
    ]:
        caplog.clear()
        cb = TripwireCallback(out_dir=tmp_path / name, rules=rules, save_interval=1)
        model = xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, callbacks=[cb])
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            model.fit(Xt, yt, eval_set=eval_set, verbose=False)
        warned = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        if name == "valid only":
            assert len(warned) == 1, warned  # once, not once a round
            assert ("evaluation sets: validation), so XGBoost logs no training metric and these rules will read "
                    "nothing: 'loss_not_decreasing' (loss), 'oscillating_loss' (loss), 'overfit' (train)") in warned[0]
            assert "eval_set=[(X, y), (X_valid, y_valid)]" in warned[0] and "loss='validation-logloss'" in warned[0]
        else:
            assert warned == [], name


def test_a_gblinear_training_refuses_a_tree_rule_at_its_start(tmp_path: Path) -> None:
    dtrain, dvalid = _train_dm(*_noise(300), 200)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "tree_depth", "max_depth": 4, "actions": STOP}])
    with pytest.raises(ConfigError, match=r"rules\[tree_depth\]: needs 'trees', which booster='gblinear' does not "
                                          r"have .*booster='gbtree' or 'dart'"):
        xgb.train({**PARAMS, "booster": "gblinear"}, dtrain, 30, evals=[(dvalid, "validation")], callbacks=[cb])
    assert not (tmp_path / "run").exists()  # refused before the session: no run was written
    xgb.train({**PARAMS, "booster": "dart"}, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb])  # trees: fine


def test_a_gblinear_refusal_leaves_no_empty_default_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dtrain, dvalid = _train_dm(*_noise(300), 200)
    cb = TripwireCallback(rules=[{"name": "tree_depth", "max_depth": 4}])  # claims tripwire-runs/run-<time>
    with pytest.raises(ConfigError, match="booster='gblinear'"):
        xgb.train({**PARAMS, "booster": "gblinear"}, dtrain, 3, evals=[(dvalid, "validation")], callbacks=[cb])
    assert list((tmp_path / "tripwire-runs").iterdir()) == []
    xgb.train({**PARAMS, "booster": "gbtree"}, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb])
    assert tripwire.open_run(cb.out_dir).steps("train") == [0, 1]  # (round 0 and the last: the callback still writes)


def test_sklearn_clones_every_fold_finding_counts_on_the_original_callback(tmp_path: Path) -> None:
    from sklearn.model_selection import cross_val_score

    # every fold's first tree breaks the limit the same way: identical findings of different folds
    X, y = _noise(300, seed=4)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "tree_depth", "max_depth": 2, "actions": STOP}])
    model = xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1, random_state=0, callbacks=[cb])
    cross_val_score(model, X, y, cv=3)
    run = tripwire.open_run(tmp_path / "run")
    assert len(run.findings) == 3 and len({(f.step, f.message) for f in run.findings}) == 1
    assert len(cb.findings) == 3  # the original never trained: the run's, every fold's
    assert cb.stopped_by is not None and cb.stop_reason == str(cb.stopped_by)


def test_every_capturing_worker_records_a_finding_but_it_counts_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ranks="all": each worker's shard holds the same finding; the client lists it once
    import tripwire.integrations.xgboost._callback as xcb

    cb = TripwireCallback(out_dir=tmp_path / "run", ranks="all",
                          rules=[{"name": f"{__name__}:DeepTrees", "max_depth": 2, "actions": STOP}])
    for rank in (0, 1):
        fake = FakeCollective(0.0)
        fake.get_rank = lambda rank=rank: rank  # type: ignore[method-assign]
        monkeypatch.setattr(xcb, "collective", fake)
        _drive(pickle.loads(pickle.dumps(cb)), [[TREE_B]] * 3)  # each worker in turn (its own shard)
    run = tripwire.open_run(tmp_path / "run")
    assert sorted(f.worker for f in run.findings) == [0, 1]
    assert [(f.rule, f.step) for f in cb.findings] == [("test_deep_trees", 0)]


@pytest.mark.parametrize("how", ["rule", "tuner"])
def test_a_callback_that_trained_elsewhere_reads_stop_reason_from_the_run(tmp_path: Path, how: str) -> None:
    # the xgboost.dask client (and sklearn's original callback): stopped_by was read back, stop_reason was None
    if how == "rule":
        cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": f"{__name__}:DeepTrees", "max_depth": 2, "actions": STOP}])
        rounds = [[TREE_A], [TREE_B], [TREE_A]]
    else:
        cb = TripwireCallback(out_dir=tmp_path / "run", trial=FakeTrial(stop_at=2), trial_metric="validation-auc")
        rounds = [[LEAF]] * 4
    worker = pickle.loads(pickle.dumps(cb))  # what XGBoost sends to a worker
    _drive(worker, rounds)
    assert worker.stop_reason is not None and cb._session is None
    if how == "rule":
        assert cb.stopped_by is not None and cb.stop_reason == str(cb.stopped_by) == worker.stop_reason
    else:
        assert cb.stopped_by is None and cb.stop_reason.startswith("the tuner stopped the trial after 2 rounds")
    healthy = TripwireCallback(out_dir=tmp_path / "healthy")
    _drive(pickle.loads(pickle.dumps(healthy)), [[LEAF]] * 2)
    assert healthy.stop_reason is None and healthy.stopped_by is None
    cb.stop_reason = "set by hand"  # (still an attribute one may set)
    assert cb.stop_reason == "set by hand"


@pytest.mark.parametrize("kwargs", [{"rules": ["dead_relu"]}, {"save_interval": 0}, {"eval_names": "manual"},
                                    {"ranks": "some"}, {"num_boost_round": 0}, {"validation_set": ""}])
def test_a_constructor_that_fails_claims_no_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          kwargs: dict[str, Any]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError):
        TripwireCallback(**kwargs)
    assert not (tmp_path / "tripwire-runs").exists() or list((tmp_path / "tripwire-runs").iterdir()) == []
    TripwireCallback()  # a constructor that succeeds claims its directory, as before
    assert len(list((tmp_path / "tripwire-runs").iterdir())) == 1


def test_the_default_validation_set_is_the_last_one_as_early_stopping(tmp_path: Path) -> None:
    X, y = _leaky(600, leak=False)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["overfit"],
                          collections=["metrics", "labels"])
    model = xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, early_stopping_rounds=5, callbacks=[cb])
    model.fit(X[:300], y[:300], eval_set=[(X[:300], y[:300]), (X[300:500], y[300:500]), (X[500:], y[500:])], verbose=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.rule_inputs["overfit"] == {"train": "train-logloss", "validation": "validation_2-logloss"}
    assert run.array("labels", 2, mode="eval").tolist() == y[500:].tolist()  # the same set, not validation_1
    # validation_set= still chooses
    cb = TripwireCallback(out_dir=tmp_path / "named", save_interval=1, rules=["overfit"], validation_set="validation_1")
    xgb.XGBClassifier(n_estimators=2, n_jobs=1, callbacks=[cb]).fit(
        X[:300], y[:300], eval_set=[(X[:300], y[:300]), (X[300:500], y[300:500]), (X[500:], y[500:])], verbose=False)
    assert tripwire.open_run(tmp_path / "named").rule_inputs["overfit"]["validation"] == "validation_1-logloss"


def test_rule_set_notes_are_logged_once_per_callback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _train_dm(*_noise(300), 200)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"])
        xgb.train(PARAMS, dtrain, 2, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
    notes = [r.getMessage() for r in caplog.records if "does not apply to xgboost" in r.getMessage()]
    # vanishing_gradient and exploding_gradient (and any other rule of the set XGBoost cannot feed), once each
    assert len(notes) == len(set(notes)) >= 2
    assert any("'vanishing_gradient'" in n for n in notes) and any("'exploding_gradient'" in n for n in notes)


def test_xgboosts_own_warnings_point_at_the_users_line(tmp_path: Path) -> None:
    import warnings

    dtrain, dvalid = _train_dm(*_noise(300), 200)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["metrics", "labels", "predictions"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xgb.train({**PARAMS, "not_a_parameter": 1}, dtrain, 2, evals=[(dvalid, "validation")], callbacks=[cb])
    ours = [w for w in caught if "not_a_parameter" in str(w.message)]
    assert ours, [str(w.message) for w in caught]  # XGBoost: "Parameters: { "not_a_parameter" } are not used."
    assert {w.filename for w in ours} == {__file__}  # was integrations/xgboost/_callback.py


def test_the_rules_table_of_the_docs_holds_every_row() -> None:
    text = (ROOT / "docs" / "xgboost.md").read_text()
    section = text.split("## Rules for XGBoost", 1)[1].split("\n## ", 1)[0]
    tables = [block for block in section.split("\n\n") if block.lstrip().startswith("| rule |")]
    assert len(tables) == 1
    rows = tables[0].strip().splitlines()
    assert all(r.startswith("|") for r in rows)
    assert any(r.startswith("| `class_imbalance`, `confusion` |") for r in rows)
    assert not [line for line in section.splitlines() if line.startswith("|") and line not in rows]


# ----------------------------------------------------------------------------- xgboost.dask
@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("dask.dataframe")
    cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=":0",
                                       worker_dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _dask_data(client: Any, X: np.ndarray, y: np.ndarray, split: int) -> tuple[Any, Any]:
    import dask.array as da
    from xgboost import dask as dxgb

    chunk = split // 3
    dX, dy = da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)
    dtrain = dxgb.DaskDMatrix(client, dX[:split], dy[:split])
    dvalid = dxgb.DaskDMatrix(client, dX[split:], dy[split:])
    return dtrain, dvalid


@pytest.mark.slow
def test_dask_three_workers_stop_together_and_healthy_twin_completes(tmp_path: Path, dask_client: Any) -> None:
    from xgboost import dask as dxgb

    X, y = _noise(1200)
    dtrain, dvalid = _dask_data(dask_client, X, y, 900)
    evals = [(dtrain, "train"), (dvalid, "validation")]
    collections = ["metrics", "labels", "predictions"]

    rules = [{"name": "tree_depth", "max_depth": 6, "actions": STOP}]
    cb = TripwireCallback(out_dir=tmp_path / "fault", rules=rules, collections=collections, save_interval=1)
    out = dxgb.train(dask_client, {**PARAMS, "max_depth": 12}, dtrain, 20, evals=evals, callbacks=[cb])
    rounds = out["booster"].num_boosted_rounds()
    assert rounds < 20 and len(out["history"]["validation"]["logloss"]) == rounds  # every worker stopped at the same round
    assert cb.stopped_by is not None and cb.stopped_by.rule == "tree_depth"  # read back from the run
    assert rounds == cb.stopped_by.step + 1
    # (it was None on the client; a distributed job's reason names the rank, rank 0 too: session 30, trial 30g F7)
    assert cb.stop_reason == cb.stopped_by._line(rank_always=True)
    run = tripwire.open_run(tmp_path / "fault")
    assert run.workers == [0] and run.world_size == 3 and run.status == "stopped"  # rank 0 writes
    assert run.array("labels", 0, mode="eval").shape == (300,)  # gathered from every worker
    assert sorted(run.array("labels", 0, mode="eval").tolist()) == sorted(y[900:].tolist())
    assert run.array("predictions", 0, mode="eval").shape == (300,)

    cb = TripwireCallback(out_dir=tmp_path / "healthy", rules=rules, save_interval=5)
    out = dxgb.train(dask_client, {**PARAMS, "max_depth": 3}, dtrain, 12, evals=evals, callbacks=[cb])
    assert out["booster"].num_boosted_rounds() == 12 and cb.findings == [] and cb.stopped_by is None
    run = tripwire.open_run(tmp_path / "healthy")
    assert run.status == "complete" and run.steps("train") == [0, 5, 10, 11]  # (11: the rounds after the last save step)
    assert run.series("trees/depth", "raw", "train")[1].max() <= 3
    history = out["history"]["validation"]["logloss"]
    assert run.series("validation-logloss", "raw", "eval")[1] == pytest.approx(history[::5] + history[-1:])  # (and 11)


# -------------------------------------------------------------------------------- benchmark
def test_overhead_benchmark_quick_smoke(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--framework", "xgboost", "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "default" in proc.stdout and "ratio" in proc.stdout
    data = json.loads(out.read_text())
    assert data["framework"] == "xgboost" and data["ratio_baseline_cpu"] == data["ratio_baseline_wall"] == 1.0
    assert data["ratio_default"] > 0 and data["ratio_everything"] > 0


class _Interrupt(xgb.callback.TrainingCallback):
    """Raises KeyboardInterrupt at a round, as Ctrl-C does (XGBoost then calls no after_training)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch == self.at:
            raise KeyboardInterrupt
        return False


def test_a_run_left_open_by_an_interrupted_training_is_released(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 16d: after Ctrl-C in a notebook, re-running the cell with a new callback and the same
    # out_dir was refused for the rest of the process, with advice (Session.close(), the Keras
    # callback's close()) that did not apply to XGBoost
    X, y = _leaky(300)
    dtrain = xgb.DMatrix(X, label=y)
    out = tmp_path / "run"
    first = TripwireCallback(out_dir=out, save_interval=1)
    with pytest.raises(KeyboardInterrupt):
        xgb.train(PARAMS, dtrain, 6, evals=[(dtrain, "train")], callbacks=[first, _Interrupt(2)], verbose_eval=False)
    assert tripwire.open_run(out).status == "running"
    del first  # (the notebook's name now points at the new callback)
    again = TripwireCallback(out_dir=out, save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train(PARAMS, dtrain, 4, evals=[(dtrain, "train")], callbacks=[again], verbose_eval=False)
    assert any("was left open by an earlier training of this process that raised" in r.getMessage() for r in caplog.records)
    assert tripwire.open_run(out).status == "complete"
    # close() ends an interrupted training's run (failed), as the Keras callback's does
    other = TripwireCallback(out_dir=tmp_path / "closed", save_interval=1)
    with pytest.raises(KeyboardInterrupt):
        xgb.train(PARAMS, dtrain, 6, evals=[(dtrain, "train")], callbacks=[other, _Interrupt(1)], verbose_eval=False)
    other.close()
    assert tripwire.open_run(tmp_path / "closed").status == "failed"
    other.close()  # (twice: nothing more)


def test_two_callbacks_on_one_out_dir_in_one_training_then_a_fixed_retry(tmp_path: Path) -> None:
    X, y = _leaky(300)
    dtrain = xgb.DMatrix(X, label=y)
    a, b = TripwireCallback(out_dir=tmp_path / "run"), TripwireCallback(out_dir=tmp_path / "run")
    with pytest.raises(ConfigError, match="being written by another training .*with its callback's close\\(\\)"):
        xgb.train(PARAMS, dtrain, 3, evals=[(dtrain, "train")], callbacks=[a, b], verbose_eval=False)
    fixed = TripwireCallback(out_dir=tmp_path / "run")  # (a is still referenced: not training, so released)
    xgb.train(PARAMS, dtrain, 3, evals=[(dtrain, "train")], callbacks=[fixed], verbose_eval=False)
    assert tripwire.open_run(tmp_path / "run").status == "complete" and a is not None


def test_a_regression_objective_feeds_no_class_rule(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 16h: sparse counts (0-3) read as classes and their rates (all below 1) as probabilities: a
    # healthy count:poisson model was flagged by class_imbalance and confusion
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = rng.poisson(np.exp(0.4 * X[:, 0] - 2.0)).astype(np.float64)
    dtrain, dvalid = xgb.DMatrix(X[:1500], label=y[:1500]), xgb.DMatrix(X[1500:], label=y[1500:])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["class_imbalance", "confusion"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "objective": "count:poisson", "eval_metric": "poisson-nloglik"}, dtrain, 20,
                  evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
    assert cb.findings == []
    assert any("objective 'count:poisson' is a regression" in r.getMessage() for r in caplog.records)
    assert "class_imbalance and confusion (which judge classifiers) are off" in caplog.text
    # said once, at the start: not again at the end as rules that read nothing, collections that captured nothing
    assert not [r for r in caplog.records if "nothing" in r.getMessage()], caplog.text
    # one rule: "judges", "is" (trial 19i)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "objective": "count:poisson", "eval_metric": "poisson-nloglik"}, dtrain, 2,
                  evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[TripwireCallback(out_dir=tmp_path / "one", save_interval=1, rules=["class_imbalance"])])
    assert "class_imbalance (which judges classifiers) is off" in caplog.text


def test_a_custom_objective_is_named_as_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 19i: obj= (a custom logistic objective) switched the class rules off with a WARNING naming
    # 'reg:squarederror', an objective the user never set
    dtrain, dvalid = _train_dm(*_noise(600))

    def logistic(predt: np.ndarray, d: Any) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-predt))
        return p - d.get_label(), p * (1.0 - p)

    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({"max_depth": 3, "nthread": 1, "base_score": 0.5}, dtrain, 3, obj=logistic,
                  evals=[(dtrain, "train"), (dvalid, "validation")], verbose_eval=False,
                  callbacks=[TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["class_imbalance"])])
    assert "the objective is a custom one (obj=, which XGBoost reports as 'reg:squarederror')" in caplog.text
    assert "objective 'reg:squarederror' is a regression" not in caplog.text


def test_round_counts_read_as_english() -> None:
    from tripwire.integrations.xgboost._callback import _rounds

    assert (_rounds(1), _rounds(2)) == ("1 round", "2 rounds")  # (trial 19i: "after 1 rounds")


def test_a_regression_keeps_the_labels_and_predictions_its_config_asks_for(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # session 16 left this: a regression objective captured no labels/predictions even where the
    # user's config asked for them (to analyse the predictions later); the class rules stay off
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = rng.poisson(np.exp(0.4 * X[:, 0] - 2.0)).astype(np.float64)
    dtrain, dvalid = xgb.DMatrix(X[:1500], label=y[:1500]), xgb.DMatrix(X[1500:], label=y[1500:])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["class_imbalance", "confusion"],
                          include_collections=["labels", "predictions"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster = xgb.train({**PARAMS, "objective": "count:poisson", "eval_metric": "poisson-nloglik"}, dtrain, 20,
                            evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
    assert cb.findings == []
    said = [r.getMessage() for r in caplog.records if "count:poisson" in r.getMessage()]
    assert len(said) == 1 and "class_imbalance and confusion" in said[0] and "are captured" in said[0], said
    run = tripwire.open_run(tmp_path / "run")
    assert run.array("labels", 19, mode="eval") == pytest.approx(y[1500:])
    assert run.array("predictions", 19, mode="eval").reshape(-1) == pytest.approx(booster.predict(dvalid), rel=1e-6)
    assert not [f for f in run.findings if f.rule in ("class_imbalance", "confusion")]


def test_a_regression_keeps_its_labels_without_a_class_rule(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    X, _ = _noise(400, seed=1)
    target = X[:, 0] * 2.5 + 0.1
    dtrain, dvalid = _train_dm(X, target, 300)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, include_collections=["labels", "predictions"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({**PARAMS, "objective": "reg:squarederror"}, dtrain, 4, evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[cb], verbose_eval=False)
    assert not [r for r in caplog.records if "reg:squarederror" in r.getMessage()], caplog.text
    run = tripwire.open_run(tmp_path / "run")
    assert run.array("labels", 2, mode="eval") == pytest.approx(target[300:])


def test_tree_depth_judges_the_trees_between_save_steps(tmp_path: Path) -> None:
    # trial 17c: with the default interval (10) trees/depth was the saved round's tree alone: the
    # first tree deeper than the rule's limit came at round 35 and boosting stopped at round 140
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    dtrain, dvalid = xgb.DMatrix(X[:400], label=y[:400]), xgb.DMatrix(X[400:], label=y[400:])
    params = {**PARAMS, "max_depth": 12, "min_child_weight": 0, "eta": 0.1}
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "tree_depth", "max_depth": 8,
                                                             "actions": ["stop_training"]}])
    booster = xgb.train(params, dtrain, 200, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                        verbose_eval=False)

    def depth(node: dict[str, Any]) -> int:
        return 0 if "children" not in node else 1 + max(depth(c) for c in node["children"])

    depths = [depth(json.loads(t)) for t in booster.get_dump(dump_format="json")]
    first_deep = next(i for i, d in enumerate(depths) if d > 8)
    assert first_deep % 10 != 0  # (between save steps: the case)
    assert cb.stopped_by is not None and cb.stopped_by.step == (first_deep // 10 + 1) * 10
    # the finding names the rounds the deep tree came in, not the save step's round alone (trial 21e)
    at = cb.stopped_by.step
    assert cb.stopped_by.message.startswith(f"rounds {at - 9}-{at} added a tree of depth "), cb.stopped_by.message
    steps, recorded = tripwire.open_run(tmp_path / "run").series("trees/depth")
    for step, value in zip(steps.tolist(), recorded.tolist()):
        assert value == max(depths[max(0, step - 9) : step + 1]), step


@pytest.mark.parametrize("kw, key", [({"ranks": [1]}, "ranks"), ({"writer": {"ranks": [1]}}, "writer.ranks")])
def test_ranks_naming_no_rank_of_the_job_are_refused(tmp_path: Path, kw: dict[str, Any], key: str) -> None:
    # trial 17f: accepted silently: nothing captured, no rule ran (a tree_depth stop never fired), no run
    dtrain, _ = _train_dm(*_noise(300))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["tree_depth"], **kw)
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}: got \[1\], but this job has ranks 0 to 0 \(world size "
                                          r"1\): no rank would capture, and the run would be lost"):
        xgb.train(PARAMS, dtrain, 3, evals=[(dtrain, "train")], callbacks=[cb], verbose_eval=False)


def test_trees_after_the_last_save_step_are_recorded_and_judged(tmp_path: Path) -> None:
    # trial 18b: 25 rounds, saves every 10, depth-8 trees from round 22: no record after round 20,
    # tree_depth never judged them, the run ended complete with no finding
    class Deepen(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            if epoch == 21:
                model.set_param({"max_depth": 8})
            return False

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 10))
    y = (np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + rng.normal(scale=0.3, size=2000) > 0).astype(float)
    d = xgb.DMatrix(X, label=y)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "tree_depth", "max_depth": 6, "actions": STOP}])
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1}, d, 25, evals=[(d, "train")],
                        callbacks=[Deepen(), cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 25
    run = tripwire.open_run(tmp_path / "run")
    steps, depths = run.tensor("trees/depth").series()
    assert steps.tolist() == [0, 10, 20, 24] and depths.tolist() == [2, 2, 2, 8]
    assert run.tensor("train-logloss").series()[0].tolist() == [0, 10, 20, 24]  # the last round's metrics with it
    assert [(f.rule, f.step) for f in run.findings] == [("tree_depth", 24)]
    assert cb.stopped_by is not None and run.status == "stopped"  # (a stop asked at the last round, as Lightning's)
    # a training whose last round is a save step writes nothing more
    cb2 = TripwireCallback(out_dir=tmp_path / "run2", rules=[{"name": "tree_depth", "max_depth": 6}])
    xgb.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1}, d, 21, evals=[(d, "train")],
              callbacks=[cb2], verbose_eval=False)
    assert tripwire.open_run(tmp_path / "run2").tensor("trees/depth").series()[0].tolist() == [0, 10, 20]


def test_the_last_round_s_metrics_are_recorded_and_judged_when_it_was_not_a_save_step(tmp_path: Path) -> None:
    # trial 19b: with the default config (saves every 10 rounds) the rounds after the last save step
    # were recorded only where trees were captured, in train mode only: the finished model's
    # validation score was never written, and the loss rules and overfit never saw the last rounds
    dtrain, dvalid = _train_dm(*_noise(600))
    cb = TripwireCallback(out_dir=tmp_path / "run")
    booster = xgb.train({**PARAMS, "max_depth": 2}, dtrain, 25, evals=[(dtrain, "train"), (dvalid, "validation")],
                        callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert run.steps("train") == [0, 10, 20, 24] and run.steps("eval") == [0, 10, 20, 24]
    final = float(booster.eval(dvalid).split(":")[1])
    assert run.series("validation-logloss", "raw", "eval")[1][-1] == pytest.approx(final, rel=1e-5)
    # judged there: a rule reading the validation score sees the last round's
    seen: list[tuple[int, str, float | None]] = []

    def watch(history: Any, step: int, mode: str) -> None:
        seen.append((step, mode, history.latest("validation-logloss", "raw", "eval")))

    rule = tripwire.FunctionRule(watch, name="watch_validation", modes=["eval"])
    xgb.train(PARAMS, dtrain, 23, evals=[(dtrain, "train"), (dvalid, "validation")],
              callbacks=[TripwireCallback(out_dir=tmp_path / "judged", rules=[rule])], verbose_eval=False)
    assert [(step, mode) for step, mode, _ in seen] == [(0, "eval"), (10, "eval"), (20, "eval"), (22, "eval")]
    assert seen[-1][2] is not None and seen[-1][2] != seen[-2][2]
    # a training whose last round is a save step writes no second record of it
    cb = TripwireCallback(out_dir=tmp_path / "even")
    xgb.train(PARAMS, dtrain, 21, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    even = tripwire.open_run(tmp_path / "even")
    assert even.steps("train") == [0, 10, 20] and even.steps("eval") == [0, 10, 20]


def test_the_loss_rules_read_a_training_metric_that_does_not_saturate(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # trial 19i: eval_metric ["logloss", "error"] pointed the loss rules at train-error, flat at 0.0175
    # from round 0 on an easy task with 2% flipped labels: loss_not_decreasing stopped a healthy booster
    # at round 50 whose train-logloss went from 0.61 to 0.07
    rs = np.random.RandomState(0)
    X = rs.normal(size=(600, 5))
    y = (X[:, 0] > 0).astype(int)
    flip = rs.choice(600, 12, replace=False)
    y[flip] = 1 - y[flip]
    dtrain, dvalid = xgb.DMatrix(X[:400], label=y[:400]), xgb.DMatrix(X[400:], label=y[400:])
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 2, "eta": 0.1,
              "min_child_weight": 5, "nthread": 1}
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "default", "actions": ["log", "stop_training"]}])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        booster = xgb.train(params, dtrain, 100, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                            verbose_eval=False)
    assert booster.num_boosted_rounds() == 100 and cb.findings == []
    assert "rule 'loss_not_decreasing' reads loss='train-logloss'" in caplog.text


def test_a_metrics_include_that_leaves_out_the_training_metric_is_named(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    # trial 18a: with metrics {include: ['^validation-']} no train record is written, so the check for
    # rule inputs that matched nothing took the run for an evaluation-only one: a booster that could
    # not learn passed silently, in process and under `tripwire watch` (exit 0)
    from tripwire._cli import main

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(600, 6)), rng.integers(0, 2, 600)
    dtr, dva = xgb.DMatrix(X[:400], y[:400]), xgb.DMatrix(X[400:], y[400:])
    out = tmp_path / "run"
    cb = TripwireCallback({"save": {"interval": 1}, "rules": ["loss_not_decreasing"],
                           "collections": {"losses": None, "metrics": {"include": ["^validation-"]}}}, out_dir=out)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.train({"objective": "binary:logistic", "eta": 1e-4, "max_depth": 2}, dtr, 60,
                  evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.findings == []
    said = "rule 'loss_not_decreasing': loss='train-logloss' matches no loss or metric of this run (captured: validation-logloss)"
    assert any(said in r.getMessage() for r in caplog.records)
    assert main(["watch", str(out), "--once"]) == 3


def test_a_cancelled_trial_s_run_says_it_was_cancelled_not_stopped_by_the_tuner(tmp_path: Path) -> None:
    # trial 20c: a Dask trial past trial_timeout (its next report returns True) said "the tuner
    # stopped the trial after 1 round" in its run
    trial = FakeTrial(stop_at=2)
    trial.cancelled = True  # (tripwire.tune's Trial sets it, with stop_reason, on a timeout or the job's end)
    trial.max_resource = 10
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="validation-auc")
    _drive(cb, [[{"depth": 1}]] * 5)
    reasons = [m.get("stop_reason") for m in tripwire.open_run(tmp_path / "run").end_markers.values()]
    assert reasons == ["the trial was cancelled after 2 rounds: below the rung at step 2"], reasons


def test_a_round_that_an_earlier_callback_stopped_on_is_recorded_at_its_own_step(tmp_path: Path) -> None:
    """Trial 21e: XGBoost's EarlyStopping listed before tripwire ends the last round before
    tripwire's after_iteration sees it; the end-of-training record was labelled with the round
    before it and held its metrics (round 82's at step 81)."""
    dtrain, dvalid = _train_dm(*_noise(400), 300)
    er: dict[str, Any] = {}
    stopper = xgb.callback.EarlyStopping(rounds=3, save_best=False)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[])  # saves every 10 rounds
    booster = xgb.train(PARAMS, dtrain, 200, evals=[(dtrain, "train"), (dvalid, "validation")], evals_result=er,
                        callbacks=[stopper, cb], verbose_eval=False)
    last = booster.num_boosted_rounds() - 1
    assert 0 < last < 199 and last % 10 != 0  # stopped early, between save steps
    run = tripwire.open_run(tmp_path / "run")
    for name, (which, metric) in (("train-logloss", ("train", "logloss")), ("validation-logloss", ("validation", "logloss"))):
        steps, values = run.series(name)
        assert int(steps[-1]) == last, (name, steps[-3:])
        np.testing.assert_allclose(values, [er[which][metric][int(s)] for s in steps], rtol=1e-6)
