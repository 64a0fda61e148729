"""Trial 23e: a value that the LightningModule's own ``on_train_batch_end`` (or a callback listed after
TripwireCallback) logs was stored one train step late, the first step had none and the last was
lost; in validation, what ``on_validation_batch_end`` logged lost every validation's last batch.
Lightning calls the callbacks' batch-end hooks before the module's: the step's metrics are read
again at the step's true end, the next hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def _loader(n: int, batch: int = 8, seed: int = 0) -> Any:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch)


class _Net(L.LightningModule):
    def __init__(self, log_in_hooks: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.log_in_hooks = log_in_hooks

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", nn.functional.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _LogsAtBatchEnd(_Net):
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.log("at_batch_end", float(self.global_step - 1), on_step=True)  # the step that just ended

    def on_validation_batch_end(self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.log("val_at_batch_end", float(batch_idx), on_step=True, on_epoch=False)


class _LaterCallback(L.Callback):
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        pl_module.log("from_later_callback", float(trainer.global_step - 1), on_step=True)


def _fit(module: Any, out: Path, callbacks: list[Any], **kw: Any) -> tripwire.Run:
    opts: dict[str, Any] = dict(max_epochs=2, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
                                enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer = L.Trainer(callbacks=callbacks, **{**opts, **kw})
    trainer.fit(module, _loader(40), _loader(24, seed=1))
    return tripwire.open_run(out)


def test_a_value_logged_in_the_modules_batch_end_hooks_is_stored_at_its_own_step(tmp_path: Path) -> None:
    run = _fit(_LogsAtBatchEnd(), tmp_path, [TripwireCallback(out_dir=tmp_path, save_interval=1)])
    steps, values = run.series("at_batch_end")
    assert steps.tolist() == list(range(10)) and values.tolist() == [float(s) for s in range(10)]
    steps, values = run.series("val_at_batch_end", mode="eval")  # 3 batches a validation, 2 validations
    assert steps.tolist() == [1, 2, 3, 4, 5, 6] and values.tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    # what was logged before the callback's batch end is unchanged: each step its own loss
    assert run.series("train_loss")[0].tolist() == list(range(10))
    assert run.series("val_loss", mode="eval")[0].tolist() == [3, 6]  # (the validation's epoch value)


def test_a_value_logged_by_a_later_callback_is_stored_at_its_own_step(tmp_path: Path) -> None:
    run = _fit(_Net(), tmp_path, [TripwireCallback(out_dir=tmp_path, save_interval=2), _LaterCallback()])
    steps, values = run.series("from_later_callback")
    assert steps.tolist() == [0, 2, 4, 6, 8] and values.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_weights_saved_with_the_late_metrics_are_still_the_steps_own(tmp_path: Path) -> None:
    # (the deferred end of trial 21a: weights changed in the module's batch end are taken after it)
    module = _LogsAtBatchEnd()
    run = _fit(module, tmp_path, [TripwireCallback(out_dir=tmp_path, save_interval=5,
                                                   include_collections=["weights"])])
    assert run.series("at_batch_end")[0].tolist() == [0, 5] and run.series("at_batch_end")[1].tolist() == [0.0, 5.0]
    assert run.tensor("net.2.weight").steps() == [0, 5]
    final = float(module.net[2].weight.detach().norm())
    assert run.tensor("net.2.weight").value("l2", 5) != pytest.approx(final)  # (step 5's own, not the last)
