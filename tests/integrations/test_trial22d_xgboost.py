"""Trial 22d's XGBoost finding: boosting stopped at a round that is not a save step of the metrics
(a rule whose data is saved every round, ``class_imbalance`` on the validation labels, with the
metrics on the default interval; the ``raise`` action; the tuner) has that round's metrics, trees
and importance recorded when training ends, as a completed run has its last round's; the rules
are not asked again there (no second stop, no finding twice). Also the ``raise`` action judging a
save step from the training side, or the last round at the end: the round's evaluation metrics
are recorded and the run ends ``stopped``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import TrainingStopped  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3, "nthread": 1, "seed": 0}
EVALS_NAMES = ("train", "validation")


def _imbalanced() -> tuple[Any, Any]:
    """95:5 classes that a booster without class weights neglects (class_imbalance stops it early)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = (rng.random(3000) < 0.05).astype(np.float64)
    X[y == 1, 0] += 1.0
    return xgb.DMatrix(X[:2000], label=y[:2000]), xgb.DMatrix(X[2000:], label=y[2000:])


def _deep_later() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 10))
    y = (np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + rng.normal(scale=0.3, size=2000) > 0).astype(float)
    return xgb.DMatrix(X[:1500], label=y[:1500]), xgb.DMatrix(X[1500:], label=y[1500:])


class Deepen(xgb.callback.TrainingCallback):
    """Grows depth-8 trees from the round after ``epoch`` on (listed before tripwire's callback)."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch == self.epoch:
            model.set_param({"max_depth": 8})
        return False


def _assert_round_recorded(run: Any, step: int, evals_result: dict[str, Any]) -> None:
    """``step``'s metrics (each equal to XGBoost's own), trees and importance are in the run."""
    for name in EVALS_NAMES:
        steps, values = run.series(f"{name}-logloss")
        assert int(steps[-1]) == step, (name, steps.tolist())
        if evals_result:
            assert values[-1] == pytest.approx(evals_result[name]["logloss"][step], rel=1e-6)
    assert run.steps("train")[-1] == step and run.steps("eval")[-1] == step


@pytest.mark.parametrize("repeat", [False, True])
def test_a_rule_stop_between_save_steps_records_the_stopped_round(tmp_path: Path, repeat: bool) -> None:
    dtrain, dvalid = _imbalanced()
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["trees", "feature_importance"],
                          rules=[{"name": "class_imbalance", "actions": ["stop_training"], "repeat": repeat}])
    er: dict[str, Any] = {}
    booster = xgb.train(PARAMS, dtrain, 60, evals=[(dtrain, "train"), (dvalid, "validation")], evals_result=er,
                        callbacks=[cb], verbose_eval=False)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "class_imbalance"
    step = cb.stopped_by.step
    assert booster.num_boosted_rounds() == step + 1 and step % 10 != 0  # (not a save step of the metrics)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    _assert_round_recorded(run, step, er)
    for name in ("trees/depth", "feature_importance/weight/f0"):
        assert run.tensor(name).steps()[-1] == step, name
    # the rules were not asked again: one finding, the one that stopped (repeat=True too)
    assert [(f.rule, f.step, f.mode) for f in run.findings] == [("class_imbalance", step, "eval")]
    assert [(f.rule, f.step) for f in cb.findings] == [("class_imbalance", step)]


def test_the_raise_action_between_save_steps_records_the_round_and_ends_stopped(tmp_path: Path) -> None:
    dtrain, dvalid = _imbalanced()
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["trees"],
                          rules=[{"name": "class_imbalance", "actions": ["raise"]}])
    with pytest.raises(TrainingStopped, match="class_imbalance") as raised:
        xgb.train(PARAMS, dtrain, 60, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                  verbose_eval=False)
    step = raised.value.finding.step
    assert step % 10 != 0
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    _assert_round_recorded(run, step, {})
    assert run.tensor("trees/depth").steps()[-1] == step
    assert [(f.rule, f.step) for f in run.findings] == [("class_imbalance", step)]


@pytest.mark.parametrize(("deep_from", "raised_at"), [(4, 10), (21, 24)])
def test_the_raise_action_on_the_training_side_records_the_round_s_evaluation_metrics(
        tmp_path: Path, deep_from: int, raised_at: int) -> None:
    # tree_depth judges in train mode: a raise at save step 10 came before the evaluation sets' record of
    # that round (eval steps [0]); a raise at the last round, judged at the end, left the run open
    # ("running", marked failed when the process exited) and its evaluation metrics unrecorded
    dtrain, dvalid = _deep_later()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "tree_depth", "max_depth": 6, "actions": ["raise"]}])
    with pytest.raises(TrainingStopped, match="tree_depth") as raised:
        xgb.train({**PARAMS, "max_depth": 2}, dtrain, 25, evals=[(dtrain, "train"), (dvalid, "validation")],
                  callbacks=[Deepen(deep_from), cb], verbose_eval=False)
    assert raised.value.finding.step == raised_at
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    assert run.steps("eval")[-1] == raised_at and run.steps("train")[-1] == raised_at
    assert [(f.rule, f.step) for f in run.findings] == [("tree_depth", raised_at)]


class StopAt:
    """A tuner trial that stops the training at ``step`` (the rounds in the model)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.stop_reason: str | None = None

    def report(self, step: int, value: float) -> bool:
        if step >= self.step:
            self.stop_reason = f"below the rung at step {step}"
            return True
        return False


def test_a_tuner_stop_between_save_steps_records_the_round(tmp_path: Path) -> None:
    dtrain, dvalid = _deep_later()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=StopAt(4), trial_metric="validation-logloss")
    er: dict[str, Any] = {}
    booster = xgb.train(PARAMS, dtrain, 30, evals=[(dtrain, "train"), (dvalid, "validation")], evals_result=er,
                        callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 4 and cb.stop_reason is not None and "tuner" in cb.stop_reason
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    _assert_round_recorded(run, 3, er)
    assert run.steps("train") == [0, 3]


def test_the_stopped_round_is_not_judged_again(tmp_path: Path) -> None:
    # the round was judged when it ran; recorded at the end, it is not judged a second time: a rule with
    # repeat=True would find its finding again (a second record of it), and a raise asked there would come
    # out of a training that a rule had already stopped
    def every_eval(history: Any, step: int, mode: str) -> str | None:
        return f"round {step} looks bad" if step == 3 else None

    def after_the_stop(history: Any, step: int, mode: str) -> str | None:
        return "judged again" if step == 3 else None

    labels = [{"collection": "labels", "raw_arrays": True, "modes": ["eval"], "max_interval": 1}]  # (eval judged every round)
    rules = [tripwire.FunctionRule(every_eval, name="every_eval", modes=["eval"], repeat=True,
                                   requirements=labels, actions=["stop_training"]),
             tripwire.FunctionRule(after_the_stop, name="after_the_stop", modes=["train"], actions=["raise"])]
    dtrain, dvalid = _deep_later()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=rules)
    booster = xgb.train(PARAMS, dtrain, 30, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
                        verbose_eval=False)
    assert booster.num_boosted_rounds() == 4
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.steps("train") == [0, 3]
    assert [(f.rule, f.step, f.mode) for f in run.findings] == [("every_eval", 3, "eval")]
    assert cb.stopped_by is not None and cb.stopped_by.rule == "every_eval"
