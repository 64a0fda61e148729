"""Trial 32g F1: an estimator training checkpointed at an epoch end and resumed.

``handler.state_dict()`` pickled in an ``EpochEnd`` handler after every other (where
``CheckpointHandler`` writes its files) left out the epoch that had just ended: the handler wrote an
epoch's metrics only at the next ``epoch_begin``, so after the resume that epoch's validation was
gone and every later epoch sat one eval step early. And the resumed fit's planned length was the
remaining epochs' (``CheckpointHandler`` lowers ``estimator.max_epoch``), half the training.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np

import tripwire

from mxnet_testlib import gluon, mx, nn
from tripwire.integrations.mxnet import TripwireHandler

from mxnet.gluon.contrib.estimator import CheckpointHandler, Estimator  # noqa: E402
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd  # noqa: E402

EPOCHS, CRASH_AFTER, BATCHES = 6, 3, 4  # 4 batches of 10 per epoch


class _Crash(Exception):
    """The process dying right after the checkpoint of epoch ``CRASH_AFTER - 1``."""


class _Saver(EpochEnd):
    """Pickles the handler's state at every epoch end (by default after every other handler: a
    CheckpointHandler writes the net's and the Trainer's files at priority 0) and records the
    validation loss the estimator computed for that epoch."""

    priority = 10

    def __init__(self, handler: TripwireHandler, path: Path) -> None:
        self.handler, self.path = handler, path
        self.seen: list[float] = []

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.seen.append(float(dict([m.get() for m in estimator.val_metrics])["validation loss"]))
        with open(self.path, "wb") as f:
            pickle.dump(self.handler.state_dict(), f)
        return False


class _Crasher(EpochEnd):
    """The process dying after the checkpoint of epoch ``CRASH_AFTER - 1`` (after every handler)."""

    priority = 20

    def __init__(self) -> None:
        self.epochs = 0

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.epochs += 1
        if self.epochs == CRASH_AFTER:
            raise _Crash()
        return False


def _estimator() -> tuple[Any, Any]:
    """An estimator of a small MLP and 4 batches of 10 (no validation)."""
    est, train, _ = _parts()
    return est, train


def _parts() -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=10, shuffle=False)
    val = gluon.data.DataLoader(gluon.data.ArrayDataset(x[:20], y[:20]), batch_size=10)
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(2, in_units=16))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                    val_metrics=[mx.metric.Loss()], trainer=trainer)
    est.logger.setLevel(logging.ERROR)
    return est, train, val


def _fit(out: Path, ck: Path, resume: bool) -> tuple[TripwireHandler, _Saver]:
    est, train, val = _parts()
    handler = TripwireHandler(out_dir=str(out), rules=["exploding_tensor"])
    state = ck / "tw.pkl"
    if resume:
        with open(state, "rb") as f:
            handler.load_state_dict(pickle.load(f))
    saver = _Saver(handler, state)
    cph = CheckpointHandler(model_dir=str(ck), model_prefix="m", epoch_period=1, resume_from_checkpoint=resume)
    handlers = [handler, cph, saver] if resume else [handler, cph, saver, _Crasher()]
    try:
        est.fit(train, val_data=val, epochs=EPOCHS, event_handlers=handlers)
    except _Crash:
        handler.close("failed")  # (as a crash leaves it; the checkpoint was taken before)
    return handler, saver


def test_a_checkpoint_at_an_epoch_end_holds_that_epoch_and_the_resumed_epochs_stay_aligned(tmp_path: Path) -> None:
    out, ck = tmp_path / "run", tmp_path / "ck"
    ck.mkdir()
    _, first = _fit(out, ck, resume=False)
    resumed, second = _fit(out, ck, resume=True)
    assert len(first.seen) == CRASH_AFTER and len(second.seen) == EPOCHS - CRASH_AFTER
    run = tripwire.open_run(out)
    # every epoch's validation, at its own eval step (step = epoch index)
    assert run.steps(mode="eval") == list(range(EPOCHS))
    steps, values = run.series("validation loss", mode="eval")
    assert steps.tolist() == list(range(EPOCHS))
    np.testing.assert_allclose(values, first.seen + second.seen, rtol=1e-6)
    assert run.series("training accuracy", mode="eval")[0].tolist() == list(range(EPOCHS))
    assert run.steps(mode="train") == list(range(EPOCHS * BATCHES))  # (the training's 24 batches)
    assert run.status == "complete"


def test_a_resumed_fit_plans_the_whole_trainings_length(tmp_path: Path) -> None:
    """The CheckpointHandler lowers max_epoch to the 3 epochs that remain: the planned length is the
    12 steps run before plus those 3 epochs' 12, the training's 24 (it was 12)."""
    out, ck = tmp_path / "run", tmp_path / "ck"
    ck.mkdir()
    first, _ = _fit(out, ck, resume=False)
    assert first.history.planned_steps == EPOCHS * BATCHES
    resumed, _ = _fit(out, ck, resume=True)
    assert resumed.history.planned_steps == EPOCHS * BATCHES
    assert tripwire.open_run(out).planned_steps == EPOCHS * BATCHES


def test_a_fit_by_batches_resumed_by_hand_plans_the_steps_before_it_too(tmp_path: Path) -> None:
    est, train = _estimator()
    handler = TripwireHandler(out_dir=str(tmp_path), rules=["exploding_tensor"])
    est.fit(train, batches=6, event_handlers=[handler])
    state = handler.state_dict()
    est2, train2 = _estimator()
    again = TripwireHandler(out_dir=str(tmp_path), rules=["exploding_tensor"])
    again.load_state_dict(state)
    est2.fit(train2, batches=10, event_handlers=[again])
    assert again.history.planned_steps == 16
    assert tripwire.open_run(tmp_path).steps(mode="train") == list(range(16))


def test_a_checkpoint_taken_before_the_validation_ran_keeps_the_epochs_aligned(tmp_path: Path, caplog) -> None:
    """A state taken at an epoch end before the ValidationHandler's (priority -1000) cannot hold the
    epoch's validation: a WARNING says so, and the resumed epochs keep their eval steps."""
    out, ck = tmp_path / "run", tmp_path / "ck"
    ck.mkdir()
    _Saver.priority = -1500
    try:
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            _, first = _fit(out, ck, resume=False)
            _fit(out, ck, resume=True)
    finally:
        _Saver.priority = 10
    assert any("before the ValidationHandler" in r.getMessage() for r in caplog.records)
    run = tripwire.open_run(out)
    # epoch 2's metrics (the one checkpointed before its validation) are not in the run; the others are
    # at their epochs' steps
    assert run.steps(mode="eval") == [0, 1, 3, 4, 5]
    assert run.series("training accuracy", mode="eval")[0].tolist() == [0, 1, 3, 4, 5]
