"""Trial 33g F3: with the ``raise`` action, ``TripwireHook.end_step`` raised ``TrainingStopped`` and
``stopped_by``/``stop_reason`` held the finding and the run ended ``stopped``, but ``hook.should_stop``
stayed False: a loop that caught the exception and then read ``should_stop`` trained on. The raise
stops training too: ``should_stop`` (and the estimator handler's ``stop_training``) is True after it,
as after a ``stop_training`` action; the session's later decisions hold the stop as well."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn
from mxnet.gluon.contrib.estimator import Estimator  # noqa: E402


def always_fires(history: Any, step: int, mode: str) -> str:  # a rule that fires at its first evaluation
    return "fires"


def _net() -> gluon.Block:
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(2, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def _data() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    return nd.array(x), nd.array((x[:, 0] > 0).astype(np.float32))


def test_a_caught_raise_leaves_should_stop_true_and_the_loop_ends(tmp_path: Path) -> None:
    rule = tripwire.FunctionRule(always_fires, actions=["raise"])
    hook = TripwireHook(out_dir=str(tmp_path), rules=[rule], collections=["losses"], save_interval=3)
    net = _net()
    hook.register_block(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = _data()
    steps, caught = 0, []
    for i in range(8):  # a loop that catches the raise and ends on should_stop
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
        loss.backward()
        try:
            hook.end_step(loss=loss)
        except tripwire.TrainingStopped as exc:
            caught.append((exc, hook.should_stop))
        if hook.should_stop:
            break
        trainer.step(8)
        steps += 1
    assert len(caught) == 1 and "always_fires" in str(caught[0][0])
    assert caught[0][1] is True  # (read at once, where the exception was caught)
    assert hook.should_stop is True
    assert steps == 0  # (the rule fires at step 0, the first save step: no update after it)
    assert hook.stopped_by is not None and hook.stopped_by.rule == "always_fires"
    assert hook.state_dict()["should_stop"] is True
    hook.close()
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_the_estimator_handler_sets_stop_training_on_a_raise(tmp_path: Path) -> None:
    rule = tripwire.FunctionRule(always_fires, actions=["raise"])
    handler = TripwireHandler(out_dir=str(tmp_path), rules=[rule], collections=["losses"], save_interval=3)
    x, y = _data()
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16)
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    est.logger.setLevel(logging.ERROR)
    with pytest.raises(tripwire.TrainingStopped, match="always_fires"):
        est.fit(data, epochs=2, event_handlers=[handler])
    assert handler.stop_training is True
    assert handler.hook.should_stop is True
    assert handler.stopped_by is not None and handler.stopped_by.rule == "always_fires"
    assert tripwire.open_run(tmp_path).status == "stopped"
