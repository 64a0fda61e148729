"""Real Gluon training on scikit-learn digits: healthy runs finish, planted faults stop early."""

from __future__ import annotations

import logging

import pytest

import tripwire
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, digits, gluon, mlp, mx, stop_rules, train

EPOCHS = 5  # 30 batches of 50 per epoch: 150 planned steps


def _hook(tmp_path, **overrides: object) -> TripwireHook:
    return TripwireHook(out_dir=str(tmp_path), rules=stop_rules(), **overrides)


def test_healthy_mlp_trains_to_completion(tmp_path) -> None:
    hook = _hook(tmp_path)
    net = mlp()
    hook.register_block(net)
    result = train(hook, net, lr=0.1, epochs=EPOCHS)
    hook.close()
    assert result["stopped"] is False and result["steps"] == 30 * EPOCHS
    assert result["accuracy"] > 0.9
    assert hook.findings == [] and hook.stopped_by is None
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete"
    assert sorted(run.collections()) == ["losses", "relu_outputs"]  # what the three rules need


def test_huge_learning_rate_stops_early(tmp_path) -> None:
    hook = _hook(tmp_path)
    net = mlp()
    hook.register_block(net)
    result = train(hook, net, lr=1e8, epochs=EPOCHS)
    hook.close()
    assert result["stopped"] is True and result["steps"] <= 15  # within 10% of the planned 150 steps
    assert hook.stopped_by is not None and hook.stopped_by.rule == "exploding_tensor"
    assert "loss" in hook.stopped_by.tensors
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_dead_relu_from_a_large_negative_bias_stops_early(tmp_path) -> None:
    hook = _hook(tmp_path)
    net = mlp(bias=-10.0)
    hook.register_block(net)
    result = train(hook, net, lr=0.1, epochs=EPOCHS)
    hook.close()
    assert result["stopped"] is True and result["steps"] < 30 * EPOCHS // 2
    assert hook.stopped_by is not None and hook.stopped_by.rule == "dead_relu"
    assert set(hook.stopped_by.tensors) == {"0.act/output", "1.act/output"}


def test_a_hybridized_net_is_named_at_the_first_save_step_with_the_rules_left_without_input(
        tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 17d: with net.hybridize() dead_relu never judged a net of dead ReLUs, and the only word
    came at close(), blaming "a model with no ReLU layer"."""
    hook = TripwireHook(out_dir=str(tmp_path), rules=[{"name": "dead_relu", "actions": ["stop_training"]}])
    net = mlp(bias=-10.0)
    net.hybridize()
    hook.register_block(net)
    seen: list[list[str]] = []
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        train(hook, net, lr=0.1, epochs=1, on_step=lambda n: seen.append([r.getMessage() for r in caplog.records]))
        hook.close()
    [said] = [m for m in seen[0] if "hybridized" in m]  # logged by the first step (a save step)
    assert "'HybridSequential' is hybridized:" in said and "dead_relu will have nothing to judge" in said
    assert sum("is hybridized:" in r.getMessage() for r in caplog.records) == 1  # once
    # and close() gives that reason, not "a model with no ReLU layer" (trial 19d)
    [closing] = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert "'HybridSequential' is hybridized, and no forward hook runs inside a hybridized block" in closing
    assert "no ReLU layer" not in closing
    caplog.clear()
    other = TripwireHook(out_dir=str(tmp_path / "b"), rules=["dead_relu"])
    plain = mlp()
    other.register_block(plain)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        train(other, plain, lr=0.1, epochs=1)
        other.close()
    assert not [r for r in caplog.records if "hybridized" in r.getMessage()]


class _Stemmed(mx.gluon.Block):
    """A plain Block: a Dense(relu) stem, then a HybridSequential body."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = mx.gluon.nn.Dense(8, activation="relu", in_units=4)
        self.body = mx.gluon.nn.HybridSequential()
        self.body.add(mx.gluon.nn.Dense(8, activation="relu", in_units=8), mx.gluon.nn.Dense(2, in_units=8))

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.body(self.stem(x))


def test_the_hybridized_block_is_the_one_named_and_a_later_hybridize_is_said(caplog: pytest.LogCaptureFixture) -> None:
    # trial 16e: a plain Block with one hybridized child was named as hybridized (it cannot be), with
    # "dead_relu will have nothing to judge" though the stem's ReLU was captured; and hybridize()
    # after a few eager steps stopped the capture without a word
    net = _Stemmed()
    net.initialize(mx.init.Xavier())
    net.body.hybridize()
    hook = TripwireHook(write=False, save_interval=1, rules=["dead_relu"])
    hook.register_block(net)
    x = mx.nd.ones((4, 4))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(4):
            if step == 2:
                net.stem.hybridize()
            with hook.step("train") as s:
                with mx.autograd.record():
                    loss = net(x).sum()
                loss.backward()
                s.loss = loss
    said = [r.getMessage() for r in caplog.records if "hybridized" in r.getMessage()]
    assert len(said) == 2
    assert said[0].startswith("tripwire: 'body' is hybridized:") and "dead_relu judges the layers outside them only" in said[0]
    assert said[1].startswith("tripwire: 'stem', 'body' are hybridized by step 2:")
    assert "stem.act/output" in hook.history.tensor_names()
    hook.close()


def test_a_net_hybridized_before_a_run_that_starts_later_is_not_said_hybridized_by_that_step(
        caplog: pytest.LogCaptureFixture) -> None:
    # trial 23a: a resumed run (first step 20) of a net hybridized before training was said "hybridized by
    # step 20", the wording of a hybridize() called in the middle of training
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="relu", in_units=4), mx.gluon.nn.Dense(2, in_units=8))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    hook = TripwireHook(write=False, save_interval=1, include_collections=["activations"])
    hook.register_block(net)
    x = mx.nd.ones((4, 4))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(20, 23):
            with hook.step("train", step=step) as s:
                with mx.autograd.record():
                    loss = net(x).sum()
                loss.backward()
                s.loss = loss
    said = [r.getMessage() for r in caplog.records if "hybridized" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("tripwire: 'HybridSequential' is hybridized: "), said
    hook.close()


def test_begin_step_with_a_step_in_progress_is_an_error() -> None:
    # trial 16e: a forgotten end_step dropped that step without a word and shifted every later one
    hook = TripwireHook(write=False, save_interval=1)
    hook.begin_step("train")
    with pytest.raises(RuntimeError, match=r"train step 0 is still in progress; call end_step\(\) first"):
        hook.begin_step("train")
    hook.end_step(loss=1.0)
    hook.begin_step("train")  # (after end_step: the next step)
    hook.end_step(loss=1.0)
    assert hook.history.steps("train") == [0, 1]
    hook.close()


# ------------------------------------------------------------------------------------- estimator
class _Counter(mx.gluon.contrib.estimator.BatchEnd):
    def __init__(self) -> None:
        self.batches = 0

    def batch_end(self, estimator, *args, **kwargs):  # noqa: ANN001, ANN201
        self.batches += 1
        return False


def _estimator(net: gluon.Block, lr: float = 0.1) -> tuple[object, object, object]:
    from mxnet.gluon.contrib.estimator import Estimator

    xtr, ytr, xva, yva = digits()
    train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xtr, ytr), batch_size=50, shuffle=False)
    val_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xva, yva), batch_size=100)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr, "momentum": 0.9})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(), trainer=trainer)
    est.logger.setLevel(logging.WARNING)
    return est, train_data, val_data


def test_estimator_healthy_fit_completes_with_epoch_metrics(tmp_path) -> None:
    net = mlp()
    est, train_data, val_data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path), rules=stop_rules())
    counter = _Counter()
    est.fit(train_data, val_data=val_data, epochs=3, event_handlers=[handler, counter])
    assert counter.batches == 90 and handler.stop_training is False and handler.findings == []
    h = handler.history
    assert h.steps("eval") == [0, 1, 2]
    assert h.value("validation accuracy", "raw", 2, mode="eval") > 0.9
    assert h.value("training accuracy", "raw", 2, mode="eval") > 0.9
    assert h.series("loss")[0].tolist() == list(range(90))  # one loss per batch (every_step losses)
    others = [(n, h.reductions(n)[0]) for n in h.tensor_names() if n != "loss"]
    others = [(n, r) for n, r in others if len(h.series(n, r, "train")[0])]
    assert others and all(h.series(n, r, "train")[0].tolist() == list(range(0, 90, 10)) for n, r in others)  # every 10th
    assert tripwire.open_run(tmp_path).status == "complete"
    # the rules know the planned length (epochs x the first epoch's batches): a dead lr=0 run of
    # 176 steps ended without a finding when loss_not_decreasing waited its 200-step default
    assert h.planned_steps == 90
    est, train_data, val_data = _estimator(mlp())
    by_batches = TripwireHandler(out_dir=str(tmp_path / "batches"))
    est.fit(train_data, val_data=val_data, batches=45, event_handlers=[by_batches])
    assert by_batches.history.planned_steps == 45


def test_estimator_fit_stopped_by_its_own_mechanism(tmp_path) -> None:
    net = mlp(bias=-10.0)
    est, train_data, val_data = _estimator(net)
    handler = TripwireHandler(out_dir=str(tmp_path), rules=stop_rules())
    counter = _Counter()
    est.fit(train_data, val_data=val_data, epochs=5, event_handlers=[handler, counter])
    assert handler.stop_training is True
    assert counter.batches < 60  # of 150 planned
    assert handler.stopped_by is not None and handler.stopped_by.rule == "dead_relu"
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_estimator_handler_sees_gradients_before_the_update(tmp_path) -> None:
    net = mlp()
    est, train_data, _ = _estimator(net, lr=0.5)
    before = net[0].weight.data().asnumpy().astype("float64")
    handler = TripwireHandler(out_dir=str(tmp_path), collections=["weights", "gradients"], save_interval=1)
    est.fit(train_data, batches=1, event_handlers=[handler])
    import numpy as np

    assert handler.history.value("0.weight", "l2", 0) == pytest.approx(np.linalg.norm(before), rel=1e-9)
    assert handler.history.value("gradients/0.weight", "l2", 0) > 0
    assert not np.allclose(net[0].weight.data().asnumpy(), before)  # the estimator did update


def test_batchnorm_running_statistics_are_not_weights(tmp_path) -> None:
    # trial 17e: running_mean/running_var were captured as weights: poor_weight_initialization
    # stopped a healthy BatchNorm CNN at step 0 (running_var's std 2e-4), and unchanged_tensor never
    # fired on a BatchNorm net trained with learning rate 0 (the statistics move at every forward)
    def bn_mlp():
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(32, in_units=64), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
                gluon.nn.Dense(10, in_units=32))
        net.initialize(mx.init.Xavier())
        return net

    hook = TripwireHook(out_dir=str(tmp_path / "init"), save_interval=1,
                        rules=[{"name": "poor_weight_initialization", "actions": ["stop_training"]}])
    net = bn_mlp()
    hook.register_block(net)
    result = train(hook, net, lr=0.1, epochs=1)
    hook.close()
    assert hook.findings == [] and result["steps"] == 30
    weights = tripwire.open_run(tmp_path / "init").collections()["weights"]
    assert weights == ["0.weight", "1.gamma", "3.weight"], weights
    frozen = TripwireHook(out_dir=str(tmp_path / "lr0"), save_interval=5,
                          rules=[{"name": "unchanged_tensor", "actions": ["stop_training"]}])
    net = bn_mlp()
    frozen.register_block(net)
    result = train(frozen, net, lr=0.0, epochs=EPOCHS)
    frozen.close()
    assert result["stopped"] is True and frozen.stopped_by is not None and frozen.stopped_by.rule == "unchanged_tensor"


def test_a_second_estimator_fit_through_the_handler_continues_the_run(tmp_path) -> None:
    # trial 17e: "train 2 more epochs" crashed with "TripwireHook.begin_step: the hook is closed"
    est, train_data, val_data = _estimator(mlp())
    handler = TripwireHandler(out_dir=str(tmp_path), rules=stop_rules())
    est.fit(train_data, val_data=val_data, epochs=1, event_handlers=[handler])
    est.fit(train_data, val_data=val_data, epochs=1, event_handlers=[handler])
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete" and run.series("loss")[0].tolist() == list(range(60))  # steps count on
    assert handler.findings == []


def test_the_raise_action_through_the_estimator_ends_the_run_stopped(tmp_path) -> None:
    # trial 17e: the estimator runs no train_end handler after an error: the run read "running",
    # then "failed" at exit, for a run a rule had stopped; the handler had no close()
    from tripwire import TrainingStopped

    est, train_data, val_data = _estimator(mlp(), lr=1e8)
    handler = TripwireHandler(out_dir=str(tmp_path / "raise"), rules=[{"name": "exploding_tensor", "actions": ["raise"]}])
    with pytest.raises(TrainingStopped):
        est.fit(train_data, val_data=val_data, epochs=2, event_handlers=[handler])
    assert tripwire.open_run(tmp_path / "raise").status == "stopped" and handler.stopped_by is not None
    est, train_data, val_data = _estimator(mlp())
    with TripwireHandler(out_dir=str(tmp_path / "with")) as by_hand:
        est.fit(train_data, batches=3, event_handlers=[by_hand])
    assert tripwire.open_run(tmp_path / "with").status == "complete"


def test_the_estimators_validation_loss_is_what_overfit_reads_by_default(tmp_path, caplog) -> None:
    # trial 17e: overfit at its defaults read 'val_loss', which the estimator never logs: it read
    # nothing all fit, said only at the end
    from mxnet.gluon.contrib.estimator import Estimator

    xtr, ytr, xva, yva = digits()
    train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xtr, ytr), batch_size=50)
    val_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xva, yva), batch_size=100)
    net = mlp()
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    est.logger.setLevel(logging.WARNING)
    handler = TripwireHandler(out_dir=str(tmp_path / "loss"), rules=["overfit"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        est.fit(train_data, val_data=val_data, epochs=2, event_handlers=[handler])
    rule = handler.hook.session.rules[0]
    assert rule.validation == "validation softmaxcrossentropyloss"
    assert "matches no loss" not in caplog.text and "does not log" not in caplog.text
    caplog.clear()
    est, train_data, val_data = _estimator(mlp())  # Accuracy only: no loss metric at all
    handler = TripwireHandler(out_dir=str(tmp_path / "acc"), rules=["overfit"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        est.fit(train_data, val_data=val_data, epochs=2, event_handlers=[handler])
    said = [r.getMessage() for r in caplog.records if "which the estimator does not log" in r.getMessage()]
    assert len(said) == 1 and "'validation accuracy'" in said[0] and "mx.metric.Loss()" in said[0], said
