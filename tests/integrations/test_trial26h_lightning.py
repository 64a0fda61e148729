"""Trial 26h (Lightning, one process): an unknown rule name given to the callback's constructor is
said once (the ConfigError), not first as a WARNING too; a fit resumed from a checkpoint taken at
an epoch's last train batch (before its validation) numbers its validations as the uninterrupted
fit does."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Reg(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.val_losses: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.mse_loss(self.net(x).squeeze(-1), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        self.val_losses.append(float(loss))
        self.log("val_loss", loss)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _data(n: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, 2 * x[:, 0]), batch_size=8)


def _fit(tmp_path: Path, out: str, epochs: int, ckpt: Path | None = None, resume: Path | None = None) -> Reg:
    callbacks: list[Any] = [TripwireCallback(out_dir=tmp_path / out, save_interval=5)]
    if ckpt is not None:  # at every 6th step: each epoch's last batch, before its validation
        callbacks.append(ModelCheckpoint(dirpath=ckpt, every_n_train_steps=6, save_top_k=-1, filename="{step}"))
    trainer = L.Trainer(callbacks=callbacks, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        max_epochs=epochs, enable_checkpointing=ckpt is not None, default_root_dir=str(tmp_path),
                        num_sanity_val_steps=0)
    model = Reg()
    trainer.fit(model, _data(48, 0), _data(8, 1), ckpt_path=resume)
    return model


def test_an_unknown_rule_in_the_constructor_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with pytest.raises(ConfigError, match=r"exploding_tensr.*did you mean 'exploding_tensor'"):
            TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_tensr"])
    said = [r.getMessage() for r in caplog.records if "exploding_tensr" in r.getMessage()]
    assert said == [], said  # (the ConfigError says it; no WARNING before it)


def test_a_fit_resumed_at_an_epochs_last_batch_numbers_its_validations_as_the_uninterrupted_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 26h finding 2: resumed from step=12.ckpt (epoch 2's last batch, before its validation,
    which the resumed fit does not run again), the next validation took eval step 2 again: eval steps
    [1, 2, 2], value('val_loss', 2) was epoch 3's, train_steps [5, 17, 17]."""
    whole = _fit(tmp_path, "whole", 3)
    _fit(tmp_path, "run", 2, ckpt=tmp_path / "ck")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed = _fit(tmp_path, "run", 3, resume=tmp_path / "ck" / "step=12.ckpt")
    assert len(resumed.val_losses) == 1  # (epoch 3's alone: epoch 2's validation is not run again)
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1 and "the resumed validations count on from eval step 3" in said[0], said
    expected = tripwire.open_run(tmp_path / "whole")
    run = tripwire.open_run(tmp_path / "run")
    steps, values = run.series("val_loss")
    assert steps.tolist() == expected.series("val_loss")[0].tolist() == [1, 2, 3]
    assert values.tolist() == pytest.approx(whole.val_losses)
    assert run.value("val_loss", "raw", 3, "eval") == pytest.approx(resumed.val_losses[0])
    assert run.train_steps("eval").tolist() == expected.train_steps("eval").tolist() == [5, 11, 17]


class _Trial:
    number, attempt, params, max_resource = 0, 1, {}, 3

    def report(self, step: int, value: float) -> bool:
        return False


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_a_trial_refuses_a_multi_process_strategy_as_lightning_hands_it_the_modules_log(
        tmp_path: Path, strategy: str) -> None:
    """Trial 26h finding 3 (the tuner's side runs in test_trial26h_ddp.py): Lightning's Trainer sets
    every callback's ``log`` in ``_run``, before the strategy sets up its processes (setup() comes after
    the ddp process group, which a tuner's relaunched script never joins)."""
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=strategy, logger=False, enable_progress_bar=False,
                        enable_model_summary=False)
    model = Reg()
    model.trainer = trainer
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=_Trial(), trial_metric="val_loss")
    with pytest.raises(ConfigError, match=rf"TripwireCallback\(trial=\.\.\.\): the trial's Trainer trains in 2 processes "
                                          rf"\(strategy '{strategy}'\).*accepted: Trainer\(devices=1\)"):
        cb.log = model.log
    with pytest.raises(ConfigError, match=r"trains in 2 processes"):
        cb.setup(trainer, model, "fit")
    plain = TripwireCallback(out_dir=tmp_path / "plain")  # (no trial: DDP is for it to run)
    plain.log = model.log
    assert plain.log == model.log
    one = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False)
    model.trainer = one
    cb.log = model.log  # (one process: a trial's fit)
