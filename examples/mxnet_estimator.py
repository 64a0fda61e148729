"""tripwire as an event handler of ``mxnet.gluon.contrib.estimator``.

    .venv-mxnet/bin/python examples/mxnet_estimator.py [--bias -10]

Needs: pip install -e ".[mxnet]"   (in a clone, in an environment of its own: MXNet 1.9.1 needs numpy<2,
docs/mxnet.md; scikit-learn for the data)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

from tripwire.integrations.mxnet import TripwireHandler  # import before mxnet: it applies the numpy shim

import mxnet as mx  # noqa: E402
from mxnet import gluon, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402
from mxnet.gluon.contrib.estimator import Estimator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bias", type=float, default=None, help="constant bias of the hidden layers (a fault)")
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = ((x / 16.0 - 0.5) * 2).astype(np.float32)
    y = y.astype(np.float32)
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x[:1500], y[:1500]), batch_size=50, shuffle=True)
    val = gluon.data.DataLoader(gluon.data.ArrayDataset(x[1500:], y[1500:]), batch_size=100)

    mx.random.seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(64, activation="relu", in_units=64), nn.Dense(64, activation="relu", in_units=64), nn.Dense(10, in_units=64))
    net.initialize(mx.init.Xavier())
    if args.bias is not None:
        for layer in (net[0], net[1]):
            layer.bias.set_data(nd.full(layer.bias.shape, args.bias))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(), trainer=trainer)

    handler = TripwireHandler(
        out_dir=time.strftime("tripwire-runs/mxnet-estimator-%Y%m%d-%H%M%S"),  # a new run each time
        rules=[{"name": r, "actions": ["log", "stop_training"]} for r in ("exploding_tensor", "dead_relu", "loss_not_decreasing")],
    )
    est.fit(train, val_data=val, epochs=5, event_handlers=[handler])
    print("stopped by:", handler.stopped_by or "nothing; training completed")
    print("validation accuracy per epoch:", handler.history.series("validation accuracy", mode="eval")[1].round(3).tolist())


if __name__ == "__main__":
    main()
