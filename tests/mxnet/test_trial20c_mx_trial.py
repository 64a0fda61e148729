"""Trial 20c, findings 3 and 8: MXNet's hook and estimator handler take ``trial=``/``trial_metric=`` as
the Keras, Lightning and XGBoost callbacks do (issue 8: they report the metric each epoch and stop
training when the scheduler says so; the run of a trial the scheduler stopped ends ``stopped`` with
"the tuner stopped the trial after epoch N (metric=value)"; a rule stop is told to the trial), and
the tuning snippet of docs/mxnet.md and examples/tune_mxnet.py call ``hook.end_step`` before
``trainer.step``."""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire.integrations.mxnet import TripwireHandler
from tripwire.tune._trial import Trial, take_rule_stop

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

ROOT = Path(__file__).parents[2]


class _Rungs:
    """The tuner's channel, standing in for a scheduler that stops the trial at step ``at``."""

    def __init__(self, at: int | None = None) -> None:
        self.at, self.seen = at, []

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        self.seen.append((step, value))
        return (self.at is not None and step >= self.at), f"stopped at the rung at resource {step}"


def _trial(at: int | None = None, max_resource: int = 9) -> tuple[Trial, _Rungs]:
    channel = _Rungs(at)
    return Trial(7, {"lr": 0.1}, min_resource=1, max_resource=max_resource, channel=channel), channel


def _data() -> tuple[Any, Any, Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    xv = rng.normal(size=(32, 4)).astype(np.float32)
    y, yv = (x[:, 0] > 0).astype(np.float32), (xv[:, 0] > 0).astype(np.float32)
    return nd.array(x), nd.array(y), nd.array(xv), nd.array(yv)


def _net() -> gluon.Block:
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(2, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def _loop(hook: TripwireHook, epochs: int, lr: float = 0.1, metric: str = "val_loss") -> list[float]:
    """The loop docs/mxnet.md "Tuning" shows; returns the validation values it passed."""
    x, y, xv, yv = _data()
    net = _net()
    hook.register_block(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    told: list[float] = []
    for _epoch in range(epochs):
        for i in range(0, 64, 16):
            hook.begin_step()
            with autograd.record():
                loss = loss_fn(net(x[i:i + 16]), y[i:i + 16])
            loss.backward()
            hook.end_step(loss=loss)
            if hook.should_stop:
                return told
            trainer.step(16)
        val = loss_fn(net(xv), yv).mean()
        told.append(float(val.asscalar()))
        hook.begin_step("eval", summary=True)
        decision = hook.end_step(metrics={metric: val, "val_acc": 0.5})
        # the decision stays the rules'; the tuner's stop is should_stop
        assert not decision.stop or decision.stopped_by is not None
        if hook.should_stop:
            break
    return told


def test_hook_reports_each_epoch_summary_and_stops_when_the_scheduler_says_so(tmp_path: Path) -> None:
    trial, channel = _trial(at=2)
    hook = TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_loss")
    told = _loop(hook, epochs=9)
    hook.close()
    assert len(told) == 2 and [s for s, _ in channel.seen] == [1, 2]
    assert [v for _, v in channel.seen] == pytest.approx(told, rel=1e-6)
    assert hook.should_stop and hook.trial_stopped and trial.should_stop
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    assert run.end_markers[0]["stop_reason"] == f"the tuner stopped the trial after epoch 2 (val_loss={told[1]:.6g})"
    assert run.trial == {"metric": "val_loss", "number": 7, "attempt": 1, "params": {"lr": 0.1}}


def test_a_trial_that_runs_its_whole_budget_is_a_complete_run(tmp_path: Path) -> None:
    trial, channel = _trial(at=2, max_resource=2)  # the scheduler says stop at max_resource
    with TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_loss") as hook:
        _loop(hook, epochs=2)
    assert [s for s, _ in channel.seen] == [1, 2] and hook.should_stop
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.end_markers[0].get("stop_reason") is None


def test_the_step_context_manager_reports_too(tmp_path: Path) -> None:
    trial, channel = _trial(at=1)
    with TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_acc") as hook:
        with hook.step("eval", summary=True) as s:
            s.metrics = {"val_acc": nd.array([0.25])}
    assert channel.seen == [(1, 0.25)] and hook.should_stop
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_a_rule_stop_is_told_to_the_trial(tmp_path: Path) -> None:
    trial, channel = _trial(at=5)
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=["exploding_tensor"], actions=["log", "stop_training"],
                        trial=trial, trial_metric="val_loss")
    try:
        told = _loop(hook, epochs=3, lr=1e12)  # diverges within the first epoch
    finally:
        hook.close()
        stop = take_rule_stop(7)  # (what the tuner's worker takes with the trial's end)
    # (the NaN losses kept at every step are judged at the epoch's summary, whose value is still told)
    assert len(told) == 1 and [s for s, _ in channel.seen] == [1]
    assert hook.should_stop and not hook.trial_stopped
    assert trial.stopped_by_rule is not None and trial.stopped_by_rule[0] == "exploding_tensor"
    assert stop == trial.stopped_by_rule
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and "exploding_tensor" in run.end_markers[0]["stop_reason"]


def test_trial_arguments_are_checked(tmp_path: Path) -> None:
    trial, _ = _trial()
    for cls in (TripwireHook, TripwireHandler):
        with pytest.raises(ConfigError, match=r"trial_metric: got None with a trial; accepted: "):
            cls(out_dir=str(tmp_path / "a"), trial=trial)
        with pytest.raises(ConfigError, match=r"trial_metric: got 'val_loss' without a trial"):
            cls(out_dir=str(tmp_path / "b"), trial_metric="val_loss")
        with pytest.raises(ConfigError, match=r"trial: got .*; accepted: None or an object with report\(step, value\)"):
            cls(out_dir=str(tmp_path / "c"), trial=object(), trial_metric="val_loss")
        with pytest.raises(ConfigError, match=r"^trial_metric: got ''; accepted: a metric name"):  # (trial 24f)
            cls(out_dir=str(tmp_path / "d"), trial=trial, trial_metric="")


def test_a_trial_metric_missing_from_the_summary_fails_the_run_by_name(tmp_path: Path) -> None:
    trial, _ = _trial()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_loss")
    with pytest.raises(ConfigError, match=re.escape(
            "trial_metric: 'val_loss' is not among the metrics of epoch 1's evaluation summary; did you mean "
            "'val_losses'?; available: val_acc, val_losses")):
        _loop(hook, epochs=1, metric="val_losses")
    assert hook.closed and tripwire.open_run(tmp_path / "run").status == "failed"


def test_a_loop_without_evaluation_summary_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    trial, channel = _trial()
    x, y, _, _ = _data()
    net = _net()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_loss") as hook:
            hook.register_block(net)
            hook.begin_step()
            with autograd.record():
                loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
            loss.backward()
            hook.end_step(loss=loss)
    assert channel.seen == []
    assert "this training told the trial nothing" in caplog.text and "summary=True" in caplog.text


def test_the_estimator_handler_reports_each_epoch_and_ends_the_fit(tmp_path: Path) -> None:
    from mxnet.gluon.contrib.estimator import Estimator

    x, y, xv, yv = _data()
    train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16)  # 4 batches an epoch
    val_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xv, yv), batch_size=32)
    net = _net()
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), val_metrics=mx.metric.Loss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    est.logger.setLevel(logging.WARNING)
    trial, channel = _trial(at=2)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="validation loss")
    est.fit(train_data, val_data=val_data, epochs=9, event_handlers=[handler])
    assert [s for s, _ in channel.seen] == [1, 2] and handler.stop_training and handler.hook.trial_stopped
    assert handler.trial_stopped is True  # (as on every integration: trial 28e, the handler had none)
    # the values told are the estimator's own validation loss of each epoch, as the run records it
    recorded = [handler.history.value("validation loss", "raw", epoch, mode="eval") for epoch in (0, 1)]
    assert [v for _, v in channel.seen] == pytest.approx(recorded) and all(math.isfinite(v) for v in recorded)
    # the stop, read when epoch 3 begins, ends the fit after its first batch (as a stop from epoch metrics)
    assert handler.hook.session.mode_steps["train"] == 2 * 4 + 1
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    value = channel.seen[1][1]
    said = run.end_markers[0]["stop_reason"]
    assert said == f"the tuner stopped the trial after epoch 2 (validation loss={value:.6g})"
    assert run.trial is not None and run.trial["metric"] == "validation loss"


def test_the_handler_names_the_estimators_metrics_for_a_missing_trial_metric(tmp_path: Path) -> None:
    """Trial 20d: with train_metrics=Accuracy() the estimator logs no loss metric, and the error told
    the handler's user to pass the metric to end_step, which they never call."""
    from mxnet.gluon.contrib.estimator import Estimator

    x, y, xv, yv = _data()
    net = _net()
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    est.logger.setLevel(logging.WARNING)
    trial, _ = _trial()
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), trial=trial,
                              trial_metric="validation softmaxcrossentropyloss")
    with pytest.raises(ConfigError) as err:
        est.fit(gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16),
                val_data=gluon.data.DataLoader(gluon.data.ArrayDataset(xv, yv), batch_size=32), epochs=2,
                event_handlers=[handler])
    said = str(err.value)
    assert "end_step" not in said and "available: training accuracy, validation accuracy" in said, said
    assert "'validation loss' with val_metrics=mx.metric.Loss()" in said, said
    assert tripwire.open_run(tmp_path / "run").status == "failed"


@pytest.mark.slow
def test_tune_example_runs_say_why_they_ended(tmp_path: Path) -> None:
    # the example with the hook's trial=: the runs of the trials the scheduler stopped read
    # 'stopped' and say so (they read 'complete' with the hand-written report: trial 20c)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "tune_mxnet.py"), "--journal", "j.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = sqlite3.connect(tmp_path / "j.db").execute("SELECT number, status, rule, resource FROM trials").fetchall()
    assert len(rows) == 9
    kinds = set()
    for number, status, rule, resource in rows:
        run = tripwire.open_run(tmp_path / "runs" / f"trial-{number}-1")
        reason = run.end_markers[0].get("stop_reason")
        assert run.trial is not None and run.trial["number"] == number and run.trial["metric"] == "val_loss"
        if rule is not None:
            kinds.add("rule")
            assert status == "stopped" and run.status == "stopped" and rule in reason
        elif status == "stopped":
            kinds.add("rung")
            assert run.status == "stopped" and reason.startswith(f"the tuner stopped the trial after epoch {resource} "
                                                                 "(val_loss=")
        else:
            kinds.add("complete")
            assert status == "completed" and resource == 9 and run.status == "complete" and reason is None
    assert kinds == {"rule", "rung", "complete"}
    # trial 26g: docs/mxnet.md's summary of the example (the part that timing does not change): the 4
    # diverging trials are stopped by exploding_gradient's burst, 1, 3 and 4 at step 10, 8 at step 20
    ruled = {number: rule for number, _, rule, _ in rows if rule is not None}
    assert ruled == dict.fromkeys((1, 3, 4, 8), "exploding_gradient"), rows
    steps = {n: [f.step for f in tripwire.open_run(tmp_path / "runs" / f"trial-{n}-1").findings] for n in ruled}
    assert steps == {1: [10], 3: [10], 4: [10], 8: [20]}
    assert {number for number, status, _, _ in rows if status == "completed"} <= {0, 5, 6}
    assert "stopped 6" in done.stdout or "stopped 7" in done.stdout, done.stdout
    doc = " ".join((ROOT / "docs" / "mxnet.md").read_text().split())
    assert "the 4 trials whose learning rate is 10.9 or more (1, 3, 4 and 8) diverge and are stopped by " \
           "`exploding_gradient`: trials 1, 3 and 4 at step 10" in doc
    assert "3 diverged" not in doc


def _calls(text: str) -> list[str]:
    return re.findall(r"hook\.end_step\(|trainer\.step\(", text)


def test_tuning_loops_end_the_step_before_trainer_step() -> None:
    # trial 20c, finding 8: trainer.step before hook.end_step saved each step's weights one update late
    example = (ROOT / "examples" / "tune_mxnet.py").read_text()
    assert _calls(example[example.index("for i in range"):])[:2] == ["hook.end_step(", "trainer.step("]
    doc = (ROOT / "docs" / "mxnet.md").read_text()
    tuning = doc[doc.index("## Tuning"):doc.index("## Limits")]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", tuning, re.S) if "trainer.step" in b]
    assert blocks
    for block in blocks:  # (the snippet said "# forward, backward, trainer.step", then hook.end_step)
        assert block.index("hook.end_step(") < block.index("trainer.step"), block
