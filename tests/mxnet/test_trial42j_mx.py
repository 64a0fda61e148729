"""Trial 42j F1/F2.

F1: ``sys.exit(0)`` (or ``sys.exit()``, a ``StopIteration``) leaving ``with hook:`` ended the run
``failed`` with the reason ``SystemExit: 0``, where a Session's ``with`` block and ``close()`` in a
``finally`` block end it as ``close()`` does (``complete``).

F2: a loop numbering its train steps by a stride that does not divide the save interval (steps 0, 4,
8, ... under the default interval 10) has its saves due at skipped steps caught up at the next step
taken (this session's change): weights were saved there, and no update ratio (the weights' copy for
the ratio was made only for a step due by itself)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from mxnet_testlib import TripwireHook, autograd, gluon, nd, nn, tiny_net

RNG = np.random.RandomState(0)
XS = RNG.randn(30, 16, 4).astype(np.float32)
YS = RNG.randint(0, 3, (30, 16)).astype(np.float32)


def _train(hook: TripwireHook, net: nn.Sequential, trainer: gluon.Trainer, steps: list[int]) -> None:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for i, step in enumerate(steps):
        hook.begin_step("train", step)
        with autograd.record():
            loss = loss_fn(net(nd.array(XS[i])), nd.array(YS[i]))
        loss.backward()
        hook.end_step(loss=loss)
        trainer.step(16)


@pytest.mark.parametrize(("end", "status", "reasons"), [
    (SystemExit(0), "complete", {}),
    (SystemExit(), "complete", {}),
    (StopIteration(), "complete", {}),
    (SystemExit(3), "failed", {0: "SystemExit: 3"}),
])
def test_a_with_hook_block_ends_as_close_does(tmp_path: Path, end: BaseException, status: str, reasons: dict) -> None:
    net, trainer = tiny_net()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[])
    hook.register_block(net)
    with pytest.raises(type(end)):
        with hook:
            _train(hook, net, trainer, [0, 1, 2])
            raise end
    run = tripwire.open_run(tmp_path / "run")
    assert (run.status, run.stop_reasons) == (status, reasons)


def test_update_ratios_at_the_saves_a_stride_catches_up(tmp_path: Path) -> None:
    net, trainer = tiny_net()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], include_collections=["optimizer", "weights"])
    hook.register_block(net)
    hook.register_trainer(trainer)
    _train(hook, net, trainer, list(range(0, 120, 4)))
    hook.close()
    run = tripwire.open_run(tmp_path / "run")
    saves = run.tensor("0.weight").steps("train")
    assert saves == [0, 12, 20, 32, 40, 52, 60, 72, 80, 92, 100, 112]
    assert run.tensor("update_ratio/0.weight").steps("train") == saves[1:]


def test_sys_exit_0_inside_an_estimator_fit_in_a_with_handler_block_ends_it_stopped(tmp_path: Path) -> None:
    import logging

    from mxnet.gluon.contrib.estimator import Estimator
    from mxnet.gluon.contrib.estimator.event_handler import BatchEnd

    from tripwire.integrations.mxnet import TripwireHandler

    class Exits(BatchEnd):
        def __init__(self) -> None:
            self.batches = 0

        def batch_end(self, estimator, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.batches += 1
            if self.batches == 3:
                raise SystemExit(0)
            return False

    x = XS[:4].reshape(-1, 4)
    y = YS[:4].reshape(-1)
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16)
    net, trainer = tiny_net()
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    est.logger.setLevel(logging.ERROR)
    with pytest.raises(SystemExit):
        with TripwireHandler(out_dir=str(tmp_path / "run"), rules=[]) as handler:
            est.fit(train, epochs=2, event_handlers=[handler, Exits()])
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.stop_reasons[0].startswith("SystemExit: 0: the program ended itself")
