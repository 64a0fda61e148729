"""Trial 36q: a Lightning callback that had run a stage could not be copied (``pickle``,
``copy.deepcopy``): it held a weak reference to the Trainer and its thread; ``ddp_spawn``, which
copies the callback into each process, failed after a first fit with the same callback."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tiny_lightning import TinyNet  # noqa: E402


def _fit(callback: TripwireCallback) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, callbacks=[callback]).fit(TinyNet(), DataLoader(TensorDataset(x, y), batch_size=8))


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_callback_that_ran_a_fit_can_be_copied_and_the_copy_fits(tmp_path: Path, how: str) -> None:
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"])
    _fit(cb)
    twin = pickle.loads(pickle.dumps(cb)) if how == "pickle" else copy.deepcopy(cb)
    assert twin.out_dir == cb.out_dir
    _fit(twin)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and len(run.trainings[0]) == 2


class NaNAt3(TinyNet):
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step >= 3 else loss


def test_a_fit_that_trains_nothing_keeps_the_last_fits_stop(tmp_path: Path) -> None:
    # the notebook cell run again after a stopped fit: Lightning trains nothing; stopped_by read None
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), save_interval=1, rules=["default"],
                          actions=["log", "stop_training"])
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[cb])
    model, loader = NaNAt3(), DataLoader(TensorDataset(x, y), batch_size=8)
    trainer.fit(model, loader)
    first = (cb.stopped_by, cb.stop_reason)
    assert first[0] is not None and first[0].rule == "exploding_tensor"
    step = trainer.global_step
    trainer.fit(model, loader)
    assert trainer.global_step == step  # (nothing trained)
    assert (cb.stopped_by, cb.stop_reason) == first
    assert tripwire.open_run(tmp_path / "run").status == "stopped"
