"""Keras capture overhead: step time with :class:`TripwireCallback` against no callback.

Run through ``python benchmarks/overhead.py --framework keras [--quick]``. Models: a small MLP
(784-256-128-10 on 784 random features, batch 64) and a small CNN (two 3x3 conv layers on
28x28x1, batch 64), Adam, Keras on the torch backend (``KERAS_BACKEND`` is set to ``torch``
unless already set). Configurations, measured side by side in one process and interleaved per
repeat: ``none`` (no callback), ``default`` (tripwire's default config: losses and metrics every
10 steps), ``everything`` (weights, biases, gradients, activations, activation inputs,
ReLU outputs, update ratios and learning rate, the batch's inputs, with their default
reductions, every step) and
``wga`` (all weights, gradients and activations every step: the set evaluation.md's bar names; no
update ratios, which need a copy of every weight).
The step time of a run is measured by a timer callback placed first (one after tripwire's that
runs code at the batch end would make tripwire copy each step's tensors on the training thread, as
for any such callback: docs/keras.md, "Reductions"), from the end of the first batch to the end of
the last one: whole steps, each with every callback's hooks (fit's start-up and tear-down
excluded; the first step of a run excluded); the ratio is the median over repeats of ``time(config) / time(none)``, the spread
min..max. Process CPU time ratios (all threads, the writer's included, and tripwire's reduction
process) and training-thread CPU
time ratios (``time.thread_time`` of the thread that runs fit: what the callback adds to the
training loop itself, not counting time the thread waits for the CPU) are printed beside the
wall-clock ones: on a shared machine they are less disturbed by other processes. The default
config costs a few percent, less than the drift between runs, so it also gets a paired figure: 16
alternating pairs of fits (none, default; default, none; ...), the ratio within each pair, their
mean with a 95% Student-t interval.
``--device cuda`` trains on the GPU (the torch backend's device scope); the timer then waits for the
device's queued work (``torch.cuda.synchronize``) at its first and last mark only.
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time
from typing import Any

from _stats import cpu_time, mean_ci  # benchmarks/ (run as a script from there)

os.environ.setdefault("KERAS_BACKEND", "torch")

EVERYTHING = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs",
              "relu_outputs", "optimizer", "inputs"]
WGA = ["weights", "biases", "gradients", "losses", "metrics", "activations"]
CONFIGS = {"default": None, "everything": EVERYTHING, "wga": WGA}


def _models(keras: Any) -> dict[str, Any]:
    def mlp() -> Any:
        return keras.Sequential([
            keras.Input((784,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ])

    def cnn() -> Any:
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ])

    return {"mlp": mlp, "cnn": cnn}


def _timer(keras: Any, sync: Any, steps: int) -> Any:
    class Timer(keras.callbacks.Callback):
        """First in the list: the time between its first and last batch end covers whole steps
        (train step, then every callback's batch hooks), not fit's start-up and tear-down."""

        def __init__(self) -> None:
            super().__init__()
            self.wall: list[float] = []
            self.cpu: list[float] = []
            self.thread: list[float] = []

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if batch in (0, steps - 1):
                sync()
                self.cpu.append(cpu_time())  # (the reduction process's too; read from /proc: not every batch)
            self.wall.append(time.perf_counter())
            self.thread.append(time.thread_time())

    return Timer()


def _time_fit(keras: Any, build: Any, x: Any, y: Any, callbacks: list[Any], steps: int, batch: int,
              sync: Any) -> tuple[float, float, float]:
    """Seconds per step (wall, process CPU, training-thread CPU) over steps 1..steps-1 of one epoch."""
    gc.collect()  # the previous fit's garbage is not collected inside this one's timing
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x[: batch * 2], y[: batch * 2], batch_size=batch, epochs=1, verbose=0)  # warm-up, no callback
    timer = _timer(keras, sync, steps)
    model.fit(x[: batch * steps], y[: batch * steps], batch_size=batch, epochs=1, verbose=0,
              callbacks=[timer, *callbacks], shuffle=False)
    n = len(timer.wall) - 1
    return (timer.wall[-1] - timer.wall[0]) / n, (timer.cpu[-1] - timer.cpu[0]) / n, (timer.thread[-1] - timer.thread[0]) / n


def run(quick: bool, repeats: int, device: str = "cpu", pairs: int | None = None) -> dict[str, Any]:
    import keras

    torch: Any = None
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # another backend
        pass
    if device == "cuda" and (torch is None or keras.backend.backend() != "torch" or not torch.cuda.is_available()):
        raise SystemExit("--device cuda: needs the torch backend (KERAS_BACKEND=torch) and a CUDA device torch can see")
    from tripwire.integrations.keras import TripwireCallback

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    with keras.device(device):
        return _run(keras, TripwireCallback, quick, repeats, device, pairs, sync)


def _run(keras: Any, TripwireCallback: Any, quick: bool, repeats: int, device: str, pairs: int | None,
         sync: Any) -> dict[str, Any]:
    import numpy as np

    steps = 6 if quick else 150
    pairs = pairs if pairs is not None else (2 if quick else 16)
    batch = 64
    rng = np.random.default_rng(0)
    data = {
        "mlp": (rng.normal(size=(batch * steps, 784)).astype("float32"), rng.integers(0, 10, batch * steps)),
        "cnn": (rng.normal(size=(batch * steps, 28, 28, 1)).astype("float32"), rng.integers(0, 10, batch * steps)),
    }
    results: dict[str, Any] = {"backend": keras.backend.backend(), "device": device, "steps": steps,
                               "batch_size": batch, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in _models(keras).items():
            x, y = data[name]
            times: dict[str, list[tuple[float, float, float]]] = {"none": [], **{c: [] for c in CONFIGS}}
            names = list(times)
            for r in range(repeats):
                # interleaved, so drifts of a shared machine hit all alike; the order rotates from
                # repeat to repeat, so that no configuration always follows the same one
                for config in names[r % len(names):] + names[:r % len(names)]:
                    out = os.path.join(tmp, f"{name}-{config}-{r}")
                    if config == "none":
                        cbs: list[Any] = []
                    elif CONFIGS[config] is None:
                        cbs = [TripwireCallback(out_dir=out)]
                    else:
                        cbs = [TripwireCallback(out_dir=out, save_interval=1, collections=CONFIGS[config])]
                    times[config].append(_time_fit(keras, build, x, y, cbs, steps, batch, sync))
            # the default config costs a few percent, less than the drift between runs: alternating
            # pairs of short fits (none, default; then default, none; ...), the ratio within each pair
            paired: dict[str, list[float]] = {"wall": [], "thread": []}
            for p in range(pairs):
                order = ["none", "default"] if p % 2 == 0 else ["default", "none"]
                got = {c: _time_fit(keras, build, x, y, [TripwireCallback(out_dir=os.path.join(tmp, f"{name}-pair{p}"))]
                                    if c == "default" else [], steps, batch, sync) for c in order}
                paired["wall"].append(got["default"][0] / got["none"][0])
                paired["thread"].append(got["default"][2] / got["none"][2])
            entry: dict[str, Any] = {"step_ms_none": 1e3 * statistics.median(t[0] for t in times["none"])}
            entry["default_paired"] = {k: mean_ci(v) for k, v in paired.items()}
            for config in CONFIGS:
                wall = [t[0] / b[0] for t, b in zip(times[config], times["none"])]
                cpu = [t[1] / b[1] for t, b in zip(times[config], times["none"])]
                thread = [t[2] / b[2] for t, b in zip(times[config], times["none"])]
                entry[config] = {"ratio_median": statistics.median(wall), "ratio_min": min(wall), "ratio_max": max(wall),
                                 "cpu_ratio_median": statistics.median(cpu),
                                 "thread_ratio_median": statistics.median(thread),
                                 "thread_ratio_min": min(thread), "thread_ratio_max": max(thread),
                                 "step_ms": 1e3 * statistics.median(t[0] for t in times[config])}
            results["models"][name] = entry
            print(f"keras/{keras.backend.backend()}/{device} {name}: no callback {entry['step_ms_none']:.2f} ms/step")
            for config, goal in (("default", 1.03), ("everything", 1.5), ("wga", 1.5)):
                e = entry[config]
                mark = "ok" if e["ratio_median"] <= goal else "MISS"
                print(f"  {config:<11} {e['ratio_median']:.3f}x [{e['ratio_min']:.3f}..{e['ratio_max']:.3f}] "
                      f"(cpu {e['cpu_ratio_median']:.3f}x; training thread {e['thread_ratio_median']:.3f}x "
                      f"[{e['thread_ratio_min']:.3f}..{e['thread_ratio_max']:.3f}]) goal <= {goal} {mark}")
            for kind, st in entry["default_paired"].items():
                print(f"  default ({kind}) {st['mean']:.3f}x, 95% CI [{st['ci_low']:.3f}, {st['ci_high']:.3f}] over "
                      f"{st['n']} alternating pairs (median {st['median']:.3f}x)")
    return results
