"""Shared pieces of the MXNet tests: the digits data, the MLP of the original experiment, a loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tripwire.integrations.mxnet import TripwireHook  # applies the numpy shim, then imports mxnet

import mxnet as mx  # noqa: E402  (after the shim)
from mxnet import autograd, gluon, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

_DIGITS: tuple[np.ndarray, ...] | None = None

BUILTIN = ("exploding_tensor", "dead_relu", "loss_not_decreasing")


def stop_rules() -> list[dict[str, Any]]:
    """The three built-in rules, each stopping training when it fires."""
    return [{"name": n, "actions": ["log", "stop_training"]} for n in BUILTIN]


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits, standardised; 1500 train / 297 validation samples."""
    global _DIGITS
    if _DIGITS is None:
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        x = (x / 16.0 - 0.5).astype(np.float32) * 2
        y = y.astype(np.float32)
        idx = np.random.default_rng(0).permutation(len(x))
        x, y = x[idx], y[idx]
        _DIGITS = (x[:1500], y[:1500], x[1500:], y[1500:])
    return _DIGITS  # type: ignore[return-value]


def sgd_estimator(net: Any, rows: int = 500) -> tuple[Any, Any]:
    """An estimator (SGD 0.1, momentum 0.9, softmax cross-entropy) of ``net`` and its training data:
    the first ``rows`` digits in batches of 50, unshuffled."""
    import logging

    from mxnet.gluon.contrib.estimator import Estimator

    xtr, ytr, _, _ = digits()
    train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(xtr[:rows], ytr[:rows]), batch_size=50, shuffle=False)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(), trainer=trainer)
    est.logger.setLevel(logging.WARNING)
    return est, train_data


def mlp(hidden: int = 64, seed: int = 0, bias: float | None = None) -> nn.HybridSequential:
    """Fully connected ReLU net 64 -> hidden -> hidden -> 10 (``bias``: constant hidden biases)."""
    mx.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(hidden, activation="relu", in_units=64), nn.Dense(hidden, activation="relu", in_units=hidden),
            nn.Dense(10, in_units=hidden))
    net.initialize(mx.init.Xavier())
    if bias is not None:
        for i in (0, 1):
            net[i].bias.set_data(nd.full((hidden,), bias))
    return net


def tiny_net() -> tuple[nn.Sequential, gluon.Trainer]:
    """A 4 -> 8 (ReLU) -> 3 net, seeded, and its SGD Trainer (learning rate 0.1, momentum 0.9)."""
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier())
    return net, gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})


def train(
    hook: TripwireHook | None,
    net: Any,
    *,
    lr: float = 0.1,
    epochs: int = 3,
    batch_size: int = 50,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """A plain Gluon loop with the hook in it; returns steps run, validation accuracy, stopped."""
    xtr, ytr, xva, yva = digits()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr, "momentum": 0.9})
    steps = 0
    stopped = False
    for _ in range(epochs):
        for i in range(0, len(xtr), batch_size):
            x, y = nd.array(xtr[i : i + batch_size]), nd.array(ytr[i : i + batch_size])
            if hook is not None:
                hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            if hook is not None:
                hook.end_step(loss=loss)
                if hook.should_stop:
                    stopped = True
                    break
            trainer.step(x.shape[0])
            steps += 1
            if on_step is not None:
                on_step(steps)
        if stopped:
            break
    pred = net(nd.array(xva)).argmax(axis=1).asnumpy()
    return {"steps": steps, "accuracy": float((pred == yva).mean()), "stopped": stopped}


__all__ = ["BUILTIN", "TripwireHook", "autograd", "digits", "gluon", "mlp", "mx", "nd", "nn", "stop_rules", "train"]
