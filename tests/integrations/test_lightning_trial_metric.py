"""TripwireCallback's ``trial_metric``: a metric the validation logs, never a training one (trial 19b)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


class Trial:
    """A plain trial (docs/tune.md, 'The trial contract') that never stops the fit."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, float]] = []

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        return False


class Net(L.LightningModule):
    """Logs ``train_loss`` (on_step and on_epoch: also ``train_loss_step``) and ``acc`` in training,
    ``val_loss`` in validation_step (``val_on_step``: on_step too) and ``val_score`` in
    on_validation_epoch_end."""

    def __init__(self, val_on_step: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.val_on_step = val_on_step

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("acc", (logits.argmax(1) == y).float().mean())
        return loss

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), on_step=self.val_on_step, on_epoch=True)

    def on_validation_epoch_end(self) -> None:
        self.log("val_score", 0.5 + 0.1 * self.current_epoch)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _fit(tmp_path: Path, trial_metric: str, epochs: int = 2, model: Net | None = None, val_loaders: int = 1,
         **trainer_kw: Any) -> tuple[Trial, Any]:
    trial = Trial()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric=trial_metric)
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[cb], **trainer_kw)
    valid = [DataLoader(_data(16, seed=1), batch_size=8) for _ in range(val_loaders)]
    trainer.fit(model or Net(), DataLoader(_data(32, seed=0), batch_size=8), valid if val_loaders > 1 else valid[0])
    return trial, trainer


def test_a_training_metric_is_refused_naming_the_validations(tmp_path: Path) -> None:
    # trial 19b: train_loss (logged by training_step only) was reported to the trial each epoch
    with pytest.raises(ConfigError, match=r"trial_metric: 'train_loss' was not logged by validation \(training logs "
                                          r"it.*; logged by validation: val_loss, val_score \(") as info:
        _fit(tmp_path, "train_loss")
    assert "acc" not in str(info.value).split("logged by validation:")[1]


def test_a_typo_is_offered_the_validations_metrics_only(tmp_path: Path) -> None:
    # trial 19b: the candidates held acc, train_loss and Lightning's train_loss_step
    with pytest.raises(ConfigError, match=r"'val_los' was not logged by validation; did you mean 'val_loss'\?; "
                                          r"logged by validation: val_loss, val_score \(") as info:
        _fit(tmp_path, "val_los")
    assert "train_loss" not in str(info.value) and "acc," not in str(info.value)


@pytest.mark.parametrize("metric", ["val_loss", "val_score"])
def test_validation_step_and_validation_epoch_end_metrics_are_reported(tmp_path: Path, metric: str) -> None:
    trial, trainer = _fit(tmp_path, metric)
    assert [step for step, _ in trial.reports] == [1, 2]
    assert trial.reports[-1][1] == pytest.approx(float(trainer.callback_metrics[metric]))


def test_a_validation_metric_logged_on_step_too_and_per_dataloader_is_reported(tmp_path: Path) -> None:
    trial, _ = _fit(tmp_path, "val_loss_epoch", model=Net(val_on_step=True))
    assert [step for step, _ in trial.reports] == [1, 2]
    trial, trainer = _fit(tmp_path / "two", "val_loss/dataloader_idx_1", val_loaders=2)
    assert [step for step, _ in trial.reports] == [1, 2]
    assert trial.reports[-1][1] == pytest.approx(float(trainer.callback_metrics["val_loss/dataloader_idx_1"]))


def test_a_validation_before_the_epoch_end_reports_its_own_value(tmp_path: Path) -> None:
    # val_check_interval=N steps: the epoch's last validation is reported at the epoch's end
    trial, trainer = _fit(tmp_path, "val_loss", val_check_interval=3)
    assert [step for step, _ in trial.reports] == [1, 2]
    assert trial.reports[-1][1] == pytest.approx(float(trainer.callback_metrics["val_loss"]))
