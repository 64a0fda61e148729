"""Trial 27h, findings 8 and 6.

F8: every integration tells why training stopped the same way: the MXNet hook and the estimator
handler had ``findings``, ``stopped_by``, ``history`` and ``out_dir`` but no ``stop_reason`` (XGBoost's
callback and ``Session.why_stopped`` have it): a platform wrapper could not read "why did it stop".

F6: MXNet stores the weights of a step from before that step's update (``end_step`` comes before
``trainer.step``), where Lightning and Keras store them after it; docs/mxnet.md says so, and what it
means for ``exploding_tensor`` on weights (a weight an update turns NaN is seen at the next step
that saves weights). These tests pin that documented behaviour."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.integrations.mxnet import TripwireHandler
from tripwire.tune._trial import Trial

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

_ATTRIBUTES = ("findings", "stopped_by", "stop_reason", "history", "out_dir")


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


def _loop(hook: TripwireHook, steps: int = 6, epochs: int = 1) -> gluon.Block:
    x, y = _data()
    net = _net()
    hook.register_block(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(epochs):
        for i in range(steps):
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
            loss.backward()
            hook.end_step(loss=loss)
            if hook.should_stop:
                return net
            trainer.step(8)
        hook.begin_step("eval", summary=True)
        hook.end_step(metrics={"val_loss": float(loss_fn(net(x), y).mean().asscalar())})
        if hook.should_stop:
            return net
    return net


# ------------------------------------------------------------------------------------- F8: the hook
def test_the_hook_has_every_integrations_result_attributes(tmp_path: Path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path / "run"))
    handler = TripwireHandler(out_dir=str(tmp_path / "handler"))
    for obj in (hook, handler):
        missing = [a for a in _ATTRIBUTES if not hasattr(obj, a)]
        assert not missing, (type(obj).__name__, missing)
    assert hook.stop_reason is None and handler.stop_reason is None
    hook.close()
    handler.close()


def test_a_hook_that_completes_has_no_stop_reason(tmp_path: Path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path / "run"), collections=["losses"])
    with hook:
        _loop(hook)
    assert not hook.should_stop and hook.stop_reason is None
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_a_rules_stop_is_the_hooks_stop_reason_and_the_runs(tmp_path: Path) -> None:
    rule = tripwire.FunctionRule(always_fires, actions=["log", "stop_training"])
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[rule], collections=["losses"], save_interval=2)
    with hook:
        _loop(hook)
    assert hook.should_stop and hook.stopped_by is not None
    assert hook.stop_reason == str(hook.stopped_by) and "always_fires" in hook.stop_reason
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.end_markers[0]["stop_reason"] == hook.stop_reason


def test_the_tuners_stop_is_the_hooks_stop_reason(tmp_path: Path) -> None:
    class Rungs:
        def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
            return step >= 1, "stopped at the first rung"

    trial = Trial(3, {"lr": 0.1}, min_resource=1, max_resource=9, channel=Rungs())
    hook = TripwireHook(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="val_loss", collections=["losses"])
    with hook:
        _loop(hook, epochs=3)
    assert hook.trial_stopped and hook.stopped_by is None
    assert hook.stop_reason is not None and hook.stop_reason.startswith("the tuner stopped the trial after epoch 1 (val_loss=")
    assert tripwire.open_run(tmp_path / "run").end_markers[0]["stop_reason"] == hook.stop_reason


# ---------------------------------------------------------------------------------- F8: the handler
def _fit(handler: TripwireHandler, epochs: int = 2) -> None:
    from mxnet.gluon.contrib.estimator import Estimator

    x, y = _data()
    net = _net()
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x.asnumpy(), y.asnumpy()), batch_size=8, shuffle=False)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    est.logger.setLevel(logging.WARNING)
    est.fit(data, epochs=epochs, event_handlers=[handler])


def test_the_handlers_stop_reason_is_the_rules_stop_or_none(tmp_path: Path) -> None:
    handler = TripwireHandler(out_dir=str(tmp_path / "complete"), collections=["losses"])
    _fit(handler)
    assert handler.stopped_by is None and handler.stop_reason is None

    rule = tripwire.FunctionRule(always_fires, actions=["log", "stop_training"])
    handler = TripwireHandler(out_dir=str(tmp_path / "stopped"), rules=[rule], collections=["losses"], save_interval=3)
    _fit(handler)
    assert handler.stop_training and handler.stopped_by is not None
    assert handler.stop_reason == str(handler.stopped_by) and "always_fires" in handler.stop_reason
    assert tripwire.open_run(tmp_path / "stopped").end_markers[0]["stop_reason"] == handler.stop_reason


# ------------------------------------------------------------------------------- F6: weights' steps
def test_the_weights_of_a_step_are_those_before_its_update(tmp_path: Path) -> None:
    # step 0 holds the initial weights (Lightning and Keras: after update 0); step 1 the weights after update 0
    hook = TripwireHook(out_dir=str(tmp_path / "run"), collections=["weights"], save_interval=1)
    x, y = _data()
    net = _net()
    hook.register_block(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    norms = []
    for i in range(2):
        norms.append(float(np.linalg.norm(net[0].weight.data().asnumpy().astype(np.float64))))
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
        loss.backward()
        hook.end_step(loss=loss)
        trainer.step(8)
    hook.close()
    assert hook.history.series("0.weight", "l2")[1] == pytest.approx(norms, rel=1e-6)
    assert norms[0] != pytest.approx(norms[1], rel=1e-6)


def test_a_weight_an_update_turns_nan_is_found_at_the_next_step(tmp_path: Path) -> None:
    # docs/mxnet.md: exploding_tensor on weights names the step after the update that broke them
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=["exploding_tensor"], collections=["weights"],
                        save_interval=1, actions=["log", "stop_training"])
    x, y = _data()
    net = _net()
    hook.register_block(net)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with hook:
        for i in range(4):
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(x[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
            loss.backward()
            hook.end_step(loss=loss)
            if hook.should_stop:
                break
            if i == 1:  # "the update of step 1" turns a weight NaN
                w = net[0].weight.data()
                w[0, 0] = float("nan")
    assert hook.stopped_by is not None and hook.stopped_by.rule == "exploding_tensor"
    assert hook.stopped_by.step == 2 and "0.weight" in hook.stopped_by.message
