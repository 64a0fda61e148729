"""Trial 36k: a custom collection of any kind (no ``kinds``) of one layer's tensors, beside rules that
read the optimizer kind optionally (the default set's ``loss_scale_collapse``), made the Lightning
callback copy every parameter at each save step and store learning rates and update ratios that
neither the config nor a rule asked for. Such a collection counts only where its include takes an
optimizer tensor of the model."""

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


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.fc2(torch.relu(self.fc1(x))), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _names(out: Path, collections: dict[str, Any]) -> list[str]:
    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    cb = TripwireCallback(out_dir=str(out), save_interval=1, collections=collections, rules=["loss_scale_collapse"])
    L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, callbacks=[cb]).fit(Net(), DataLoader(TensorDataset(x, y), batch_size=8))
    return tripwire.open_run(out).tensor_names()


def test_a_layers_collection_beside_an_optional_reader_stores_no_optimizer_values(tmp_path: Path) -> None:
    names = _names(tmp_path / "run", {"losses": None, "first_layer": {"include": [r"^fc1\."], "reductions": ["raw"]}})
    assert not [n for n in names if n.startswith(("lr/", "update_ratio/"))], names
    assert "fc1.weight" in names


def test_a_collection_that_takes_update_ratios_still_gets_them(tmp_path: Path) -> None:
    names = _names(tmp_path / "run", {"losses": None, "weights_too": {"include": ["weight"], "reductions": ["raw"]}})
    assert {"update_ratio/fc1.weight", "update_ratio/fc2.weight"} <= set(names), names
