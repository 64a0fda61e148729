"""Trial 28a (Lightning, one process):

- F7: a fit stopped by Lightning's ``EarlyStopping`` (``trainer.should_stop`` set by another
  callback) read ``complete`` with no ``stop_reason``, like a fit that ran its whole budget. It now
  ends ``stopped`` with that callback's reason, as a tuner's stop does; ``stopped_by`` stays None.
- F5: ``distributed_stop`` quoted another rank's finding message cut at 300 characters mid-word
  ("Usual causes: a) stopped training"): now cut after a whole sentence or word, with " ...".
"""

from __future__ import annotations

import json
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
from tripwire.integrations._hooks import shortened as _shortened  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Clf(L.LightningModule):
    def __init__(self, stop_at: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.stop_at = stop_at

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.stop_at is not None and self.global_step == self.stop_at:
            self.trainer.should_stop = True  # (the module's own stop)
        return F.cross_entropy(self.net(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _fit(tmp_path: Path, *more: Any, module: Clf | None = None, epochs: int = 6) -> tuple[TripwireCallback, Any]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], save_interval=2)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb, *more])
    trainer.fit(module or Clf(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=16))
    return cb, trainer


def _ends(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "workers" / "worker-00000.end.json").read_text())


def test_an_early_stopping_stop_is_the_runs_stop_reason(tmp_path: Path) -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0, mode="min")  # (stops at the 2nd epoch)
    cb, trainer = _fit(tmp_path, stopper)
    assert trainer.global_step == 8 and trainer.should_stop  # (2 of 6 epochs, 4 steps each)
    assert cb.stopped_by is None  # (no finding stopped it)
    assert cb.stop_reason is not None and cb.stop_reason.startswith(
        "trainer.should_stop was set outside tripwire (train step 7): EarlyStopping(monitor='val_loss'): Monitored "
        "metric val_loss did not improve in the last 1 records."), cb.stop_reason
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    assert run.stop_reasons == {0: cb.stop_reason}
    assert _ends(tmp_path)["status"] == "stopped"


def test_the_modules_own_stop_is_said_as_set_outside_tripwire(tmp_path: Path) -> None:
    cb, trainer = _fit(tmp_path, module=Clf(stop_at=5))
    assert trainer.global_step == 6
    assert cb.stop_reason == ("trainer.should_stop was set outside tripwire (train step 5): by another callback "
                              "(such as EarlyStopping or a Timer) or the LightningModule")
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_a_fit_that_ran_its_budget_stays_complete_without_a_reason(tmp_path: Path) -> None:
    stopper = EarlyStopping(monitor="val_loss", patience=50, mode="min")  # (never stops)
    cb, trainer = _fit(tmp_path, stopper, epochs=2)
    assert trainer.global_step == 8 and cb.stop_reason is None
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.stop_reasons == {}


def test_a_rules_stop_keeps_its_own_reason(tmp_path: Path) -> None:
    class NaN(Clf):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = super().training_step(batch, batch_idx)
            return loss * float("nan") if self.global_step >= 4 else loss

    stopper = EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0, mode="min")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["log", "stop_training"], save_interval=2)
    trainer = L.Trainer(max_epochs=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb, stopper])
    trainer.fit(NaN(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=16))
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert cb.stop_reason == str(cb.stopped_by)


MESSAGE = ("loss has fallen only 0.2042% in 50 steps (start level: median of its 21 values at steps 0-20 "
           "(its first 3 saves) 2.303, lowest median of 21 consecutive values (3 consecutive saves) ending after "
           "them 2.298: every step's value, saves 10 steps apart; expected a decrease of at least 5%). Usual "
           "causes: a learning rate too low, a loss cut off from the parameters, frozen parameters.")


def test_another_ranks_message_is_cut_after_a_sentence_or_a_word() -> None:
    cut = _shortened(MESSAGE)
    assert cut == MESSAGE[:MESSAGE.index(" Usual causes")] + " ...", cut
    assert len(cut) <= 300 + 4
    words = "word " * 100
    assert _shortened(words) == ("word " * 60).strip() + " ..."
    assert _shortened("a  short\nmessage") == "a short message"
    long_word = "x" * 400
    assert _shortened(long_word) == "x" * 300 + " ..."


class NaNFrom(Clf):
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step >= 3 else loss


def test_a_stop_by_another_tripwire_callback_names_it(tmp_path: Path) -> None:
    """Trial 36q: in a fit with two TripwireCallbacks, the one that did not stop read "by another callback
    (EarlyStopping, Timer) or the LightningModule", though the trainer had neither: the other
    TripwireCallback stopped it, and its reason now says so, with that callback's finding."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    main = TripwireCallback(name="main", out_dir=tmp_path / "a", rules=["default"], actions=["log", "stop_training"])
    probe = TripwireCallback(name="probe", out_dir=tmp_path / "b", rules=["exploding_gradient"], save_interval=1)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[main, probe])
    trainer.fit(NaNFrom(), DataLoader(data, batch_size=8))
    assert main.stopped_by is not None and main.stopped_by.rule == "exploding_tensor"
    assert probe.stopped_by is None
    assert probe.stop_reason is not None
    assert probe.stop_reason.startswith("trainer.should_stop was set by another TripwireCallback (train step ")
    assert f"TripwireCallback(out_dir={str(tmp_path / 'a')!r}): [critical] exploding_tensor" in probe.stop_reason
    assert "EarlyStopping" not in probe.stop_reason
