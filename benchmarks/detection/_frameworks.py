"""Detection programs that run through tripwire's framework callbacks (Lightning, Keras, XGBoost),
each with a small tracer beside the callback that records what the onset is computed from: the
start time and loss of every train step, non-finite values, and the validation losses."""

from __future__ import annotations

import bisect
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import _harness
from _harness import Result, SUITE_RULES

SAVE = {"interval": 10, "modes": {"eval": {"interval": 1}}}


class Trace:
    """Wall times (``time.time()``) and values recorded beside a callback, turned into a Result."""

    def __init__(self) -> None:
        self.walls: list[float] = []  # start of each train step
        self.losses: list[float] = []
        self.finite: list[bool] = []
        self.val: list[tuple[int, float, float]] = []  # (train step, value, wall)

    def begin(self) -> None:
        self.walls.append(time.time())

    def end(self, loss: float, finite: bool = True) -> None:
        self.losses.append(float(loss))
        self.finite.append(bool(finite) and math.isfinite(float(loss)))

    def validation(self, value: float) -> None:
        self.val.append((max(0, len(self.walls) - 1), float(value), time.time()))

    def result(self, findings: Any, planned: int, t0: float, t1: float) -> Result:
        """Findings of a framework callback as a Result: train-mode findings keep their step;
        eval-mode findings are placed at the last train step begun before their wall time."""
        r = Result(planned_steps=planned, steps_run=len(self.walls), seconds=t1 - t0)
        r.step_seconds = [w - t0 for w in self.walls]
        for i, (value, ok) in enumerate(zip(self.losses, self.finite)):
            r.saw_loss(i, value, ok)
        r.val_losses = [(s, v, w - t0) for s, v, w in self.val]
        for f in sorted(findings, key=lambda f: f.wall_time):
            if f.kind == "error":
                r.errors.append(f"{f.rule}: {f.message}")
                continue
            if f.rule in r.first:
                continue
            sec = max(0.0, f.wall_time - t0)
            step = f.step if f.mode == "train" else max(0, bisect.bisect_right(self.walls, f.wall_time) - 1)
            r.first[f.rule] = (int(step), sec)
        return r


def rules_with(**params: dict[str, Any]) -> list[Any]:
    """Every suite rule (with per-framework parameters) as a rule set: the integration leaves out
    those it cannot feed (as it does with ``default``), where naming them would be an error; for a
    fault program with one expected rule, that rule stops training when it fires (the rest of the
    run cannot change the figures)."""
    from tripwire._config import ActionSpec, RuleSpec

    out: list[Any] = []
    for r in SUITE_RULES:
        actions = None
        if _harness.STOP_WHEN and len(_harness.STOP_WHEN) == 1 and r in _harness.STOP_WHEN:
            actions = tuple(ActionSpec.parse(a, "actions") for a in ("log", "stop_training"))
        out.append(RuleSpec(r, dict(params.get(r, {})), actions, rule_set="detection-suite"))
    return out


def tmp_dir(tag: str) -> str:
    return tempfile.mkdtemp(prefix=f"tripwire-detect-{tag}-")


def cleanup(path: Any) -> None:
    if path is not None and "tripwire-detect-" in str(path):
        shutil.rmtree(path, ignore_errors=True)


def _finite_params(params: Any) -> bool:
    import torch

    return all(bool(torch.isfinite(p).all()) for p in params)


# ------------------------------------------------------------------------------------------ xgboost
XGB_NAMES = {"overfit": {"train": "train-logloss", "validation": "validation-logloss"},
             "overtraining": {"train": "train-logloss", "validation": "validation-logloss"}}


def xgb_run(seed: int, data: tuple[np.ndarray, ...], rounds: int, *, sklearn: bool = False, **params: Any) -> Result:
    """XGBoost with the TripwireCallback: the native ``xgb.train`` API, or ``XGBClassifier`` with
    ``callbacks=`` and ``eval_set=[train, validation]`` (``sklearn=True``)."""
    import xgboost as xgb

    from tripwire.integrations.xgboost import TripwireCallback

    trace = Trace()

    class Tracer(xgb.callback.TrainingCallback):
        def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            trace.begin()
            return False

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            sets = list(evals_log)
            if sets:
                first = evals_log[sets[0]]
                metric = next(iter(first))
                trace.end(first[metric][-1])
                if len(sets) > 1:
                    trace.validation(evals_log[sets[-1]][metric][-1])
            return False

    Xtr, ytr, Xva, yva = data
    out_dir = tmp_dir("xgb")
    cb = TripwireCallback(rules=rules_with(**XGB_NAMES), out_dir=out_dir, save=SAVE)
    base = {"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1, "tree_method": "hist"}
    t0 = time.time()
    if sklearn:
        estimator = xgb.XGBRegressor if str(params.get("objective", "")).startswith("reg:") else xgb.XGBClassifier
        model = estimator(n_estimators=rounds, random_state=seed, callbacks=[Tracer(), cb],
                                  **{**{k: v for k, v in base.items() if k != "nthread"}, "n_jobs": 1, **params})
        model.fit(Xtr, ytr, eval_set=[(Xtr, ytr), (Xva, yva)], verbose=False)
        booster = model.get_booster()
    else:
        dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
        booster = xgb.train({**base, "seed": seed, **params}, dtr, rounds, evals=[(dtr, "train"), (dva, "validation")],
                            callbacks=[Tracer(), cb], verbose_eval=False)
    t1 = time.time()
    cleanup(out_dir)
    r = trace.result(cb.findings, rounds, t0, t1)
    r.steps_run = booster.num_boosted_rounds()
    return r


# ---------------------------------------------------------------------------------------- lightning
def lightning_run(seed: int, net: Any, data: tuple[np.ndarray, ...], *, epochs: int, lr: float, loss: str = "ce",
                  opt: str = "adam", batch: int = 32, weight_decay: float = 0.0,
                  scheduler: Callable[[Any], Any] | None = None) -> Result:
    """A LightningModule around ``net`` with the TripwireCallback; ``scheduler(optimizer)`` returns
    an epoch-wise LR scheduler."""
    import logging
    import warnings

    import lightning as L
    import torch

    from tripwire.integrations.lightning import TripwireCallback

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    Xtr, ytr, Xva, yva = data
    trace = Trace()

    def lossf(out: Any, y: Any) -> Any:
        return torch.nn.functional.cross_entropy(out, y) if loss == "ce" else torch.nn.functional.mse_loss(out.squeeze(-1), y)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def training_step(self, batch: Any, i: int) -> Any:
            x, y = batch
            value = lossf(self.net(x), y)
            self.log("loss", value)
            return value

        def validation_step(self, batch: Any, i: int) -> Any:
            x, y = batch
            self.log("val_loss", lossf(self.net(x), y))

        def configure_optimizers(self) -> Any:
            if opt == "adam":
                o = torch.optim.Adam(self.parameters(), lr, weight_decay=weight_decay)
            elif opt == "adamw":
                o = torch.optim.AdamW(self.parameters(), lr, weight_decay=weight_decay)
            else:
                o = torch.optim.SGD(self.parameters(), lr, momentum=0.9 if opt == "sgd_momentum" else 0.0,
                                    weight_decay=weight_decay)
            return o if scheduler is None else {"optimizer": o, "lr_scheduler": scheduler(o)}

    class Tracer(L.Callback):
        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            trace.begin()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            value = outputs["loss"] if isinstance(outputs, dict) else outputs
            trace.end(float(value.detach()), _finite_params(pl_module.parameters()))

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            value = trainer.callback_metrics.get("val_loss")
            if value is not None:
                trace.validation(float(value))

    yt = torch.tensor(ytr) if loss == "ce" else torch.tensor(ytr, dtype=torch.float32)
    yv = torch.tensor(yva) if loss == "ce" else torch.tensor(yva, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(Xtr), yt), batch_size=batch, shuffle=True, generator=g)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(Xva), yv), batch_size=128)
    out_dir = tmp_dir("lightning")
    cb = TripwireCallback(rules=rules_with(), out_dir=out_dir, save=SAVE)
    trainer = L.Trainer(max_epochs=epochs, callbacks=[Tracer(), cb], enable_progress_bar=False, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    t0 = time.time()
    trainer.fit(Module(), train, val)
    t1 = time.time()
    cleanup(out_dir)
    r = trace.result(cb.findings, epochs * len(train), t0, t1)
    r.steps_run = int(trainer.global_step)
    return r


# -------------------------------------------------------------------------------------------- keras
def keras_run(seed: int, layers: Callable[[Any], list[Any]], data: tuple[np.ndarray, ...], *, epochs: int, lr: float,
              loss: Any = None, optimizer: Callable[[Any, float], Any] | None = None, batch: int = 32) -> Result:
    """A Keras Sequential model (torch backend) with the TripwireCallback. ``loss``: a function of the
    keras module returning the loss (default: sparse categorical cross-entropy from logits)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import warnings

    import keras
    import torch

    from tripwire.integrations.keras import TripwireCallback

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    keras.utils.set_random_seed(seed)
    Xtr, ytr, Xva, yva = data
    trace = Trace()
    model = keras.Sequential([keras.Input((Xtr.shape[1],))] + layers(keras))
    opt = keras.optimizers.Adam(lr) if optimizer is None else optimizer(keras, lr)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True) if loss is None else loss(keras))

    class Tracer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            trace.begin()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            trace.end(float((logs or {}).get("loss", math.nan)))  # Keras logs the epoch's running mean

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if logs and "val_loss" in logs:
                trace.validation(float(logs["val_loss"]))

    out_dir = tmp_dir("keras")
    cb = TripwireCallback(rules=rules_with(), out_dir=out_dir, save=SAVE)
    t0 = time.time()
    model.fit(Xtr, ytr, validation_data=(Xva, yva), epochs=epochs, batch_size=batch, callbacks=[Tracer(), cb], verbose=0)
    t1 = time.time()
    cleanup(out_dir)
    return trace.result(cb.findings, epochs * math.ceil(len(Xtr) / batch), t0, t1)
