"""TripwireHook and TripwireHandler: validation, hooks driven by hand, capture of each kind."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, TrainingStopped
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

ALL = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs"]


class Net(gluon.Block):
    """Dense(relu) -> Dense -> tanh, plus a frozen embedding-like parameter block."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Dense(6, activation="relu", in_units=4)
        self.fc2 = nn.Dense(3, in_units=6)
        self.act = nn.Activation("tanh")
        self.frozen = nn.Dense(3, in_units=3, use_bias=False)
        self.frozen.weight.grad_req = "null"

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.frozen(self.act(self.fc2(self.fc1(x))))


def _net() -> Net:
    mx.random.seed(0)
    net = Net()
    net.initialize(mx.init.Xavier())
    return net


def _one_step(hook: TripwireHook, net: gluon.Block, mode: str = "train", **end: object) -> tripwire.Decision:
    x = nd.array(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32))
    hook.begin_step(mode)
    with autograd.record():
        out = net(x)
        loss = (out ** 2).sum(axis=1)
    loss.backward()
    return hook.end_step(loss=loss, **end)


# ------------------------------------------------------------------------------------ validation
def test_register_block_rejects_non_blocks(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="register_block: got list; accepted: a mxnet.gluon.Block"):
        hook.register_block([1, 2])
    with pytest.raises(ConfigError, match=r"register_block.name: got ''; accepted"):
        hook.register_block(_net(), name="")


def test_register_block_names_must_be_distinct(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path))
    net = _net()
    hook.register_block(net)
    with pytest.raises(ConfigError, match="already registered"):
        hook.register_block(net)
    with pytest.raises(ConfigError, match=r"register_block.name: '' is already used"):
        hook.register_block(_net())
    hook.register_block(_net(), name="teacher")  # a distinct name is fine


def test_register_loss_and_end_step_validation(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1)
    with pytest.raises(ConfigError, match="register_loss: got function; accepted: a mxnet.gluon.loss.Loss"):
        hook.register_loss(lambda a, b: a)
    with pytest.raises(RuntimeError, match="no step in progress; call begin_step"):
        hook.end_step()
    hook.begin_step("train")
    with pytest.raises(ConfigError, match=r"end_step.loss: got .high.; accepted: an NDArray \(per-sample losses: their mean\), "
                                          r"a list of NDArrays \(one per device\) or a number"):
        hook.end_step(loss="high")
    # (trial 30d: a failed end_step leaves the step open, nothing of it recorded: end it with valid arguments)
    with pytest.raises(RuntimeError, match="train step 0 is still in progress"):
        hook.begin_step("train")
    hook.end_step()
    hook.begin_step("train")
    with pytest.raises(ConfigError, match=r"end_step.metrics\['acc'\]: got an NDArray of shape \(2,\); accepted: one element"):
        hook.end_step(metrics={"acc": nd.ones(2)})
    hook.end_step()
    with pytest.raises(ConfigError, match="mode: got 'training'"):
        hook.begin_step("training")
    hook.close()


def test_unknown_override_and_bad_priority() -> None:
    with pytest.raises(ConfigError, match="unknown argument 'save_intervall'; did you mean 'save_interval'"):
        TripwireHook(save_intervall=3)
    with pytest.raises(ConfigError, match="priority: got 'first'; accepted: a number"):
        TripwireHandler(priority="first")
    with pytest.raises(ConfigError, match=r"rules\[0\]: unknown rule 'no_such_rule'"):
        TripwireHook(rules=["no_such_rule"])


# ----------------------------------------------------------------------------------- capture
def test_captures_every_kind_with_numpy_equal_values(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=ALL, save_interval=1)
    net = _net()
    hook.register_block(net)
    _one_step(hook, net, metrics={"accuracy": 0.5, "lr": nd.array([0.1])})
    h = hook.history
    cols = h.collections()
    cols = {k: sorted(v) for k, v in cols.items()}
    assert cols["weights"] == ["fc1.weight", "fc2.weight", "frozen.weight"]
    assert cols["biases"] == ["fc1.bias", "fc2.bias"]
    # a frozen parameter (grad_req null) has a weight but no gradient, and does not crash
    assert cols["gradients"] == ["gradients/fc1.bias", "gradients/fc1.weight", "gradients/fc2.bias", "gradients/fc2.weight"]
    assert cols["activations"] == ["act/output", "fc1.act/output", "fc2/output", "frozen/output"]
    assert cols["activation_inputs"] == ["act/input", "fc1.act/input"]
    assert cols["relu_outputs"] == ["fc1.act/output"]  # one tensor, in two collections, saved once
    assert cols["losses"] == ["loss"] and cols["metrics"] == ["accuracy", "lr"]
    assert h.series("fc1.act/output", "zero_fraction")[1].shape == (1,)
    # values equal numpy on the same arrays
    # (trial 27h: the gradient of the mean loss, param.grad() over the loss's 8 elements, not their sum)
    grad = net.fc1.weight.grad().asnumpy().astype(np.float64) / 8
    assert h.value("gradients/fc1.weight", "l2", 0) == pytest.approx(np.linalg.norm(grad), rel=1e-6)
    w = net.fc2.weight.data().asnumpy().astype(np.float64)
    assert h.value("fc2.weight", "std", 0) == pytest.approx(w.std(), rel=1e-9)
    x = nd.array(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32))
    pre = net.fc1(x)  # relu output of fc1
    assert h.value("fc1.act/output", "zero_fraction", 0) == pytest.approx(float((pre.asnumpy() == 0).mean()))
    out = net(x).asnumpy().astype(np.float64)
    assert h.value("loss", "raw", 0) == pytest.approx((out ** 2).sum(axis=1).mean(), rel=1e-6)
    assert h.value("accuracy", "raw", 0) == 0.5 and h.value("lr", "raw", 0) == pytest.approx(0.1)
    hook.close()


def test_gradients_are_read_before_trainer_step(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=["weights", "gradients"], save_interval=1)
    net = _net()
    hook.register_block(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    before = net.fc1.weight.data().asnumpy().astype(np.float64)
    _one_step(hook, net)
    trainer.step(8)
    assert hook.history.value("fc1.weight", "l2", 0) == pytest.approx(np.linalg.norm(before), rel=1e-9)
    assert not np.allclose(net.fc1.weight.data().asnumpy(), before)
    hook.close()


def test_forward_hooks_only_on_save_steps(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=["activations"], save_interval=2)
    net = _net()
    hook.register_block(net)
    seen = []
    for step in range(4):
        hook.begin_step("train")
        seen.append(len(net.fc2._forward_hooks))
        with autograd.record():
            out = net(nd.ones((2, 4)))
        out.backward()
        hook.end_step()
        assert len(net.fc2._forward_hooks) == 0  # detached after each step
    assert seen == [1, 0, 1, 0]
    assert hook.history.steps("train") == [0, 2]
    hook.close()


def test_register_loss_captures_the_mean_over_calls(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1)
    loss_fn = gluon.loss.L2Loss()
    hook.register_loss(loss_fn)
    hook.begin_step("train")
    a = loss_fn(nd.array([[1.0], [3.0]]), nd.zeros((2, 1)))  # per-sample 0.5, 4.5
    b = loss_fn(nd.array([[2.0]]), nd.zeros((1, 1)))  # 2.0
    hook.end_step()
    assert hook.history.value("loss", "raw", 0) == pytest.approx(float((a.sum() + b.sum()).asscalar()) / 3)
    hook.close()


def test_registered_loss_is_kept_as_an_ndarray_between_save_steps(tmp_path, monkeypatch) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=["losses", "weights"], save_interval=3)
    net = _net()
    hook.register_block(net)
    loss_fn = gluon.loss.L2Loss()
    hook.register_loss(loss_fn)
    copies: list[str] = []
    for name in ("asnumpy", "asscalar"):  # the host copies of an NDArray, counted
        original = getattr(nd.NDArray, name)
        monkeypatch.setattr(nd.NDArray, name, lambda self, *a, _o=original, _n=name, **k: copies.append(_n) or _o(self, *a, **k))
    means = []
    for step in range(5):
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(nd.ones((2, 4)) * (step + 1)), nd.zeros((2, 3)))
        loss.backward()
        means.append(loss.mean())
        copies_before = len(copies)
        hook.end_step()
        if step in (1, 2):  # not saved: the mean stays an NDArray, nothing reaches the host
            assert len(copies) == copies_before and all(isinstance(t, nd.NDArray) for _, _, t in hook.session.kept)
    assert [s for s, _, _ in hook.session.kept] == [4]
    monkeypatch.undo()
    hook.close()  # writes the last kept value
    steps, values = hook.history.series("loss")
    assert steps.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(values, [float(m.asscalar()) for m in means], rtol=1e-6)
    assert hook.history.series("fc1.weight", "l2")[0].tolist() == [0, 3]


def test_eval_mode_has_no_parameters_and_a_separate_step_count(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=["losses", "gradients", "weights"], save_interval=1)
    net = _net()
    hook.register_block(net)
    _one_step(hook, net, "train")
    _one_step(hook, net, "eval")
    _one_step(hook, net, "eval")
    h = hook.history
    assert h.steps("train") == [0] and h.steps("eval") == [0, 1]
    assert h.value("gradients/fc1.weight", "l2", 0, mode="eval") is None
    assert h.value("loss", "raw", 1, mode="eval") is not None
    hook.close()


def test_an_epoch_summary_step_is_saved_whatever_the_interval(tmp_path) -> None:
    # validation metrics offered once per epoch with begin_step("eval"): the default interval saved
    # epochs 0 and 10 of 12 without a word (the overfit rule read two values); summary=True saves each
    hook = TripwireHook(out_dir=str(tmp_path))
    for epoch in range(12):
        hook.begin_step("eval", summary=True)
        hook.end_step(metrics={"val_loss": 1.0 / (epoch + 1)})
    with hook.step("eval", summary=True) as s:
        s.metrics = {"val_loss": 0.01}
    hook.close()
    steps, values = tripwire.open_run(str(tmp_path)).series("val_loss", mode="eval")
    assert steps.tolist() == list(range(13)) and values[-1] == pytest.approx(0.01)


def test_a_metric_named_loss_goes_to_losses(tmp_path, caplog) -> None:
    # trial 19d: end_step(metrics={"val_loss": vl}), as docs/mxnet.md says, put val_loss in
    # 'metrics' where docs/config.md and docs/rules.md put it in 'losses' (as Lightning does): with
    # collections [losses] it was dropped
    import logging

    hook = TripwireHook(out_dir=str(tmp_path), collections=["losses"], save_interval=2)
    net = _net()
    hook.register_block(net)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for i in range(4):  # steps 1 and 3 save nothing: aux_loss is kept as the loss is
            _one_step(hook, net, metrics={"Aux_Loss": nd.array([0.5 + i]), "acc": 0.5})
        hook.begin_step("eval", summary=True)
        hook.end_step(metrics={"val_loss": nd.array([0.25]), "val_acc": 0.75})
        hook.close()
    run = tripwire.open_run(str(tmp_path))
    assert sorted(run.collections()["losses"]) == ["Aux_Loss", "loss", "val_loss"]
    assert "metrics" not in run.collections()
    assert run.series("val_loss", mode="eval")[1].tolist() == [0.25]
    steps, values = run.series("Aux_Loss")
    assert steps.tolist() == [0, 1, 2, 3] and values.tolist() == [0.5, 1.5, 2.5, 3.5]
    said = [r.getMessage() for r in caplog.records if "went to no collection" in r.getMessage()]
    assert len(said) == 1 and "(acc, val_acc)" in said[0], said
    with pytest.raises(ConfigError, match=r"end_step.metrics: got list; accepted: a mapping"):
        hook = TripwireHook(out_dir=str(tmp_path / "bad"), save_interval=2)
        _one_step(hook, net)
        _one_step(hook, net, metrics=[("val_loss", 1.0)])  # a step that saves nothing checks them too
    hook.close()


def test_hybridized_block_keeps_parameters_and_gradients(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), collections=["gradients", "activations"], save_interval=1)
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(5, activation="relu", in_units=4), nn.Dense(2, in_units=5))
    net.initialize()
    net.hybridize()
    hook.register_block(net)
    for _ in range(2):
        hook.begin_step()
        with autograd.record():
            out = net(nd.ones((3, 4)))
        out.backward()
        hook.end_step()
    assert "gradients/0.weight" in hook.history.tensor_names()
    # children of a hybridized block run inside one graph: Gluon runs no forward hooks for them
    assert "activations" not in hook.history.collections()
    hook.close()


def test_raise_action_and_stop_flag(tmp_path) -> None:
    def always(history, step, mode):  # noqa: ANN001, ANN202
        return "fires" if step >= 1 else None

    hook = TripwireHook(out_dir=str(tmp_path / "a"), save_interval=1,
                        rules=[tripwire.FunctionRule(always, actions=["stop_training"])])
    net = _net()
    hook.register_block(net)
    assert not _one_step(hook, net).stop and not hook.should_stop
    decision = _one_step(hook, net)
    assert decision.stop and hook.should_stop
    assert hook.stopped_by is not None and hook.stopped_by.rule == "always" and [f.rule for f in hook.findings] == ["always"]
    hook.close()
    assert tripwire.open_run(tmp_path / "a").status == "stopped"

    raising = TripwireHook(out_dir=str(tmp_path / "b"), save_interval=1,
                           rules=[tripwire.FunctionRule(always, actions=["raise"])])
    raising.register_block(net)
    with raising:
        _one_step(raising, net)
        with pytest.raises(TrainingStopped, match="always at step 1"):
            _one_step(raising, net)


def test_step_context_manager_and_state_dict(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1)
    for _ in range(3):
        with hook.step("train") as s:
            s.loss = nd.array([1.0, 2.0])
            s.metrics = {"acc": 0.25}
        assert s.decision is not None and not s.decision.stop
    assert hook.history.series("loss")[1].tolist() == [1.5, 1.5, 1.5]
    state = hook.state_dict()
    other = TripwireHook(out_dir=str(tmp_path / "resumed"))
    other.load_state_dict(state)
    assert other.begin_step("train").step == 3
    with pytest.raises(ZeroDivisionError):
        with hook.step("train"):
            raise ZeroDivisionError
    hook.close()
    other.close()


def test_handler_events_driven_by_hand(tmp_path) -> None:
    """The estimator's calls, made by hand against a minimal estimator-like object."""

    class FakeMetric:
        def __init__(self, name: str, value: float, n: int) -> None:
            self.name, self.value, self.num_inst = name, value, n

        def get(self) -> tuple[str, float]:
            return self.name, self.value

    class FakeEstimator:
        def __init__(self, net: gluon.Block) -> None:
            self.net = net
            self.train_metrics = [FakeMetric("training accuracy", 0.5, 10)]
            self.val_metrics = [FakeMetric("validation accuracy", 0.4, 5), FakeMetric("validation unused", 0.0, 0),
                                FakeMetric("validation softmaxcrossentropyloss", 0.7, 5)]

    def stop_at_two(history, step, mode):  # noqa: ANN001, ANN202
        return "stop" if mode == "train" and step == 2 else None

    handler = TripwireHandler(out_dir=str(tmp_path), save_interval=1, collections=["losses", "metrics", "gradients"],
                              rules=[tripwire.FunctionRule(stop_at_two, actions=["stop_training"])])
    est = FakeEstimator(_net())
    handler.train_begin(est)
    handler.epoch_begin(est)
    results = []
    for _ in range(3):
        handler.batch_begin(est, batch=None)
        with autograd.record():
            loss = (est.net(nd.ones((2, 4))) ** 2).sum(axis=1)
        loss.backward()
        results.append(handler.batch_end(est, batch=None, pred=None, label=None, loss=[loss]))
    assert results == [False, False, True] and handler.epoch_end(est) is True
    handler.train_end(est)
    h = handler.history
    assert h.steps("train") == [0, 1, 2] and "gradients/fc1.weight" in h.tensor_names()
    assert h.value("training accuracy", "raw", 0, mode="eval") == 0.5
    assert h.value("validation accuracy", "raw", 0, mode="eval") == pytest.approx(0.4)
    assert "validation unused" not in h.tensor_names()
    # trial 19d: the estimator's validation loss is a loss (collection 'losses'), as on the hook
    cols = h.collections()
    assert "validation softmaxcrossentropyloss" in cols["losses"] and "validation accuracy" in cols["metrics"]
    assert handler.stopped_by is not None and handler.stopped_by.rule == "stop_at_two"
    assert str(handler.out_dir) == str(tmp_path)  # as on the hook and the other integrations


def test_a_hook_left_open_is_closed_at_exit_before_mxnet_shuts_down(tmp_path) -> None:
    # the exit-time close did MXNet array work after MXNet's own exit handler had shut its engine
    # down (registered first, run last): 3 of 12 processes hung for ever (a fresh user's report)
    import subprocess
    import sys

    import tripwire

    code = (
        "from tripwire.integrations.mxnet import TripwireHook\n"  # (its numpy shim first, then mxnet)
        "from mxnet import autograd, gluon, nd\n"
        "net = gluon.nn.Sequential()\n"
        "net.add(gluon.nn.Dense(8, activation='relu'), gluon.nn.Dense(10))\n"
        "net.initialize()\n"
        "trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})\n"
        "loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()\n"
        "import sys\n"
        "hook = TripwireHook(out_dir=sys.argv[1])\n"
        "hook.register_block(net)\n"
        "x = nd.random.uniform(shape=(16, 64)); y = nd.array([i % 10 for i in range(16)])\n"
        "for i in range(14):\n"
        "    hook.begin_step('train')\n"
        "    with autograd.record():\n"
        "        loss = loss_fn(net(x), y)\n"
        "    loss.backward()\n"
        "    hook.end_step(loss=loss)\n"
        "    trainer.step(16)\n"
    )
    for k in range(4):
        out = tmp_path / f"run{k}"
        done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        run = tripwire.open_run(out)
        assert run.status == "failed" and run.series("loss")[0].tolist() == list(range(14))


def test_a_step_that_saves_only_another_collection_keeps_the_loss(tmp_path) -> None:
    # trial 16e: with weights saved every 4 steps and losses every 10, the loss of steps 4, 8, ... (a
    # plan that saves weights only) was dropped: a NaN loss at step 4 was never reported
    cfg = {"save": {"interval": 10}, "collections": {"losses": None, "weights": {"save": {"interval": 4}}},
           "rules": [{"name": "exploding_tensor", "actions": ["record"]}]}
    hook = TripwireHook(cfg, out_dir=str(tmp_path))
    net = _net()
    hook.register_block(net)
    loss_fn = gluon.loss.L2Loss()
    for step in range(13):
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(nd.ones((2, 4))), nd.zeros((2, 3)))
        loss.backward()
        hook.end_step(loss=loss * float("nan") if step == 4 else loss)
    hook.close()
    run = tripwire.open_run(tmp_path)
    assert run.tensor("loss").steps() == list(range(13))
    assert run.tensor("fc1.weight").steps() == [0, 4, 8, 12]
    assert [(f.rule, f.step) for f in hook.findings] == [("exploding_tensor", 4)]


def test_a_zero_dimensional_loss_is_a_loss(tmp_path) -> None:
    # trial 17e: end_step(loss=nd.array(8.0)) raised MXNet's "Operator mean inferring shapes failed"
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1)
    hook.begin_step("train")
    hook.end_step(loss=nd.array(8.0))
    hook.begin_step("train")
    hook.end_step(loss=[nd.array(2.0), nd.array([4.0, 6.0])])  # one per device: the mean of every value
    hook.close()
    assert tripwire.open_run(tmp_path).series("loss")[1].tolist() == [8.0, 4.0]


def test_a_hook_with_no_block_registered_says_so_at_its_first_save_step(tmp_path, caplog) -> None:
    # trial 17e: the default rules' gradient checks read nothing for 300 steps, said only at close()
    import logging

    hook = TripwireHook(out_dir=str(tmp_path), rules=["default"])
    net = _net()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _one_step(hook, net)  # step 0: a save step
        said = [r.getMessage() for r in caplog.records if "no block is registered" in r.getMessage()]
        for _ in range(11):
            _one_step(hook, net)
    hook.close()
    assert said == ["tripwire: no block is registered (hook.register_block(net)), so gradients is not captured and "
                    "'exploding_gradient', 'vanishing_gradient' read nothing; register the network before its first "
                    "step"]
    assert len([r for r in caplog.records if "no block is registered" in r.getMessage()]) == 1
