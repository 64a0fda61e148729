"""Trial 36e: the run of a trial the tuner stopped said ``validation_1-logloss`` in its stop reason
(XGBoost's sklearn set name), where the run's tensors, its trial facts and the INFO line said
``validation-logloss``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
pytest.importorskip("sklearn")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def _dtrain() -> "xgb.DMatrix":
    """100 rows of 4 features, labelled by the first one's sign."""
    x = np.random.default_rng(0).normal(size=(100, 4))
    return xgb.DMatrix(x, label=(x[:, 0] > 0).astype(int))


class StopAtTwo:
    number, attempt, params, max_resource = 0, 1, {}, 9

    def __init__(self) -> None:
        self.stop_reason: str | None = None

    def report(self, step: int, value: float) -> bool:
        return step >= 2


def test_the_tuners_stop_reason_names_the_metric_as_the_run_does(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(120, 4)), rng.integers(0, 2, 120)
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=StopAtTwo(), trial_metric="validation-logloss")
    clf = xgb.XGBClassifier(n_estimators=9, n_jobs=1, max_depth=2, callbacks=[cb])
    clf.fit(x[:80], y[:80], eval_set=[(x[:80], y[:80]), (x[80:], y[80:])], verbose=False)
    run = tripwire.open_run(tmp_path / "run")
    assert "validation-logloss" in run.tensor_names(collection="metrics")
    reason = run.end_markers[0].get("stop_reason")
    assert reason.startswith("the tuner stopped the trial after 2 rounds (validation-logloss="), reason
    assert "validation_1" not in reason


def test_a_stop_asked_when_the_last_round_is_judged_after_boosting_ended_is_said_as_such(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    y = (x[:, 0] > 0).astype(int)
    dtr, dva = xgb.DMatrix(x[:150], label=y[:150]), xgb.DMatrix(x[150:], label=y[150:])
    rounds: list[int] = []

    class Early(xgb.callback.TrainingCallback):  # (XGBoost's EarlyStopping, at a known round)
        def after_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            rounds.append(epoch)
            return epoch == 4

    rule = tripwire.FunctionRule(lambda h, s, m: "fault at 4" if s == 4 else None, actions=["stop_training"])
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[rule])
    with caplog.at_level("WARNING", logger="tripwire"):
        xgb.train({"objective": "binary:logistic", "nthread": 1}, dtr, 50, evals=[(dtr, "train"), (dva, "validation")],
                  verbose_eval=False, callbacks=[Early(), cb])
    assert rounds[-1] == 4 and cb.stopped_by is not None and cb.stopped_by.step == 4
    said = [r.getMessage() for r in caplog.records]
    assert not any("stopping training" in m for m in said), said
    assert any("at step 4 (train) asks to stop training, which had ended already" in m and "nothing was stopped" in m
               for m in said), said


def test_a_stop_at_round_0_by_a_callback_listed_first_ends_the_run_stopped_with_its_reason(tmp_path: Path) -> None:
    # trial 36q: the run read complete, with no reason, and held nothing
    dtrain = _dtrain()

    class StopAt0(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            return True

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    booster = xgb.train({"objective": "binary:logistic", "nthread": 1}, dtrain, 30, evals=[(dtrain, "train")],
                        verbose_eval=False, callbacks=[StopAt0(), cb])
    assert booster.num_boosted_rounds() == 1
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    reason = run.stop_reasons[0]
    assert reason.startswith("boosting was stopped outside tripwire at round 0 (1 round of the 30 asked for), before "
                             "this callback saw a round: by another callback (StopAt0)"), reason
    assert cb.stop_reason == reason


@pytest.mark.parametrize("first", [True, False])
def test_a_stop_before_the_first_round_ends_the_run_stopped_with_its_reason(tmp_path: Path, first: bool) -> None:
    # trial 38e: a before_iteration that returns True at once (a time budget spent already) left the run
    # complete, with no reason, whichever callback came first
    dtrain = _dtrain()

    class OutOfTime(xgb.callback.TrainingCallback):
        def before_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            return True

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    booster = xgb.train({"objective": "binary:logistic", "nthread": 1}, dtrain, 10, evals=[(dtrain, "train")],
                        verbose_eval=False, callbacks=[OutOfTime(), cb] if first else [cb, OutOfTime()])
    assert booster.num_boosted_rounds() == 0
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    assert run.stop_reasons[0] == cb.stop_reason
    assert cb.stop_reason is not None and cb.stop_reason.startswith(
        "boosting was stopped outside tripwire before its first round, round 0 (none of the 10 rounds asked for was "
        "trained): by another callback (OutOfTime)"), cb.stop_reason


def test_a_continued_training_keeps_the_runs_trainings(tmp_path: Path) -> None:
    # trial 36q: two trainings from round 0 through one callback, then xgb_model=: Run.trainings was {}
    dtrain = _dtrain()
    params = {"objective": "binary:logistic", "nthread": 1}
    cb = TripwireCallback(out_dir=tmp_path / "run")
    xgb.train(params, dtrain, 5, evals=[(dtrain, "train")], verbose_eval=False, callbacks=[cb])
    second = xgb.train(params, dtrain, 5, evals=[(dtrain, "train")], verbose_eval=False, callbacks=[cb])
    before = tripwire.open_run(tmp_path / "run").trainings
    assert len(before[0]) == 2
    xgb.train(params, dtrain, 3, evals=[(dtrain, "train")], verbose_eval=False, callbacks=[cb], xgb_model=second)
    after = tripwire.open_run(tmp_path / "run").trainings
    # (the earlier two kept, and the continued one after them, from its first new round: the rules judge
    # it alone from there, and tripwire watch arms them there too; trial 37f)
    assert [t["steps"] for t in after[0][:2]] == [t["steps"] for t in before[0]]
    assert len(after[0]) == 3 and after[0][2]["steps"] == {"train": 5, "eval": 5} and not after[0][2]["continued"]


def test_a_replay_of_a_continued_training_finds_what_the_training_found(tmp_path: Path) -> None:
    """Trial 37f: a model continued with xgb_model= at settings that learn nothing; the training found
    it (tree_depth at round 40, loss_not_decreasing at 80: its rules judge the continued rounds alone),
    but the run recorded no training boundary, and tripwire watch judged the continued rounds with the
    first training's, which hid both."""
    from sklearn.datasets import make_classification

    x, y = make_classification(600, 8, n_informative=4, random_state=0)
    d1, d2 = xgb.DMatrix(x[:450], label=y[:450]), xgb.DMatrix(x[450:], label=y[450:])
    params = {"objective": "binary:logistic", "nthread": 1, "max_depth": 2}
    rules = [{"name": "loss_not_decreasing", "actions": ["log"]}, {"name": "tree_depth", "max_depth": 8, "actions": ["log"]}]

    def train(cb: TripwireCallback) -> None:
        first = xgb.train({**params, "eta": 0.3}, d1, 30, evals=[(d1, "train"), (d2, "validation")], callbacks=[cb],
                          verbose_eval=False)
        xgb.train({**params, "eta": 1e-6, "min_child_weight": 1e6}, d1, 300, evals=[(d1, "train"), (d2, "validation")],
                  callbacks=[cb], xgb_model=first, verbose_eval=False)

    judged = TripwireCallback(out_dir=tmp_path / "inproc", rules=rules)
    train(judged)
    found = [(f.rule, f.step) for f in judged.findings]
    assert found == [("tree_depth", 40), ("loss_not_decreasing", 80)]
    train(TripwireCallback(out_dir=tmp_path / "run", rules=[], include_collections=["trees"]))
    replayed = tripwire.watch(tmp_path / "run", {"rules": rules}, once=True, record=False)
    assert [(f.rule, f.step) for f in replayed] == found


def test_close_after_a_training_that_raised_outside_the_callback_gives_a_reason(tmp_path: Path) -> None:
    # trial 38k: another callback's Ctrl-C at round 3, then cb.close() (the notebook's next cell): a failed run
    # with no stop_reason at all
    dtrain = _dtrain()

    class Interrupt(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            if epoch == 3:
                raise KeyboardInterrupt
            return False

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    with pytest.raises(KeyboardInterrupt):
        xgb.train({"objective": "binary:logistic", "nthread": 1}, dtrain, 10, evals=[(dtrain, "train")],
                  verbose_eval=False, callbacks=[cb, Interrupt()])
    cb.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed" and run.steps() == [0, 1, 2, 3]
    assert run.stop_reasons[0].startswith("the training ended before XGBoost's after_training")


def test_the_repr_says_how_the_run_stands(tmp_path: Path) -> None:
    # trial 38k: it said where it wrote and its rules alone, before, during and after a training
    dtrain = _dtrain()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"])
    seen = [repr(cb)]

    class Peek(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            if epoch == 2:
                seen.append(repr(cb))
            return False

    xgb.train({"objective": "binary:logistic", "nthread": 1}, dtrain, 5, evals=[(dtrain, "train")],
              verbose_eval=False, callbacks=[cb, Peek()])
    seen.append(repr(cb))
    where = repr(str(tmp_path / "run"))
    assert seen == [f"TripwireCallback(out_dir={where}, rules=['default'], not trained, findings=0)",
                    f"TripwireCallback(out_dir={where}, rules=['default'], run open, 3 rounds written, findings=0)",
                    f"TripwireCallback(out_dir={where}, rules=['default'], run complete, findings=0)"]
