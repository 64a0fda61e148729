"""tripwire in a hand-written Gluon loop: an MLP on scikit-learn digits, stopped when a rule fires.

    .venv-mxnet/bin/python examples/mxnet_gluon_loop.py [--bias -10]

Needs: pip install -e ".[mxnet]"   (in a clone, in an environment of its own: MXNet 1.9.1 needs numpy<2,
docs/mxnet.md; scikit-learn for the data)

``--bias -10`` plants a fault (dead ReLUs from a large negative bias); without it training is healthy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

from tripwire.integrations.mxnet import TripwireHook  # import before mxnet: it applies the numpy shim

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bias", type=float, default=None, help="constant bias of the hidden layers (a fault)")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = ((x / 16.0 - 0.5) * 2).astype(np.float32)
    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net(nd.array(x[:1]))
    if args.bias is not None:
        for layer in (net[0], net[1]):
            layer.bias.set_data(nd.full(layer.bias.shape, args.bias))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})

    hook = TripwireHook(
        out_dir=time.strftime("tripwire-runs/mxnet-gluon-loop-%Y%m%d-%H%M%S"),  # a new run each time
        rules=[{"name": r, "actions": ["log", "stop_training"]} for r in ("exploding_tensor", "dead_relu", "loss_not_decreasing")],
    )
    hook.register_block(net)
    hook.register_trainer(trainer)  # parameters it leaves out (a WARNING), lr/0 and update ratios where saved
    with hook:
        for epoch in range(args.epochs):
            for i in range(0, len(x), 50):
                xb, yb = nd.array(x[i : i + 50]), nd.array(y[i : i + 50])
                hook.begin_step("train")
                with autograd.record():
                    loss = loss_fn(net(xb), yb)
                loss.backward()
                hook.end_step(loss=loss, inputs=xb)  # gradients are read here, before trainer.step
                if hook.should_stop:
                    break
                trainer.step(xb.shape[0])
            if hook.should_stop:
                break
    print("stopped by:", hook.stopped_by or "nothing; training completed")
    print("run written to", hook.out_dir)


if __name__ == "__main__":
    main()
