"""Training functions for tests/tune/test_trial36j.py (importable by the tuner's worker processes);
each trial's tripwire run goes to ``$TRIPWIRE_TRIAL36J_OUT/trial-<number>``."""

from __future__ import annotations

import os
from typing import Any


def _out(trial: Any) -> str:
    return os.path.join(os.environ["TRIPWIRE_TRIAL36J_OUT"], f"trial-{trial.number}")


def xgb_data() -> Any:
    import numpy as np
    import xgboost as xgb

    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 8))
    y = (x[:, 0] + rng.normal(size=600) > 0).astype(int)
    return xgb.DMatrix(x[:400], y[:400]), xgb.DMatrix(x[400:], y[400:])


def train_xgb_early_stopping(params: dict[str, Any], trial: Any) -> None:
    """XGBoost's EarlyStopping, listed first, ends boosting at round 2 in every trial (a rung level)."""
    import xgboost as xgb

    from tripwire.integrations.xgboost import TripwireCallback

    dtrain, dvalid = trial.context
    early = xgb.callback.EarlyStopping(rounds=1, metric_name="auc", data_name="validation", maximize=True, min_delta=1.0)
    xgb.train({**params, "eval_metric": "auc", "nthread": 1}, dtrain, num_boost_round=trial.max_resource,
              evals=[(dvalid, "validation")], verbose_eval=False,
              callbacks=[early, TripwireCallback(trial=trial, trial_metric="validation-auc", out_dir=_out(trial))])


def train_lightning_min_epochs(params: dict[str, Any], trial: Any) -> None:
    """A Lightning fit with ``min_epochs=3``: a trial the tuner stops at epoch 1 trains on to 3."""
    import lightning as L
    import torch

    from tripwire.integrations.lightning import TripwireCallback

    torch.set_num_threads(1)

    class Net(L.LightningModule):
        def __init__(self, lr: float) -> None:
            super().__init__()
            self.lr, self.net = lr, torch.nn.Linear(4, 1)

        def training_step(self, b: Any, i: int) -> Any:
            return torch.nn.functional.mse_loss(self.net(b[0]), b[1])

        def validation_step(self, b: Any, i: int) -> None:
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(b[0]), b[1]))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)
    L.Trainer(max_epochs=trial.max_resource, min_epochs=3, logger=False, enable_progress_bar=False,
              enable_checkpointing=False, enable_model_summary=False,
              callbacks=[TripwireCallback(trial=trial, trial_metric="val_loss", out_dir=_out(trial))]).fit(
        Net(params["lr"]), data, data)
