"""Lightning capture overhead: step time with TripwireCallback against the same fit without it.

Configurations, run interleaved in one process (same model, data and seed):
  - ``baseline``: no callback;
  - ``tripwire_default``: ``TripwireCallback()`` (losses and metrics every 10 steps, no rules);
  - ``tripwire_everything``: weights, biases, gradients, activations, activation inputs, ReLU
    outputs, optimizer (learning rates, update ratios), inputs, losses, metrics, all reduced every step;
  - ``tripwire_wga``: all weights, gradients and activations (and losses, metrics) reduced every
    step, the set evaluation.md's bar names (no update ratios: they need a copy of every weight);
  - ``tensorboard_hist_10`` / ``tensorboard_hist_1``: what a user would do instead, Lightning's
    ``TensorBoardLogger`` (backed by tensorboardX here: torch.utils.tensorboard needs the
    ``tensorboard`` package) writing histograms of every weight and gradient every 10 / every step.

Models: a small MLP (784-256-256-10, batch 128) and a small CNN (two 3x3 conv layers, 28x28
inputs, batch 64). Step time = wall time from the first timed batch to the end of training divided
by the number of timed steps (warm-up steps excluded). Ratios are medians over repeats, with the
spread (min, max) of the per-repeat ratios. On a shared, busy machine the wall-clock ratios are
noisy, so steadier figures are also reported: the process CPU time per step (all threads, the
writer thread's included, and tripwire's reduction process) as a ratio to the baseline's; the training thread's own CPU time per
step (``time.thread_time``: everything tripwire adds to the training loop, forward hooks included,
but not time spent waiting for a CPU); and the time spent inside tripwire's own step hooks, with
the estimate 1 + hook time / baseline step (neither the writer thread's work nor the forward hooks).
The default config costs a few percent, less than the drift between runs on a shared machine, so
it also gets a paired figure: 16 rounds (``--pairs``) of three short fits in rotating order
(baseline, default, an empty ``lightning.Callback()``; then default, empty, baseline; ...), the
ratios within each round, their mean with a 95% Student-t interval: default against baseline
(``wall``, ``thread``), the empty callback against baseline (``empty_wall``: what Lightning's
dispatch of any callback's hooks costs) and default against the empty callback
(``default_vs_empty_wall``: what tripwire adds beyond that).
Goals: default <= 1.03x, everything every step <= 1.5x.
``--device cuda`` trains on the GPU (``accelerator="gpu"``); the wall-clock marks then wait for the
device's queued work (``torch.cuda.synchronize``) at the first timed step and at the end of training
only, so that the steps in between run as they would without a timer.
"""

from __future__ import annotations

import gc
import logging
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from _stats import cpu_time, mean_ci  # benchmarks/ (run as a script from there)

GOALS = {"tripwire_default": 1.03, "tripwire_everything": 1.5, "tripwire_wga": 1.5}
EVERYTHING = ["weights", "biases", "gradients", "activations", "activation_inputs", "relu_outputs", "optimizer",
              "inputs", "losses", "metrics"]
WGA = ["weights", "biases", "gradients", "activations", "losses", "metrics"]


def _models() -> dict[str, Any]:
    import torch
    from torch import nn

    def mlp() -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))

    def cnn() -> nn.Module:
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

    _ = torch
    return {"mlp": (mlp, 128), "cnn": (cnn, 64)}


def _ratios(per_config: dict[str, list[float]], configs: list[str]) -> dict[str, dict[str, float]]:
    """Per configuration (the first is the baseline): ratio of medians and the per-repeat spread."""
    base = per_config[configs[0]]
    return {
        config: {
            "median": statistics.median(per_config[config]) / statistics.median(base),
            "min": min(t / b for t, b in zip(per_config[config], base)),
            "max": max(t / b for t, b in zip(per_config[config], base)),
        }
        for config in configs[1:]
    }


def run(quick: bool = False, repeats: int = 5, device: str = "cpu", pairs: int | None = None) -> dict[str, Any]:
    import torch
    import lightning as L
    from lightning.pytorch.loggers import TensorBoardLogger
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(1)
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    accelerator = "gpu" if device == "cuda" else "cpu"
    warmup, timed = (2, 10) if quick else (10, 200)
    pairs = pairs if pairs is not None else (2 if quick else 16)
    steps = warmup + timed

    def sync() -> None:
        """Wait for the device's queued work, so that wall-clock marks cover it (CUDA only)."""
        if device == "cuda":
            torch.cuda.synchronize()

    class Module(L.LightningModule):
        def __init__(self, net: nn.Module) -> None:
            super().__init__()
            self.net = net

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    class Timer(L.Callback):
        def __init__(self) -> None:
            self.start = self.end = self.cpu_start = self.cpu_end = self.thread_start = self.thread_end = 0.0

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if batch_idx == warmup:
                sync()
                self.start, self.cpu_start, self.thread_start = time.perf_counter(), cpu_time(), time.thread_time()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            sync()
            self.end, self.cpu_end, self.thread_end = time.perf_counter(), cpu_time(), time.thread_time()

    class Histograms(L.Callback):
        """The TensorBoard way: histograms of all weights and gradients every ``interval`` steps."""

        def __init__(self, interval: int) -> None:
            self.interval = interval

        def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
            step = trainer.global_step
            if step % self.interval:
                return
            writer = trainer.logger.experiment
            for name, p in pl_module.named_parameters():
                writer.add_histogram(name, p.detach(), step)
                if p.grad is not None:
                    writer.add_histogram(f"{name}.grad", p.grad, step)

    class TimedTripwire(TripwireCallback):
        """Adds up the time spent inside tripwire's own per-step hooks (a figure less sensitive to
        a busy machine than the wall-clock ratio: the estimate is 1 + hook time / baseline step)."""

        hook_time = 0.0

        def _timed(self, fn: Any, *args: Any) -> None:
            t = time.perf_counter()
            fn(*args)
            self.hook_time += time.perf_counter() - t

        def on_train_batch_start(self, *args: Any) -> None:
            if args[-1] >= warmup:
                self._timed(super().on_train_batch_start, *args)
            else:
                super().on_train_batch_start(*args)

        def on_before_optimizer_step(self, *args: Any) -> None:
            self._timed(super().on_before_optimizer_step, *args)

        def on_train_batch_end(self, *args: Any) -> None:
            if args[-1] >= warmup:
                self._timed(super().on_train_batch_end, *args)
            else:
                super().on_train_batch_end(*args)

    configs = ["baseline", "tripwire_default", "tripwire_everything", "tripwire_wga", "tensorboard_hist_10",
               "tensorboard_hist_1"]
    if quick:
        configs = ["baseline", "tripwire_default", "tripwire_everything", "tripwire_wga", "tensorboard_hist_1"]
    tmp = Path(tempfile.mkdtemp(prefix="tw-overhead-"))
    results: dict[str, Any] = {"models": {}, "goals": GOALS, "timed_steps": timed, "warmup_steps": warmup,
                               "tensorboard_backend": "tensorboardX", "device": device,
                               "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    try:
        for model_name, (make, batch) in _models().items():
            shape = (1, 28, 28)
            g = torch.Generator().manual_seed(0)
            x = torch.randn(steps * batch, *shape, generator=g)
            y = torch.randint(0, 10, (steps * batch,), generator=g)
            loader = DataLoader(TensorDataset(x, y), batch_size=batch)
            times: dict[str, list[float]] = {c: [] for c in configs}
            cpu: dict[str, list[float]] = {c: [] for c in configs}
            thread: dict[str, list[float]] = {c: [] for c in configs}
            hook: dict[str, list[float]] = {"tripwire_default": [], "tripwire_everything": [], "tripwire_wga": []}
            def fit_once(config: str, tag: str) -> tuple[float, float, float, float | None]:
                """One fit: seconds per timed step (wall, process CPU, training-thread CPU, in-hook)."""
                gc.collect()  # the previous fit's garbage is not collected inside this one's timing
                torch.manual_seed(0)
                timer = Timer()
                callbacks: list[Any] = [timer]
                logger: Any = False
                out = tmp / f"{model_name}-{config}-{tag}"
                tw: Any = None
                if config == "tripwire_default":
                    tw = TimedTripwire(out_dir=out)
                elif config == "tripwire_everything":
                    tw = TimedTripwire(out_dir=out, save_interval=1, collections=EVERYTHING)
                elif config == "tripwire_wga":
                    tw = TimedTripwire(out_dir=out, save_interval=1, collections=WGA)
                if tw is not None:
                    callbacks.append(tw)
                elif config == "empty_callback":
                    callbacks.append(L.Callback())
                elif config.startswith("tensorboard"):
                    logger = TensorBoardLogger(str(out), name="", version="")
                    callbacks.append(Histograms(int(config.rsplit("_", 1)[1])))
                trainer = L.Trainer(max_steps=steps, accelerator=accelerator, devices=1, logger=logger,
                                    enable_checkpointing=False, enable_progress_bar=False,
                                    enable_model_summary=False, callbacks=callbacks, log_every_n_steps=10)
                trainer.fit(Module(make()), loader)
                shutil.rmtree(out, ignore_errors=True)
                return ((timer.end - timer.start) / timed, (timer.cpu_end - timer.cpu_start) / timed,
                        (timer.thread_end - timer.thread_start) / timed, None if tw is None else tw.hook_time / timed)

            for r in range(repeats):
                # interleaved, the order rotating from repeat to repeat: a fixed order gives each
                # configuration the same neighbours (and the same phase of a shared machine's load)
                # every time, a bias that a rotation spreads over all of them
                for config in configs[r % len(configs):] + configs[:r % len(configs)]:
                    wall_s, cpu_s, thread_s, hook_s = fit_once(config, str(r))
                    times[config].append(wall_s)
                    cpu[config].append(cpu_s)
                    thread[config].append(thread_s)
                    if hook_s is not None:
                        hook[config].append(hook_s)
            # the default config's cost is a few percent, below the run-to-run drift of a shared
            # machine: many rounds of short fits (rotating which goes first), ratios per round
            paired: dict[str, list[float]] = {"wall": [], "thread": [], "empty_wall": [], "default_vs_empty_wall": []}
            rotation = ["baseline", "tripwire_default", "empty_callback"]
            for p in range(pairs):
                order = rotation[p % 3:] + rotation[:p % 3]
                got = {config: fit_once(config, f"pair{p}") for config in order}
                paired["wall"].append(got["tripwire_default"][0] / got["baseline"][0])
                paired["thread"].append(got["tripwire_default"][2] / got["baseline"][2])
                paired["empty_wall"].append(got["empty_callback"][0] / got["baseline"][0])
                paired["default_vs_empty_wall"].append(got["tripwire_default"][0] / got["empty_callback"][0])
            base = times["baseline"]
            model_res: dict[str, Any] = {"step_ms_median": {c: 1000 * statistics.median(v) for c, v in times.items()}}
            model_res["ratios"] = _ratios(times, configs)
            model_res["cpu_ms_median"] = {c: 1000 * statistics.median(v) for c, v in cpu.items()}
            model_res["cpu_ratios"] = _ratios(cpu, configs)
            model_res["thread_ms_median"] = {c: 1000 * statistics.median(v) for c, v in thread.items()}
            model_res["thread_ratios"] = _ratios(thread, configs)
            base_med = statistics.median(base)
            model_res["hook_ms_per_step"] = {c: 1000 * statistics.median(v) for c, v in hook.items()}
            model_res["hook_estimate"] = {c: 1 + statistics.median(v) / base_med for c, v in hook.items()}
            model_res["default_paired"] = {k: mean_ci(v) for k, v in paired.items()}
            results["models"][model_name] = model_res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"Lightning capture overhead on {results['device_name']} ({'quick, ' if quick else ''}{repeats} repeat(s), "
          f"{timed} timed steps each)")
    print(f"{'model':<6} {'configuration':<22} {'step ms':>9} {'ratio':>7} {'spread':>15} {'goal':>6}")
    for model_name, res in results["models"].items():
        print(f"{model_name:<6} {'baseline':<22} {res['step_ms_median']['baseline']:>9.3f}")
        for config, r in res["ratios"].items():
            goal = GOALS.get(config)
            mark = "" if goal is None else (f"<={goal}" + (" ok" if r["median"] <= goal else " MISS"))
            print(f"{model_name:<6} {config:<22} {res['step_ms_median'][config]:>9.3f} {r['median']:>6.3f}x "
                  f"[{r['min']:.3f}, {r['max']:.3f}] {mark}")
        for config, r in res["cpu_ratios"].items():
            print(f"{model_name:<6} {config + ' (cpu)':<22} {res['cpu_ms_median'][config]:>9.3f} {r['median']:>6.3f}x "
                  f"[{r['min']:.3f}, {r['max']:.3f}] (process CPU time per step, all threads and the reduction process)")
        for config, r in res["thread_ratios"].items():
            print(f"{model_name:<6} {config + ' (thread)':<22} {res['thread_ms_median'][config]:>9.3f} {r['median']:>6.3f}x "
                  f"[{r['min']:.3f}, {r['max']:.3f}] (training-thread CPU time per step)")
        for config, est in res["hook_estimate"].items():
            print(f"{model_name:<6} {config + ' (hooks)':<22} {res['hook_ms_per_step'][config]:>9.3f} {est:>6.3f}x "
                  f"{'':>15} (1 + time in tripwire's hooks / baseline step)")
        labels = {"wall": "default / none, wall", "thread": "default / none, thread",
                  "empty_wall": "empty Callback / none", "default_vs_empty_wall": "default / empty Callback"}
        for kind, st in res["default_paired"].items():
            print(f"{model_name:<6} {labels[kind]:<32} {st['mean']:>6.3f}x "
                  f"[{st['ci_low']:.3f}, {st['ci_high']:.3f}] 95% CI of the mean over {st['n']} rounds "
                  f"(median {st['median']:.3f}x)")
    return results
