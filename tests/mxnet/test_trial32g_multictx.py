"""Trial 32g F2: with several contexts (``split_and_load`` over ``[cpu(0), cpu(1)]``) every layer
output (``activations``, ``activation_inputs``, ``relu_outputs``) held only the last device's shard
of the batch, while the loss, the gradients and the inputs covered the whole batch. The shards of one
step's calls on different devices are now joined, as the inputs are; a block called several times on
one device in a step keeps its last call."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tripwire

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

RED = ["l2", "mean", "zero_fraction", "numel", "max", "min"]


def _net(ctx: list) -> nn.Sequential:
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Conv2D(4, 3, padding=1, in_channels=1), nn.Activation("relu"), nn.Flatten(), nn.Dense(3, in_units=64))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    return net


def _stats(a: np.ndarray) -> dict[str, float]:
    a = a.astype(np.float64).ravel()
    return {"l2": float(np.linalg.norm(a)), "mean": float(a.mean()), "zero_fraction": float((a == 0).mean()),
            "numel": float(a.size), "max": float(a.max()), "min": float(a.min())}


def test_layer_outputs_over_several_devices_cover_the_whole_batch(tmp_path: Path) -> None:
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = _net(ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    cols = {k: {"reductions": RED} for k in ("activations", "activation_inputs", "relu_outputs")}
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1, collections=cols, rules=["exploding_tensor"])
    hook.register_block(net)
    rng = np.random.default_rng(0)
    expected: dict[int, dict[str, np.ndarray]] = {}
    with hook:
        for step in range(2):
            x = nd.array(rng.normal(size=(12, 1, 4, 4)).astype(np.float32))
            y = nd.array(rng.integers(0, 3, size=12).astype(np.float32))
            xs, ys = gluon.utils.split_and_load(x, ctx), gluon.utils.split_and_load(y, ctx)
            # the full batch's values, shard by shard (the weights of this step, before its update)
            pre = [net[0](a).asnumpy() for a in xs]
            expected[step] = {"0/output": np.concatenate(pre), "1/input": np.concatenate(pre),
                              "1/output": np.maximum(np.concatenate(pre), 0)}
            hook.begin_step("train")
            with autograd.record():
                losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
            for loss in losses:
                loss.backward()
            hook.end_step(loss=losses)
            trainer.step(12)
    run = tripwire.open_run(tmp_path)
    for step, tensors in expected.items():
        for name, full in tensors.items():
            want = _stats(full)
            assert want["numel"] == 12 * 4 * 16
            got = {r: run.value(name, r, step, mode="train") for r in RED}
            np.testing.assert_allclose([got[r] for r in RED], [want[r] for r in RED], rtol=1e-5, atol=1e-7,
                                       err_msg=f"{name} at step {step}")
    assert run.tensor("1/output").value("zero_fraction", 0) == _stats(expected[0]["1/output"])["zero_fraction"]


def test_a_block_called_twice_on_one_device_keeps_its_last_call(tmp_path: Path) -> None:
    net = _net([mx.cpu(0)])
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1, collections={"activations": {"reductions": ["l2",
                        "numel"]}}, rules=["exploding_tensor"])
    hook.register_block(net)
    rng = np.random.default_rng(1)
    a = nd.array(rng.normal(size=(2, 1, 4, 4)).astype(np.float32))
    b = nd.array(rng.normal(size=(2, 1, 4, 4)).astype(np.float32))
    with hook:
        hook.begin_step("train")
        net(a)
        out = net(b)
        hook.end_step(loss=out.sum())
    last = np.maximum(net[0](b).asnumpy(), 0)
    run = tripwire.open_run(tmp_path)
    assert run.value("1/output", "numel", 0) == last.size
    np.testing.assert_allclose(run.value("1/output", "l2", 0), np.linalg.norm(last), rtol=1e-6)
