"""MXNet capture overhead: step time with tripwire against the same Gluon loop without it.

    .venv-mxnet/bin/python benchmarks/overhead.py --framework mxnet [--quick] [--repeats 5]

Models: a small MLP (64 -> 128 -> 128 -> 10, ReLU) and a small CNN (1x8x8 -> conv 8 -> conv 16 ->
dense 10, ReLU), batch 64, SGD, CPU. Configurations, measured side by side in one process with the
same seed and data (../shared/evaluation.md section 2):

- ``none``: no hook;
- ``default``: ``TripwireHook()`` with the default config (losses and metrics, every 10 steps);
- ``everything``: weights, biases, gradients, layer outputs, activation inputs, ReLU outputs and
  the loss, all with their default reductions, at every step.

Each repeat times ``steps`` training steps per configuration (after a warm-up, ending with
``nd.waitall()``, since MXNet runs asynchronously); the ratio is that time over the no-hook time
of the same repeat. Reported: the median ratio over repeats and its min..max spread.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")

import numpy as np  # noqa: E402

from tripwire.integrations.mxnet import TripwireHook  # noqa: E402  (applies the numpy shim first)

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

EVERYTHING = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs"]
BATCH = 64


def _mlp() -> gluon.Block:
    net = nn.Sequential()
    net.add(nn.Dense(128, activation="relu", in_units=64), nn.Dense(128, activation="relu", in_units=128),
            nn.Dense(10, in_units=128))
    return net


def _cnn() -> gluon.Block:
    net = nn.Sequential()
    net.add(nn.Conv2D(8, 3, padding=1, activation="relu", in_channels=1),
            nn.Conv2D(16, 3, padding=1, activation="relu", in_channels=8),
            nn.Flatten(), nn.Dense(10, in_units=16 * 8 * 8))
    return net


MODELS: dict[str, tuple[Callable[[], gluon.Block], tuple[int, ...]]] = {
    "mlp": (_mlp, (64,)),
    "cnn": (_cnn, (1, 8, 8)),
}


def _time_config(model: str, config: str | None, steps: int, warmup: int, out_dir: str) -> float:
    build, shape = MODELS[model]
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    net = build()
    net.initialize(mx.init.Xavier())
    x = nd.array(rng.normal(size=(BATCH, *shape)).astype(np.float32))
    y = nd.array(rng.integers(0, 10, BATCH).astype(np.float32))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    hook = None
    if config == "default":
        hook = TripwireHook(out_dir=out_dir)
    elif config == "everything":
        hook = TripwireHook(out_dir=out_dir, collections=EVERYTHING, save_interval=1)
    if hook is not None:
        hook.register_block(net)

    def step() -> None:
        if hook is not None:
            hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        if hook is not None:
            hook.end_step(loss=loss)
        trainer.step(BATCH)

    for _ in range(warmup):
        step()
    nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    nd.waitall()
    elapsed = time.perf_counter() - start
    if hook is not None:
        hook.close()
    return elapsed / steps


def run(quick: bool, repeats: int) -> dict[str, Any]:
    steps, warmup = (5, 1) if quick else (200, 20)
    results: dict[str, Any] = {"steps": steps, "batch": BATCH, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            times: dict[str, list[float]] = {"none": [], "default": [], "everything": []}
            for r in range(repeats):
                for config in times:  # side by side within each repeat
                    out = os.path.join(tmp, f"{model}-{config}-{r}")
                    times[config].append(_time_config(model, None if config == "none" else config, steps, warmup, out))
            entry: dict[str, Any] = {"step_ms_none": statistics.median(times["none"]) * 1e3}
            for config in ("default", "everything"):
                ratios = [t / b for t, b in zip(times[config], times["none"])]
                entry[config] = {
                    "ratio_median": statistics.median(ratios),
                    "ratio_min": min(ratios),
                    "ratio_max": max(ratios),
                    "step_ms": statistics.median(times[config]) * 1e3,
                }
            results["models"][model] = entry
            print(
                f"mxnet {model}: no hook {entry['step_ms_none']:.3f} ms/step; "
                f"default {entry['default']['ratio_median']:.3f}x "
                f"[{entry['default']['ratio_min']:.3f}..{entry['default']['ratio_max']:.3f}]; "
                f"everything every step {entry['everything']['ratio_median']:.3f}x "
                f"[{entry['everything']['ratio_min']:.3f}..{entry['everything']['ratio_max']:.3f}] "
                f"({repeats} repeats of {steps} steps)"
            )
    return results
