"""Trial 29f F7: a model left in eval mode during training (``self.net.eval()`` in
``training_step``, or a submodule put in eval before ``fit``, which Lightning keeps) ran dropout and
BatchNorm in inference mode for the whole fit, and no rule, default or opt-in, could see it. The
callback now says so at the end of the first train batch (a WARNING, once per fit, naming the
modules); a submodule kept in eval on purpose whose parameters do not learn (``requires_grad=False``,
or held by no optimizer: a pretrained backbone, an EMA copy) is said at INFO only, and a healthy fit
says nothing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tripwire.integrations.lightning._callback import _mode_effect  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def _mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))


class Clf(L.LightningModule):
    def __init__(self, force_eval: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = _mlp()
        self.force_eval = force_eval

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.force_eval:
            self.net.eval()  # the bug: left over from a metric computed in eval mode
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=0.1)


class FrozenBackbone(Clf):
    """A pretrained backbone kept in eval on purpose, frozen; a trainable head with its own dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU()),
                                 nn.Dropout(0.5), nn.Linear(8, 2))
        self.net[0].requires_grad_(False)
        self.net[0].eval()


def _loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16)


def _fit(model: L.LightningModule, out: Path, cb: TripwireCallback | None = None, epochs: int = 2) -> TripwireCallback:
    cb = cb or TripwireCallback(out_dir=str(out), save_interval=2)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, accelerator="cpu", devices=1, max_epochs=epochs, callbacks=[cb])
    trainer.fit(model, _loader(), _loader())
    return cb


def _said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tripwire" and r.levelno == level and "in eval mode" in r.getMessage()]


def test_a_net_put_in_eval_in_training_step_is_a_warning_once_per_fit(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        cb = _fit(Clf(force_eval=True), tmp_path)
    said = _said(caplog, logging.WARNING)
    assert len(said) == 1, said  # (2 epochs, a validation between them: said once)
    msg = said[0]
    assert msg.startswith("tripwire: 2 module(s) of the LightningModule that compute otherwise in training were in "
                          "eval mode at train batch 0 of epoch 0: net.1 (BatchNorm1d), net.3 (Dropout)")
    assert "dropout is off" in msg and "running statistics" in msg
    assert ".eval() called in training_step, on_train_epoch_start or a callback (the topmost module in eval mode: " \
           "net)" in msg
    assert "(requires_grad_(False), or held by no optimizer: a pretrained backbone, an EMA copy) is said at " \
           "INFO instead" in msg
    assert not _said(caplog, logging.INFO)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tripwire"):  # a later fit through the callback: said again
        _fit(Clf(force_eval=True), tmp_path, cb=cb, epochs=1)
    assert len(_said(caplog, logging.WARNING)) == 1


def test_a_whole_module_in_eval_and_a_trainable_submodule_put_in_eval_before_fit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class WholeEval(Clf):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            self.eval()
            return super().training_step(batch, batch_idx)

    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _fit(WholeEval(), tmp_path / "whole", epochs=1)
    said = _said(caplog, logging.WARNING)
    assert len(said) == 1 and "(the topmost module in eval mode: the LightningModule itself)" in said[0]
    caplog.clear()
    model = Clf()
    model.net[3].eval()  # (before fit: Lightning keeps the submodule's mode)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _fit(model, tmp_path / "sub", epochs=1)
    said = _said(caplog, logging.WARNING)
    assert len(said) == 1 and ": net.3 (Dropout). In eval mode dropout is off" in said[0], said
    assert "running statistics" not in said[0]


def test_the_healthy_twin_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _fit(Clf(), tmp_path)
    assert _said(caplog, logging.WARNING) == [] and _said(caplog, logging.INFO) == []


def test_a_frozen_backbone_kept_in_eval_is_said_at_info_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = FrozenBackbone()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _fit(model, tmp_path)
    assert _said(caplog, logging.WARNING) == []
    info = _said(caplog, logging.INFO)
    assert len(info) == 1 and "under frozen submodule(s) (every parameter requires_grad=False or held by no " \
                              "optimizer: net.0): net.0.1 (BatchNorm1d)" in info[0], info
    assert "net.1" not in info[0]  # (the head's dropout trains: it is in train mode)
    assert not model.net[0].training and model.net[1].training  # (nothing changed the modes)


def test_an_eval_copy_no_optimizer_holds_is_said_at_info_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class WithEma(Clf):  # an EMA copy of the net kept in eval, its parameters requires_grad=True but in no optimizer
        def __init__(self) -> None:
            super().__init__()
            self.ema = _mlp().eval()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.net.parameters(), lr=0.1)

    with caplog.at_level(logging.INFO, logger="tripwire"):
        _fit(WithEma(), tmp_path, epochs=1)
    assert _said(caplog, logging.WARNING) == []
    info = _said(caplog, logging.INFO)
    assert len(info) == 1 and "(every parameter requires_grad=False or held by no optimizer: ema): ema.1 " \
                              "(BatchNorm1d), ema.3 (Dropout)" in info[0], info


def test_which_modules_compute_otherwise_in_training() -> None:
    class Stochastic(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 0.5 if self.training else x

    assert _mode_effect(nn.Dropout(0.1)) == "dropout" and _mode_effect(nn.Dropout2d(0.1)) == "dropout"
    assert _mode_effect(nn.Dropout(0.0)) is None
    assert _mode_effect(nn.BatchNorm2d(3)) == "norm"
    assert _mode_effect(nn.BatchNorm1d(3, track_running_stats=False)) is None  # (batch statistics in both modes)
    assert _mode_effect(nn.InstanceNorm1d(3, track_running_stats=True)) == "norm"
    assert _mode_effect(nn.InstanceNorm1d(3)) is None
    assert _mode_effect(nn.LSTM(3, 3, num_layers=2, dropout=0.2)) == "dropout" and _mode_effect(nn.LSTM(3, 3)) is None
    assert _mode_effect(nn.MultiheadAttention(4, 2, dropout=0.1)) == "dropout"
    assert _mode_effect(Stochastic()) == "other"
    assert _mode_effect(nn.Linear(3, 3)) is None and _mode_effect(nn.Sequential()) is None
    assert _mode_effect(nn.LayerNorm(3)) is None and _mode_effect(nn.ReLU()) is None
