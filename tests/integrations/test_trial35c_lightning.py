"""Trial 35c: under automatic optimization a save step whose weights the background thread copies
was fenced only at the next step's zero_grad, after its training_step: a weight written there
through ``.data`` (which moves no version counter) was stored as the next step's value, or a mix,
with no warning, on a busy machine. Such a step now offers a copy of its weights made at its end
(or, where it takes none, is fenced at the next batch's start); the background copy still overlaps
the next forward pass."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


@pytest.fixture
def slow_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step with a tensor of more than one element goes to the background thread, whose copy
    starts late (a busy machine)."""
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    cat = torch.cat

    def slow_cat(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name.startswith("tripwire-reduce"):
            time.sleep(0.02)
        return cat(*args, **kwargs)

    monkeypatch.setattr(torch, "cat", slow_cat)


class Halving(L.LightningModule):
    """Its training_step notes the weight as the last optimizer step left it, then halves it
    through ``.data``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        self.seen: dict[int, float] = {}

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.seen[self.global_step - 1] = float(self.net[0].weight.detach().double().norm())
        self.net[0].weight.data.mul_(0.5)
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("path", ["copy", "fence"])
def test_weights_written_through_data_in_training_step_do_not_reach_the_last_steps_record(
        tmp_path: Path, slow_background: None, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    # "copy": the callback offers a copy of the weights made at the step's end; "fence": it offers the
    # weights themselves (it takes no copy where it sees no CPU for the background thread), and the
    # next batch start waits for the background copy
    if path == "fence":
        from tripwire.integrations.lightning import _callback
        monkeypatch.setattr(_callback, "background_allowed", lambda: False)
    torch.manual_seed(0)
    x, y = torch.randn(96, 8), torch.randint(0, 2, (96,))
    module = Halving()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, collections=["weights"], rules=[])
    L.Trainer(max_steps=12, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, callbacks=[cb]).fit(module, DataLoader(TensorDataset(x, y), batch_size=8))
    tensor = tripwire.open_run(tmp_path / "run").tensor("net.0.weight")
    checked = [s for s in tensor.steps() if s in module.seen]
    assert len(checked) >= 4, (tensor.steps(), sorted(module.seen))
    np.testing.assert_allclose([tensor.value("l2", s) for s in checked], [module.seen[s] for s in checked], rtol=1e-6)
