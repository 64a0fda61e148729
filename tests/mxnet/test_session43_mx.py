"""Trial 43i: a model whose branches are used on alternate batches, stepped with
``trainer.step(..., ignore_stale_grad=True)``:

- the hook's ``lr/0`` (``step_learning_rate``) called MXNet's ``FactorScheduler`` at a count the
  next update did not reach (``num_update`` is the highest of the parameters' own counts, which
  such a step leaves as it was), and that scheduler moves its own state when called: every decay
  came one update early, the training changed by being recorded;
- no update ratio was ever recorded ("the Trainer's update count did not change since step 9 (no
  trainer.step between them ...)"), though ``trainer.step`` ran at every step. Updates are now told
  by each parameter's own count: the branch updated at a step has its ratios;
- the unused branch's gradient (a step before's, stale) was stored as the step's own: left out now
  where the step ran no ``trainer.step`` (MXNet's fresh-gradient state then tells it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tripwire
from tripwire.integrations.mxnet import TripwireHook

from mxnet_testlib import autograd, gluon, mx, nd


class Two(gluon.nn.Block):
    def __init__(self) -> None:
        super().__init__()
        self.a = gluon.nn.Dense(3, in_units=5)
        self.b = gluon.nn.Dense(3, in_units=5)

    def forward(self, x: nd.NDArray, which: int) -> nd.NDArray:  # type: ignore[override]
        return self.a(x) if which == 0 else self.b(x)


def _train(out: Path | None, steps: int = 24) -> list[float]:
    """The rate each update applied (plain SGD: the weight change over the gradient)."""
    rs = np.random.RandomState(0)
    mx.random.seed(0)
    net = Two()
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1,
                             "lr_scheduler": mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.1)})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = None
    if out is not None:
        hook = TripwireHook(out_dir=out, save_interval=1, include_collections=["optimizer", "gradients"])
        hook.register_block(net)
        hook.register_trainer(trainer)
    rates = []
    for s in range(steps):
        x, y = nd.array(rs.randn(16, 5).astype("float32")), nd.array(rs.randint(0, 3, 16))
        if hook is not None:
            hook.begin_step()
        with autograd.record():
            loss = loss_fn(net(x, s % 2), y)
        loss.backward()
        if hook is not None:
            hook.end_step(loss=loss)
        block = net.a if s % 2 == 0 else net.b
        w0, g = block.weight.data().asnumpy().copy(), block.weight.grad().asnumpy() / 16
        trainer.step(16, ignore_stale_grad=True)
        rates.append(float(np.median((w0 - block.weight.data().asnumpy())[g != 0] / g[g != 0])))
    if hook is not None:
        hook.close()
    return rates


def test_recording_the_learning_rate_leaves_a_stateful_scheduler_as_it_was(tmp_path: Path) -> None:
    assert np.allclose(_train(tmp_path / "run"), _train(None), rtol=1e-4)


def test_each_branch_has_its_update_ratios_at_the_steps_it_was_updated(tmp_path: Path) -> None:
    _train(tmp_path / "run", steps=9)
    run = tripwire.open_run(tmp_path / "run")
    # (a ratio at step s is the update made by step s-1's trainer.step: branch a at even steps, b at odd)
    assert list(run.series("update_ratio/a.weight")[0]) == [1, 3, 5, 7]
    assert list(run.series("update_ratio/b.weight")[0]) == [2, 4, 6, 8]
    assert all(v > 0 for v in run.series("update_ratio/a.weight")[1])


def test_a_branch_not_used_in_a_step_has_no_gradient_record_there(tmp_path: Path) -> None:
    """Trial 43i F3: the unused branch's gradient, a step before's and not applied by
    ``trainer.step(..., ignore_stale_grad=True)``, was stored as the step's own."""
    _train(tmp_path / "run", steps=6)
    run = tripwire.open_run(tmp_path / "run")
    assert list(run.series("gradients/a.weight", "l2")[0]) == [0, 2, 4]
    assert list(run.series("gradients/b.weight", "l2")[0]) == [1, 3, 5]


def test_lr_is_the_rate_each_step_applies(tmp_path: Path) -> None:
    """Trial 43k: under ``ignore_stale_grad`` ``lr/0`` (the scheduler asked at ``num_update + 1``) was
    one update ahead at every step that updated the less-updated branch, which leaves ``num_update``
    as it was. It is now asked at the count the coming ``trainer.step`` reaches."""
    rates = _train(tmp_path / "run", steps=12)
    steps, lrs = tripwire.open_run(tmp_path / "run").series("lr/0")
    assert list(steps) == list(range(12))
    assert np.allclose(lrs, rates, rtol=1e-4), (lrs, rates)


def test_a_resume_records_the_same_ratios_as_the_uninterrupted_training(tmp_path: Path) -> None:
    """Trial 43k: after a resume from ``state_dict``, the branch not updated in the first resumed step
    read an update ratio of 0.0 (the loaded weights copy holds no parameter's own update count)."""
    import pickle

    rs = np.random.RandomState(0)
    data = [(nd.array(rs.randn(16, 5).astype("float32")), nd.array(rs.randint(0, 3, 16))) for _ in range(10)]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def build(out: Path) -> tuple:
        mx.random.seed(0)
        net = Two()
        net.initialize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        hook = TripwireHook(out_dir=out, save_interval=1, include_collections=["optimizer"])
        hook.register_block(net)
        hook.register_trainer(trainer)
        return net, trainer, hook

    def steps(net: Two, trainer: gluon.Trainer, hook: TripwireHook, which: range) -> None:
        for s in which:
            x, y = data[s]
            hook.begin_step()
            with autograd.record():
                loss = loss_fn(net(x, s % 2), y)
            loss.backward()
            hook.end_step(loss=loss)
            trainer.step(16, ignore_stale_grad=True)

    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    net, trainer, hook = build(whole)
    steps(net, trainer, hook, range(10))
    hook.close()
    net, trainer, hook = build(resumed)
    steps(net, trainer, hook, range(5))
    net.save_parameters(str(tmp_path / "ck.params"))
    trainer.save_states(str(tmp_path / "ck.states"))
    state = pickle.dumps(hook.state_dict())
    hook.close()
    net, trainer, hook = build(resumed)
    net.load_parameters(str(tmp_path / "ck.params"))
    trainer.load_states(str(tmp_path / "ck.states"))
    hook.load_state_dict(pickle.loads(state))
    steps(net, trainer, hook, range(5, 10))
    hook.close()
    for name in ("update_ratio/a.weight", "update_ratio/b.weight"):
        a, b = tripwire.open_run(whole).series(name), tripwire.open_run(resumed).series(name)
        assert list(a[0]) == list(b[0]) and np.allclose(a[1], b[1], rtol=1e-5), name
