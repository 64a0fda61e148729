"""Trial 36f: a checkpoint taken after the step before a save step (the documented recipe, every 10
steps with the default save interval 10) lost that save step's update ratios on resume: the weights
copied at the end of the step before, ``w(s-1)`` of ``||w(s) - w(s-1)|| / ||w(s-1)||``, were not in
``state_dict()``. They are now, and a resumed training stores the ratios of the uninterrupted one."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

import tripwire
from mxnet_testlib import TripwireHook, autograd, gluon, nd, nn, tiny_net

RNG = np.random.RandomState(0)
XS = RNG.randn(20, 16, 4).astype(np.float32)
YS = RNG.randint(0, 3, (20, 16)).astype(np.float32)


def _hook(out: Path, net: nn.Sequential, trainer: gluon.Trainer) -> TripwireHook:
    hook = TripwireHook(out_dir=str(out), rules=["default", "weight_update_ratio"])
    hook.register_block(net)
    hook.register_trainer(trainer)
    return hook


def _train(hook: TripwireHook, net: nn.Sequential, trainer: gluon.Trainer, steps: range,
           checkpoint_dir: Path | None = None) -> None:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in steps:
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(nd.array(XS[step])), nd.array(YS[step]))
        loss.backward()
        hook.end_step(loss=loss)
        trainer.step(16)
        if checkpoint_dir is not None and step == 9:  # every 10 steps, between steps (docs/mxnet.md)
            net.save_parameters(str(checkpoint_dir / "ck.params"))
            trainer.save_states(str(checkpoint_dir / "ck.states"))
            (checkpoint_dir / "ck.pkl").write_bytes(pickle.dumps({"tripwire": hook.state_dict(), "step": step + 1}))


def test_a_checkpoint_before_a_save_step_keeps_its_update_ratios(tmp_path: Path) -> None:
    net, trainer = tiny_net()
    full = _hook(tmp_path / "full", net, trainer)
    _train(full, net, trainer, range(20))
    full.close()

    net, trainer = tiny_net()
    crashed = _hook(tmp_path / "run", net, trainer)
    _train(crashed, net, trainer, range(10), checkpoint_dir=tmp_path)
    crashed.close("failed")  # (the process died right after the checkpoint)

    net, trainer = tiny_net()  # a new process: the net and the Trainer from their files
    net.load_parameters(str(tmp_path / "ck.params"))
    trainer.load_states(str(tmp_path / "ck.states"))
    resumed = _hook(tmp_path / "run", net, trainer)
    ck = pickle.loads((tmp_path / "ck.pkl").read_bytes())
    assert set(ck["tripwire"]["update_ratio_weights"]["values"]) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    resumed.load_state_dict(ck["tripwire"])
    _train(resumed, net, trainer, range(ck["step"], 20))
    resumed.close()

    a, b = tripwire.open_run(tmp_path / "full"), tripwire.open_run(tmp_path / "run")
    for name in ("update_ratio/0.weight", "update_ratio/1.bias"):
        steps, values = b.tensor(name).series("raw")
        assert list(steps) == [10]
        np.testing.assert_allclose(values, a.tensor(name).series("raw")[1], rtol=1e-6)


def test_a_checkpoint_between_other_steps_holds_no_weights(tmp_path: Path) -> None:
    net, trainer = tiny_net()
    hook = _hook(tmp_path / "run", net, trainer)
    _train(hook, net, trainer, range(5))
    assert "update_ratio_weights" not in hook.state_dict()  # (step 5 saves nothing)
    hook.close()
