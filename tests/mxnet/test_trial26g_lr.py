"""Trial 26g, finding 2: the documented way to record the learning rate (``trainer.learning_rate``
before ``trainer.step``) stored a scheduler's rate one step late: ``trainer.step`` increments the
optimizer's update count before it evaluates the scheduler. ``step_learning_rate(trainer)`` is the
rate the coming ``trainer.step`` applies; checked against the rate measured from the weight update."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire.integrations.mxnet import TripwireHook, step_learning_rate

from mxnet_testlib import mx, nd

gluon = mx.gluon
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mxnet.md"
STEPS = 9


def _schedulers() -> dict[str, Any]:
    return {
        "factor": lambda: mx.lr_scheduler.FactorScheduler(step=3, factor=0.5, base_lr=0.2),
        "multifactor": lambda: mx.lr_scheduler.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=0.2),
        "cosine with warm-up": lambda: mx.lr_scheduler.CosineScheduler(
            max_update=STEPS, base_lr=0.2, final_lr=0.01, warmup_steps=3, warmup_begin_lr=0.02),
        "poly": lambda: mx.lr_scheduler.PolyScheduler(max_update=STEPS, base_lr=0.2, pwr=2, final_lr=0.0),
        "none": lambda: None,
    }


def _train(out: Path, scheduler: Any, lr_of: Any) -> tuple[list[float], list[float]]:
    """A tiny SGD fit, the rate passed as a metric (``lr_of(trainer)``) before ``trainer.step``;
    returns the rates stored for each step and those applied, measured from the weight update."""
    rng = np.random.RandomState(0)
    x = rng.randn(32 * STEPS, 6).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    mx.random.seed(0)
    net = gluon.nn.Dense(2, in_units=6)
    net.initialize(mx.init.Xavier())
    options = {"learning_rate": 0.2}
    if scheduler is not None:
        options["lr_scheduler"] = scheduler
    trainer = gluon.Trainer(net.collect_params(), "sgd", options)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = TripwireHook(out_dir=str(out), rules=[], save_interval=1)
    hook.register_block(net)
    applied = []
    with hook:
        for step in range(STEPS):
            if scheduler is None and step == 4:
                trainer.set_learning_rate(0.05)
            xb, yb = nd.array(x[step * 32:(step + 1) * 32]), nd.array(y[step * 32:(step + 1) * 32])
            hook.begin_step("train")
            with mx.autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            hook.end_step(loss=loss, metrics={"lr": lr_of(trainer)})
            w0, g = net.weight.data().asnumpy().copy(), net.weight.grad().asnumpy().copy()
            trainer.step(32)
            w1 = net.weight.data().asnumpy()
            applied.append(float(np.median((w0 - w1) / (g / 32))))
    steps, stored = tripwire.open_run(out).series("lr")
    assert list(steps) == list(range(STEPS))
    return [float(v) for v in stored], applied


@pytest.mark.parametrize("name", list(_schedulers()))
def test_step_learning_rate_stores_the_rate_applied_at_each_step(tmp_path: Path, name: str) -> None:
    stored, applied = _train(tmp_path / "run", _schedulers()[name](), step_learning_rate)
    np.testing.assert_allclose(stored, applied, rtol=1e-4)
    assert len(set(np.round(applied, 6))) > 1  # the rate changed during the fit


def test_trainer_learning_rate_is_one_step_late_under_a_scheduler(tmp_path: Path) -> None:
    """Why the recipe changed: MXNet's own property lags at every change of the schedule."""
    stored, applied = _train(tmp_path / "run", _schedulers()["factor"](), lambda t: t.learning_rate)
    np.testing.assert_allclose(stored[1:], applied[:-1], rtol=1e-4)
    assert not np.allclose(stored, applied, rtol=1e-4)


def test_step_learning_rate_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ConfigError, match=r"step_learning_rate: got str; accepted: a mxnet.gluon.Trainer"):
        step_learning_rate("sgd")
    net = gluon.nn.Dense(1, in_units=2)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    trainer._kv_initialized, trainer._update_on_kvstore = True, True
    trainer._kvstore = SimpleNamespace(type="dist_sync")
    with pytest.raises(ConfigError, match=r"'dist_sync' kvstore.*update_on_kvstore=False"):
        step_learning_rate(trainer)


def test_the_docs_show_the_recipe() -> None:
    text = DOCS.read_text()
    assert 'metrics={"lr": step_learning_rate(trainer)}' in text
    assert not re.search(r'metrics=\{"lr": trainer\.learning_rate\}', text)
