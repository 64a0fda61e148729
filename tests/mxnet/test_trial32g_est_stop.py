"""Trial 32g F3: a fit that MXNet's ``EarlyStoppingHandler`` (or another event handler) ended early
was recorded as ``complete`` with no ``stop_reason``, like one that ran all its epochs. The run now
ends ``stopped`` with a reason naming that handler (as the Keras and Lightning callbacks record
their frameworks' ``EarlyStopping``), and a tuner trial is told (``Trial.note_early_end``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

import tripwire
from tripwire.tune._trial import Trial

from mxnet_testlib import gluon, mx, nn
from tripwire.integrations.mxnet import TripwireHandler

from mxnet.gluon.contrib.estimator import EarlyStoppingHandler, Estimator  # noqa: E402
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd  # noqa: E402


def _estimator() -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=10, shuffle=False)
    val = gluon.data.DataLoader(gluon.data.ArrayDataset(x[:20], y[:20]), batch_size=10)
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(2, in_units=16))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), val_metrics=[mx.metric.Loss()], trainer=trainer)
    est.logger.setLevel(logging.ERROR)
    return est, train, val


class _Channel:
    """The tuner's side of a trial: never stops it."""

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        return False, ""


def test_an_early_stopping_handlers_stop_ends_the_run_stopped_naming_it(tmp_path: Path) -> None:
    est, train, val = _estimator()
    trial = Trial(3, {"lr": 0.05}, min_resource=1, max_resource=10, channel=_Channel())
    handler = TripwireHandler(out_dir=str(tmp_path), rules=["default"], trial=trial,
                              trial_metric="validation loss")
    es = EarlyStoppingHandler(monitor=est.val_metrics[0], mode="min", min_delta=10.0, patience=1)
    est.fit(train, val_data=val, epochs=10, event_handlers=[handler, es])
    assert es.stop_training and es.stopped_epoch == 1  # (2 of 10 epochs)
    assert handler.stopped_by is None  # (no finding stopped it)
    reason = handler.stop_reason
    assert reason is not None
    assert "EarlyStoppingHandler(monitor='validation loss')" in reason and "epoch 1" in reason
    assert "min_delta=10" in reason and "patience=1" in reason
    run = tripwire.open_run(tmp_path)
    assert run.status == "stopped"
    assert run.stop_reasons == {0: reason}
    assert run.steps(mode="eval") == [0, 1]
    assert trial.early_end_reason is not None and trial.early_end_reason.startswith("EarlyStoppingHandler(")


class _Quitter(EpochEnd):
    """A handler of the user's that ends the fit by returning True from epoch_end (no flag of its own)."""

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        return True


def test_another_handler_returning_true_ends_the_run_stopped(tmp_path: Path) -> None:
    est, train, val = _estimator()
    handler = TripwireHandler(out_dir=str(tmp_path), rules=["default"])
    est.fit(train, val_data=val, epochs=5, event_handlers=[handler, _Quitter()])
    reason = handler.stop_reason
    assert reason is not None and "_Quitter" in reason and "returned True" in reason
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_a_fit_that_ran_its_epochs_stays_complete(tmp_path: Path) -> None:
    """An EarlyStoppingHandler that fires at the last epoch ended nothing early."""
    est, train, val = _estimator()
    handler = TripwireHandler(out_dir=str(tmp_path), rules=["default"])
    es = EarlyStoppingHandler(monitor=est.val_metrics[0], mode="min", min_delta=10.0, patience=1)
    est.fit(train, val_data=val, epochs=2, event_handlers=[handler, es])
    assert es.stop_training
    assert handler.stop_reason is None
    assert tripwire.open_run(tmp_path).status == "complete"
