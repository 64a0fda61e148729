"""Trial 28e F1 (Lightning): a value the LightningModule logs as ``self.log("loss", ...)`` was dropped
without a word where the callback's own ``loss`` (the loss ``training_step`` returns) was in the step
already. Where the two differ it is now stored as ``logged/loss``, with one WARNING naming both; where
the logged value is the returned loss, the run's ``loss`` holds it and nothing is said.
"""

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

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Logs(L.LightningModule):
    """Logs ``loss * scale`` as "loss" (in ``training_step``, or in its own ``on_train_batch_end``, which
    Lightning calls after the callbacks') and returns the plain loss; keeps both per train step."""

    def __init__(self, scale: float, late: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.scale, self.late = scale, late
        self.returned: dict[int, float] = {}
        self.logged: dict[int, float] = {}

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = F.cross_entropy(self.net(batch[0]), batch[1])
        self.returned[self.global_step] = loss.item()
        self._step, self._last = self.global_step, loss.detach()  # (at the batch end, global_step is the next)
        if not self.late:
            self._log(loss)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.late:
            self._log(self._last)

    def _log(self, loss: torch.Tensor) -> None:
        self.logged[self._step] = float(loss * self.scale)
        self.log("loss", loss * self.scale)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _fit(tmp_path: Path, module: Logs, **trainer: Any) -> tripwire.Run:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[], save_interval=2)
    fit = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb], **trainer)
    fit.fit(module, DataLoader(data, batch_size=4))
    return tripwire.open_run(cb.out_dir)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "logs 'loss'" in r.getMessage()]


@pytest.mark.parametrize("late", [False, True], ids=["training_step", "on_train_batch_end"])
def test_a_logged_loss_other_than_the_returned_one_is_stored_as_logged_loss(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, late: bool) -> None:
    module = Logs(scale=100.0, late=late)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = _fit(tmp_path, module)
    steps, values = run.series("loss")
    assert steps.tolist() == list(range(8))  # (every step: the returned loss)
    assert values.tolist() == pytest.approx([module.returned[s] for s in range(8)], rel=1e-6)
    steps, values = run.series("logged/loss")
    assert steps.tolist() == [0, 2, 4, 6]  # (the save steps)
    assert values.tolist() == pytest.approx([module.logged[s] for s in (0, 2, 4, 6)], rel=1e-6)
    assert "logged/loss" in run.collections()["losses"]
    [said] = _said(caplog)
    assert (f"logged {module.logged[0]:.6g}, returned {module.returned[0]:.6g}" in said
            and "stored as 'logged/loss'" in said and "train step 0" in said), said


def test_a_logged_loss_equal_to_the_returned_one_is_the_runs_loss(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    module = Logs(scale=1.0)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = _fit(tmp_path, module)
    assert "logged/loss" not in run.tensor_names() and not _said(caplog)
    assert run.series("loss")[1].tolist() == pytest.approx([module.returned[s] for s in range(8)], rel=1e-6)


def test_with_gradient_accumulation_the_last_micro_batchs_loss_is_the_returned_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Lightning logs the last micro-batch's value; the run's loss is the mean of the window's 3
    module = Logs(scale=1.0)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = _fit(tmp_path, module, accumulate_grad_batches=3)
    assert "logged/loss" not in run.tensor_names() and not _said(caplog)
