"""Tune a Gluon training loop with Hyperband: each trial reports its validation loss every epoch and
stops when the scheduler says so; a tripwire rule that stops a broken trial is told to the tuner.

    python examples/tune_mxnet.py                      # 9 trials, 2 workers, journal mxnet-tuning.db
    tripwire tune-report mxnet-tuning.db               # the summary again, from the journal

Runs in the MXNet environment (numpy < 2, docs/mxnet.md). The learning-rate range reaches values
that make this small network diverge: `exploding_tensor` (default rule set) stops those trials, and
they are journaled `stopped` with the rule's name, never the best.
"""

from __future__ import annotations

import argparse

from tripwire.integrations.mxnet import TripwireHook  # first: it sets up MXNet under numpy >= 1.24
from tripwire.tune import Continuous, Hyperband, Tuner


def train(params: dict, trial) -> float:
    import mxnet as mx
    from mxnet import autograd, gluon, nd

    mx.random.seed(trial.number)
    x = nd.random.normal(shape=(512, 16))
    y = (x[:, 0] + x[:, 1] > 0).astype("float32")
    x_val = nd.random.normal(shape=(256, 16))
    y_val = (x_val[:, 0] + x_val[:, 1] > 0).astype("float32")
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": params["lr"]})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    hook = TripwireHook(out_dir=f"runs/trial-{trial.number}-{trial.attempt}", rules=["default"],
                        actions=["log", "stop_training"])
    hook.register_block(net)
    val_loss = float("nan")
    with hook:  # the run ends (complete, stopped or failed) however the loop ends
        for epoch in range(1, trial.max_resource + 1):
            for i in range(0, 512, 32):
                hook.begin_step()
                with autograd.record():
                    loss = loss_fn(net(x[i:i + 32]), y[i:i + 32])
                loss.backward()
                trainer.step(32)
                decision = hook.end_step(loss=loss)
                if decision.stop:  # a rule stopped a broken run: tell the tuner, which never ranks it
                    trial.rule_stopped(decision.stopped_by.rule, decision.stopped_by.message)
                    return val_loss
            val_loss = float(loss_fn(net(x_val), y_val).mean().asscalar())
            if trial.report(step=epoch, value=val_loss):  # the scheduler stops this trial
                break
    return val_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-jobs", type=int, default=9)
    parser.add_argument("--journal", default="mxnet-tuning.db")
    args = parser.parse_args()
    tuner = Tuner(train, {"lr": Continuous(0.01, 100.0, scale="log")}, objective="val_loss", mode="min",
                  strategy=Hyperband(min_resource=1, max_resource=9, reduction_factor=3), max_jobs=args.max_jobs,
                  max_parallel_jobs=2, seed=0, journal=args.journal)
    result = tuner.fit()
    print(result.summary())


if __name__ == "__main__":
    main()
