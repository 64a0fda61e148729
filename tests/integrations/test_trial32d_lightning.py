"""Trial 32d (a PyTorch Lightning engineer, CPU), the Lightning callback's side.

- F2: a ``trainer.validate()`` run on its own, whose validation gave a NaN ``val_loss`` with
  ``actions=["log", "stop_training"]``, logged "stopping training", set ``stopped_by`` and left the run
  ``stopped`` and ``trainer.should_stop`` True, though every batch ran: there is no training to stop.
  The same for ``test()`` and ``predict()``; a NaN in a fit's validation still stops the fit.
- F3: a fit with ``gradient_clip_val=1.0`` was told by ``oscillating_loss`` to add gradient clipping.
- F6: a torchmetrics ``Metric`` (``self.train_acc = torchmetrics.Accuracy(...)``) was hooked as a layer:
  ``train_acc/output``, the batch accuracy, stood among the activations.
- F10: where ``EarlyStopping`` and a rule stopped at the same validation, only the rule was named.
"""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import EarlyStopping  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

STOP = ["log", "stop_training"]
NO_TRAINING = "asked to stop training, but there is no training to stop in trainer."


def _data(n: int = 32, batch: int = 8) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch)


def _trainer(cb: TripwireCallback, *more: Any, **kw: Any) -> Any:
    kw.setdefault("max_epochs", 1)
    return L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, callbacks=[cb, *more], **kw)


class Net(L.LightningModule):
    """A NaN ``val_loss``/``test_loss`` at batch ``nan_at`` of a validation (of epoch ``nan_epoch`` in a
    fit), and NaN inputs in ``predict`` at batch ``nan_at``; counts the evaluation batches run."""

    def __init__(self, nan_at: int | None = 1, nan_epoch: int = 0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.nan_at, self.nan_epoch = nan_at, nan_epoch
        self.ran: dict[str, int] = {}

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return F.cross_entropy(self(batch[0]), batch[1])

    def _loss(self, batch: Any, batch_idx: int, stage: str) -> Any:
        self.ran[stage] = self.ran.get(stage, 0) + 1
        loss = F.cross_entropy(self(batch[0]), batch[1])
        if batch_idx == self.nan_at and (self.trainer.state.fn != "fit" or self.current_epoch == self.nan_epoch):
            loss = loss * float("nan")
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch, batch_idx, "validate"))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", self._loss(batch, batch_idx, "test"))

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        self.ran["predict"] = self.ran.get("predict", 0) + 1
        x = batch[0]
        return self(x * float("nan") if batch_idx == self.nan_at else x)  # (NaN layer outputs)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _no_training_said(caplog: pytest.LogCaptureFixture, stage: str) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert not any("stopping training" in line for line in lines), lines
    return [line for line in lines if NO_TRAINING + stage + "()" in line]


# --------------------------------------------------------------------------- F2: no training to stop
@pytest.mark.parametrize("stage, loss", [("validate", "val_loss"), ("test", "test_loss")])
def test_a_stop_asked_outside_a_fit_stops_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture, stage: str,
                                                  loss: str) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    mode = "eval" if stage == "validate" else "test"
    rules = ["default", {"name": "exploding_tensor", "modes": [mode], "actions": STOP}]
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=rules, actions=STOP)
    trainer, model = _trainer(cb), Net(nan_at=1)
    result = getattr(trainer, stage)(model, _data())
    assert model.ran[stage] == 4 and result[0][loss] != result[0][loss]  # (every batch ran: a NaN result)
    found = [f for f in cb.findings if f.rule == "exploding_tensor"]
    assert found and found[0].mode == mode, cb.findings
    assert cb.stopped_by is None and cb.stop_reason is None
    assert trainer.should_stop is False
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.stop_reasons == {}
    assert [f.rule for f in run.findings] == ["exploding_tensor"]
    said = _no_training_said(caplog, stage)
    assert said == [f"tripwire: rule 'exploding_tensor' at step {found[0].step} ({found[0].mode}) asked to stop "
                    f"training, but there is no training to stop in trainer.{stage}(): Lightning runs every batch of "
                    f"it; the finding is recorded, and the run is not marked stopped for it"], said
    assert "stopped_by" not in repr(cb) and "run complete" in repr(cb)


def test_a_stop_asked_in_predict_stops_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    rule = {"name": "exploding_tensor", "modes": ["predict"], "collections": ["activations"], "actions": STOP}
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[rule], save_interval=1)
    trainer, model = _trainer(cb), Net(nan_at=1)
    predictions = trainer.predict(model, _data())
    assert model.ran["predict"] == 4 and len(predictions) == 4
    found = [f for f in cb.findings if f.rule == "exploding_tensor"]
    assert found and found[0].mode == "predict", cb.findings
    assert cb.stopped_by is None and trainer.should_stop is False
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    assert len(_no_training_said(caplog, "predict")) == 1


def test_a_nan_in_a_fits_validation_still_stops_the_fit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=STOP)
    trainer = _trainer(cb, max_epochs=4)
    trainer.fit(Net(nan_at=1, nan_epoch=1), _data(), _data())
    assert trainer.current_epoch == 2 and trainer.global_step == 8  # (stopped in epoch 1, of 4)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor" and cb.stopped_by.mode == "eval"
    assert tripwire.open_run(tmp_path / "run").status == "stopped"
    assert any("stopping training: rule 'exploding_tensor'" in r.getMessage() for r in caplog.records)
    assert not any(NO_TRAINING in r.getMessage() for r in caplog.records)


def test_a_validate_after_a_stopped_fit_keeps_the_fits_stop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (repeat: the rule fires again in the validate, where the NaN is its own)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[{"name": "exploding_tensor", "repeat": True}], actions=STOP)
    trainer, model = _trainer(cb, max_epochs=4), Net(nan_at=1, nan_epoch=1)
    trainer.fit(model, _data(), _data())
    stopped, reason = cb.stopped_by, cb.stop_reason
    assert stopped is not None and reason is not None
    model.nan_at = 2  # (a NaN of its own, at another eval step)
    caplog.clear()
    trainer.validate(model, _data())
    assert cb.stopped_by is stopped and cb.stop_reason == reason
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.stop_reasons[0] == reason
    assert len([f for f in run.findings if f.rule == "exploding_tensor"]) == 2
    assert len(_no_training_said(caplog, "validate")) == 1


def test_a_validate_before_a_fit_leaves_the_fit_to_train(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=STOP)
    trainer, model = _trainer(cb, max_epochs=2), Net(nan_at=1)
    trainer.validate(model, _data())
    assert trainer.should_stop is False
    model.nan_at = None
    trainer.fit(model, _data(), _data())
    assert trainer.global_step == 8 and cb.stopped_by is None
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_the_raise_action_still_raises_outside_a_fit(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["raise"])
    with pytest.raises(tripwire.TrainingStopped, match="exploding_tensor"):
        _trainer(cb).validate(Net(nan_at=1), _data())
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


# ------------------------------------------------------------------ F3: a fit that clips is not told to
class Swinging(L.LightningModule):
    """A linear classifier at SGD lr 100: its loss swings far above its start."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Linear(4, 2)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return F.cross_entropy(self.net(batch[0]), batch[1])

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=100.0, momentum=0.9)


@pytest.mark.parametrize("clip", [1.0, None])
def test_oscillating_loss_reads_the_trainers_clipping(tmp_path: Path, clip: float | None) -> None:
    rules = [{"name": "oscillating_loss", "actions": STOP}]
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=rules)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 4, generator=g) * 3
    data = DataLoader(TensorDataset(x, (x[:, 0] + torch.randn(256, generator=g) > 0).long()), batch_size=4)
    _trainer(cb, max_epochs=1, gradient_clip_val=clip).fit(Swinging(), data)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "oscillating_loss", cb.findings
    message = cb.stopped_by.message
    if clip:
        assert "The optimizer clips the gradients it applies already (to a global norm 1)" in message, message
        assert "gradient clipping." not in message, message
    else:
        assert message.endswith("add warm-up or gradient clipping."), message


# ------------------------------------------------------------------------------ F6: metrics are no layers
tm = pytest.importorskip("torchmetrics")


class WithMetrics(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.train_acc = tm.Accuracy(task="multiclass", num_classes=2)
        self.metrics = tm.MetricCollection({"f1": tm.F1Score(task="multiclass", num_classes=2)})
        self.val_acc = tm.Accuracy(task="multiclass", num_classes=2)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        out = self.net(batch[0])
        self.log("train_acc", self.train_acc(out, batch[1]))
        self.log_dict(self.metrics(out, batch[1]))
        return F.cross_entropy(out, batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        out = self.net(batch[0])
        self.log("val_acc", self.val_acc(out, batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def test_torchmetrics_metrics_are_not_captured_as_activations(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["activations"], save_interval=1)
    _trainer(cb, max_epochs=1).fit(WithMetrics(), _data(), _data())
    run = tripwire.open_run(tmp_path / "run")
    names = run.tensor_names(collection="activations")
    assert names == ["net.0/output", "net.1/output", "net.2/output"], names
    assert "train_acc" in run.tensor_names() and "val_acc" in run.tensor_names()  # (the logged values stay)


class Fake(nn.Module):
    """A torchmetrics-like Metric, from a stand-in module: detected by the loaded torchmetrics' class."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Linear(2, 2)  # (a metric's own network: not hooked either)


def test_metric_modules_are_found_by_the_loaded_torchmetrics_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the skip is ActivationCapture's: a hand-written loop's capture_activations gets it too
    from tripwire.integrations._torch import ActivationCapture, loaded_metric_class

    model = nn.Sequential(nn.Linear(2, 2), Fake(), nn.Linear(2, 2))

    def hooked() -> frozenset[str]:
        acts = ActivationCapture()
        acts.attach(model, outputs=True, inputs=False, relu=False)
        try:
            return acts.hooked
        finally:
            acts.detach()

    monkeypatch.setitem(sys.modules, "torchmetrics", types.SimpleNamespace(Metric=Fake))
    assert loaded_metric_class() is Fake
    assert hooked() == {"0", "2"}  # (neither the Metric nor the module inside it)
    monkeypatch.delitem(sys.modules, "torchmetrics")
    assert loaded_metric_class() is None
    assert hooked() == {"0", "1.features", "2"}  # (not loaded: nothing is a Metric, nothing imported)
    assert "torchmetrics" not in sys.modules


# ------------------------------------------------------------ F10: a rule and EarlyStopping in one epoch
def test_early_stopping_asking_in_the_same_epoch_is_named_in_the_stop_reason(tmp_path: Path) -> None:
    # the NaN val_loss of epoch 1: exploding_tensor stops, and EarlyStopping (check_finite) asks too
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=STOP)
    es = EarlyStopping(monitor="val_loss", patience=100)
    trainer = _trainer(cb, es, max_epochs=4)
    trainer.fit(Net(nan_at=1, nan_epoch=1), _data(), _data())
    assert es.stopped_epoch == 1 and es.stopping_reason_message
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    reason = cb.stop_reason
    assert reason is not None and reason.startswith(str(cb.stopped_by)), reason
    said = " ".join(es.stopping_reason_message.split())
    assert reason.endswith(f" (EarlyStopping(monitor='val_loss') asked to stop in the same epoch (1) too: {said})")
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.stop_reasons[0] == reason


def test_an_early_stopping_request_held_before_the_fit_is_not_named(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=STOP)
    es = EarlyStopping(monitor="val_loss", patience=100, check_finite=False)
    es.stopped_epoch, es.stopping_reason_message = 1, "an earlier fit's"  # (as a checkpoint restores it)
    trainer = _trainer(cb, es, max_epochs=4)
    trainer.fit(Net(nan_at=1, nan_epoch=1), _data(), _data())
    assert cb.stopped_by is not None and cb.stop_reason == str(cb.stopped_by)
