"""Trial 36q: two WARNINGs that named something that had not happened.

- A fit that crashed, resumed from its checkpoint with the same callback object (``ckpt_path=``), also
  said "this fit starts at global step 8 and ... already holds train steps up to 10 (an earlier fit
  through this callback) ... To continue one training, resume it with trainer.fit(..., ckpt_path=...)",
  which it had done; the steps written after the checkpoint are named by the session's own WARNING.
- ``validate()`` after a second, fresh fit (a new Trainer) said that the run held steps "written
  after this checkpoint", though nothing was resumed: the state a stage hands to the next one in the
  process is no checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def _data(seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 8, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)


class Net(L.LightningModule):
    def __init__(self, crash_at: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.crash_at = crash_at

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.crash_at is not None and self.global_step == self.crash_at:
            raise RuntimeError(f"boom at {self.crash_at}")
        return F.cross_entropy(self.net(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _trainer(callbacks: list[Any], **kw: Any) -> L.Trainer:
    return L.Trainer(logger=False, enable_checkpointing=bool(kw.pop("ckpt", False)), enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu", callbacks=callbacks, **kw)


def test_a_crash_resumed_with_the_same_callback_says_only_what_the_checkpoint_left(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(rules=["default"], out_dir=tmp_path / "run", save_interval=1)
    ckpts = tmp_path / "ck"
    with pytest.raises(RuntimeError, match="boom at 10"):
        _trainer([cb, ModelCheckpoint(dirpath=ckpts, every_n_train_steps=4, save_top_k=-1)], max_epochs=3,
                 ckpt=True).fit(Net(crash_at=10), _data(), _data(1))
    last = max(ckpts.glob("*.ckpt"), key=lambda p: int(p.stem.split("step=")[1]))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], max_epochs=3).fit(Net(), _data(), _data(1), ckpt_path=str(last))
    said = caplog.text
    assert "written after this checkpoint" in said  # (the session names the steps past the checkpoint)
    assert "already holds train steps" not in said
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_validate_after_a_second_fresh_fit_says_nothing_of_a_checkpoint(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(rules=["default"], out_dir=tmp_path / "run")
    model = Net()
    _trainer([cb], max_epochs=2).fit(model, _data(), _data(1))
    second = _trainer([cb], max_epochs=1)
    second.fit(model, _data(), _data(1))  # (a fresh training: its documented WARNING is said here)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        second.validate(model, _data(1), verbose=False)
    assert "checkpoint" not in caplog.text
