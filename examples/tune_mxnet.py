"""Tune a Gluon training loop with Hyperband: the hook reports each epoch's validation loss to the
trial (TripwireHook(trial=..., trial_metric="val_loss")) and ends the loop when the scheduler stops it;
a tripwire rule that stops a broken trial is told to the tuner.

    python examples/tune_mxnet.py                      # 9 trials, 2 workers, journal mxnet-tuning.db
    tripwire tune-report mxnet-tuning.db               # the summary again, from the journal

Needs: pip install -e ".[mxnet]"   (in a clone, in an environment of its own: numpy<2, docs/mxnet.md)

Runs in the MXNet environment (numpy < 2, docs/mxnet.md). The learning-rate range reaches values
that make this small network diverge: `exploding_gradient` (default rule set) stops those trials
(4 of the 9: trials 1, 3, 4 and 8, lr 10.9 and above, on gradient norms of 2e9 to 8e10: the
gradient of the mean loss), and
they are journaled `stopped` with the rule's name, never the best. The summary reads "completed 3,
stopped 6", best trial 5, "resource used: 57 of 81" (docs/mxnet.md, Tuning: with 2 workers a
rung's decision depends on the order of the reports, so trial 5 is now and then stopped at its
rung too). Each trial's run says why it ended: `tripwire inspect runs/trial-2-1`: status
`stopped`, "the tuner stopped the trial after epoch 1 (val_loss=...)"; `runs/trial-3-1`:
`stopped` by the rule's finding.
"""

from __future__ import annotations

import argparse

from tripwire.integrations.mxnet import TripwireHook  # first: it sets up MXNet under numpy >= 1.24
from tripwire.tune import Continuous, Hyperband, Tuner


def train(params: dict, trial) -> None:
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
                        actions=["log", "stop_training"], trial=trial, trial_metric="val_loss")
    hook.register_block(net)
    with hook:  # the run ends (complete, stopped or failed) however the loop ends
        for _epoch in range(trial.max_resource):
            for i in range(0, 512, 32):
                hook.begin_step()
                with autograd.record():
                    loss = loss_fn(net(x[i:i + 32]), y[i:i + 32])
                loss.backward()
                hook.end_step(loss=loss)  # after backward, before trainer.step: the weights the pass used
                if hook.should_stop:  # a rule stopped a broken run (the tuner is told, and never ranks it)
                    return None
                trainer.step(32)
            hook.begin_step("eval", summary=True)  # the epoch's evaluation summary: reported to the trial
            hook.end_step(metrics={"val_loss": loss_fn(net(x_val), y_val).mean()})
            if hook.should_stop:  # the scheduler stopped this trial
                break
    return None  # the last value reported is the objective


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
