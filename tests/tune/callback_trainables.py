"""Training functions for tests/tune/test_tune_callbacks.py: ordinary XGBoost, Lightning and Keras
training code whose only tuning-specific part is tripwire's callback built with ``trial=trial``.

They run in the tuner's spawned worker processes, so they live in an importable module. Each one
writes the framework's own record of the run (XGBoost's ``evals_result``, Lightning's
``CSVLogger`` file, Keras's ``History``) and the number of rounds/epochs it really ran to
``<out>/<framework>-<trial>.json``, where ``<out>`` comes from the per-worker ``setup()`` (the
environment variable ``TRIPWIRE_TUNE_CB_OUT`` set by the test), so the test can compare them with the
tuner's journal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")


def _out() -> Path:
    return Path(os.environ["TRIPWIRE_TUNE_CB_OUT"])


def _write(kind: str, number: int, data: dict[str, Any]) -> None:
    (_out() / f"{kind}-{number}.json").write_text(json.dumps(data))


def _planted(trial: Any) -> dict[str, Any]:
    """With ``TRIPWIRE_TUNE_CB_PLANT=<step>``, trial 0's callback gets a rule, checked every step, that
    stops training from that training step on (a stand-in for oscillating_loss on a diverging run)."""
    at = os.environ.get("TRIPWIRE_TUNE_CB_PLANT")
    if not at or trial.number != 0:
        return {}
    from tripwire import FunctionRule

    rule = FunctionRule(lambda history, step, mode: f"loss went up and down at step {step}" if step >= int(at) else None,
                        name="planted", actions=["stop_training"])
    return {"rules": [rule], "save_interval": 1}


# ---- XGBoost --------------------------------------------------------------------------------------
def setup_xgboost() -> dict[str, Any]:
    """Once per worker: an imbalanced binary set (about 11% positives)."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=800, n_features=12, n_informative=5, weights=[0.89], flip_y=0.05,
                               random_state=0)
    return {"dtrain": xgb.DMatrix(X[:500], label=y[:500]), "dvalid": xgb.DMatrix(X[500:], label=y[500:])}


def train_xgboost(params: dict[str, Any], trial: Any) -> float:
    import xgboost as xgb

    from tripwire.integrations.xgboost import TripwireCallback

    ctx = trial.context
    history: dict[str, Any] = {}
    callback = TripwireCallback(trial=trial, trial_metric="validation-auc",
                                out_dir=str(_out() / f"xgb-run-{trial.number}"), **_planted(trial))
    booster = xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1,
                         "eta": params["eta"], "max_depth": params["max_depth"]},
                        ctx["dtrain"], num_boost_round=trial.max_resource,
                        evals=[(ctx["dtrain"], "train"), (ctx["dvalid"], "validation")],
                        evals_result=history, callbacks=[callback], verbose_eval=False)
    auc = history["validation"]["auc"]
    _write("xgboost", trial.number, {"auc": auc, "rounds": booster.num_boosted_rounds(),
                                     "stop_reason": callback.stop_reason})
    return float(auc[-1])


# ---- Lightning ------------------------------------------------------------------------------------
def setup_torch() -> dict[str, Any]:
    import logging

    import torch
    from sklearn.datasets import make_classification

    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no banner per trial
    X, y = make_classification(n_samples=256, n_features=8, n_informative=4, random_state=0)
    X = torch.tensor(X, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.float32)
    return {"train": (X[:192], y[:192]), "valid": (X[192:], y[192:])}


def train_lightning(params: dict[str, Any], trial: Any) -> float:
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Net(pl.LightningModule):
        def __init__(self, lr: float, hidden: int) -> None:
            super().__init__()
            self.lr = lr
            self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
            self.epochs_trained = 0

        def _loss(self, batch: Any) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.binary_cross_entropy_with_logits(self.net(x).squeeze(-1), y)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self._loss(batch)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", self._loss(batch), on_epoch=True, prog_bar=False)

        def on_train_epoch_end(self) -> None:
            self.epochs_trained += 1

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    torch.manual_seed(0)
    ctx = trial.context
    train = DataLoader(TensorDataset(*ctx["train"]), batch_size=64, shuffle=True)
    valid = DataLoader(TensorDataset(*ctx["valid"]), batch_size=64)
    model = Net(params["lr"], params["hidden"])
    logger = CSVLogger(str(_out()), name=f"lightning-log-{trial.number}", version=0)
    callback = TripwireCallback(trial=trial, trial_metric="val_loss", out_dir=str(_out() / f"pl-run-{trial.number}"),
                                **_planted(trial))
    trainer = pl.Trainer(max_epochs=trial.max_resource, accelerator="cpu", devices=1, logger=logger,
                         callbacks=[callback], enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, log_every_n_steps=1)
    trainer.fit(model, train, valid)
    value = float(trainer.callback_metrics["val_loss"])
    _write("lightning", trial.number, {"epochs": model.epochs_trained, "metrics_csv": str(Path(logger.log_dir) / "metrics.csv"),
                                       "trial_stopped": callback.trial_stopped})
    return value


# ---- Keras ----------------------------------------------------------------------------------------
def train_keras(params: dict[str, Any], trial: Any) -> float:
    import keras

    from tripwire.integrations.keras import TripwireCallback

    keras.utils.set_random_seed(0)
    ctx = trial.context
    (xt, yt), (xv, yv) = ctx["train"], ctx["valid"]
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(params["hidden"], activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(params["lr"]), loss="binary_crossentropy")
    callback = TripwireCallback(trial=trial, trial_metric="val_loss", out_dir=str(_out() / f"keras-run-{trial.number}"),
                                **_planted(trial))
    history = model.fit(xt.numpy(), yt.numpy(), validation_data=(xv.numpy(), yv.numpy()), batch_size=64,
                        epochs=trial.max_resource, callbacks=[callback], verbose=0)
    _write("keras", trial.number, {"val_loss": [float(v) for v in history.history["val_loss"]],
                                   "epochs": len(history.epoch)})
    return float(history.history["val_loss"][-1])
