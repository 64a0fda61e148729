"""Trial 36i: a validation's last step whose reduction went to the background thread (large CPU
tensors) was judged at the next step's end: after a validation, the next validation a whole epoch
later (``overfit`` with every eval step saved) or the next train step; its history lagged by that
validation too. Its rules now run at the validation's end, and a stop they ask for takes effect there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _second_validation(history: Any, step: int, mode: str) -> str | None:
    if not history.has_tensor("val_loss"):
        return None
    steps, _ = history.series("val_loss", "raw", "eval")
    return "the second validation" if len(steps) >= 2 and steps[1] == step else None


def test_a_stop_at_a_validations_last_step_reduced_in_the_background_acts_at_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    seen: list[tuple[int, int, list[Any]]] = []

    class Spy(L.Callback):
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            latest = cb.history.latest("val_loss", mode="eval") if cb.history is not None else None
            seen.append((trainer.current_epoch, latest[0] if latest else -1, [f.step for f in cb.findings]))

    rule = tripwire.FunctionRule(_second_validation, requirements=[tripwire.Requirement("losses", ("raw",))],
                                 modes=["eval"], name="second_validation")
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), save_interval=1,
                          collections=["losses", "metrics", "activations"], rules=[rule], actions=["log", "stop_training"])
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[cb, Spy()])
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    trainer.fit(Net(), loader, loader)
    (epoch, latest, found), = [s for s in seen if s[0] == 1]
    assert found == [latest] and cb.stopped_by is not None and cb.stopped_by.step == latest  # at its own end
    assert trainer.global_step == 8  # two epochs of 4 batches: stopped at that validation's end
