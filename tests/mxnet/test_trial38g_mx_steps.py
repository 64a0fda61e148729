"""Trial 38g: a loop that numbered its train steps itself, by 2 (``begin_step(step=2 * i)``), got no
update ratio at any save step, without a word: the weights were copied at the end of step ``s - 1``
for a save at ``s``, a step that never ran. The next step is now taken to be the last one plus the
last stride, and a numbering that breaks its stride says once why a ratio is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import tripwire
from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn


def _fit(out: Path, steps: list[int]) -> dict[int, np.ndarray]:
    mx.random.seed(0)
    rng = np.random.RandomState(0)
    net = nn.Sequential()
    net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hook = TripwireHook(out_dir=str(out), rules=["weight_update_ratio"])
    hook.register_block(net)
    hook.register_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    weights = {}
    for step in steps:
        x = nd.array(rng.randn(16, 4).astype(np.float32))
        y = nd.array(rng.randint(0, 3, 16).astype(np.float32))
        hook.begin_step("train", step=step)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        weights[step] = net[0].weight.data().asnumpy().copy()
        hook.end_step(loss=loss)
        trainer.step(16)
    hook.close()
    return weights


@pytest.mark.parametrize("stride", [2, 5])
def test_steps_numbered_by_a_stride_get_their_update_ratios(tmp_path: Path, stride: int) -> None:
    steps = [stride * i for i in range(25 // stride + 1)]
    weights = _fit(tmp_path / "run", steps)
    ratio = tripwire.open_run(tmp_path / "run").tensor("update_ratio/0.weight")
    assert ratio.steps() == [10, 20]
    for s in (10, 20):
        before, after = weights[s - stride], weights[s]
        expected = np.linalg.norm(after - before) / np.linalg.norm(before)
        assert float(ratio.value(s)) == pytest.approx(expected, rel=1e-5)


def test_a_step_off_the_stride_says_why_its_ratio_is_missing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    steps = [*range(9), *range(10, 21)]  # (step 9 skipped: the save at 10 follows step 8)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _fit(tmp_path / "run", steps)
    said = [r.getMessage() for r in caplog.records if "no update ratio at train step" in r.getMessage()]
    assert said == ["tripwire: no update ratio at train step 10: the weights are copied at the end of the train step "
                    "before a step that saves them, and after step 8 the next was taken to be 9 (the steps' last "
                    "stride); number the train steps evenly (or leave step= out: they are counted), or the ratios are "
                    "recorded only at save steps that come at that stride; said once"]
    assert tripwire.open_run(tmp_path / "run").tensor("update_ratio/0.weight").steps() == [20]
