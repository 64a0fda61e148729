"""Trial 25j: a layer compiled on its own (``self.fc1 = torch.compile(self.fc1)``) is the leaf module
``fc1._orig_mod``: its activations were stored as ``fc1._orig_mod/output`` (an ``include: ^fc1/``
captured nothing), where docs/lightning.md says ``_orig_mod`` is dropped from names and the
activations equal an uncompiled fit's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations._torch import clean_name  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.mark.parametrize(("raw", "clean"), [
    ("_orig_mod.fc1.weight", "fc1.weight"), ("fc1._orig_mod.weight", "fc1.weight"), ("fc1._orig_mod", "fc1"),
    ("net._orig_mod.0", "net.0"), ("a._orig_mod._orig_mod.b", "a.b"), ("my_orig_mod.x", "my_orig_mod.x"),
])
def test_clean_name_drops_every_orig_mod_component(raw: str, clean: str) -> None:
    assert clean_name(raw) == clean


class Net(L.LightningModule):
    def __init__(self, compile: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2 = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)
        if compile:  # each leaf layer compiled on its own (aot_eager: fast)
            self.fc1 = torch.compile(self.fc1, backend="aot_eager")
            self.act = torch.compile(self.act, backend="aot_eager")

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.fc2(self.act(self.fc1(x))), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _names(tmp_path: Path, compile: bool) -> dict[str, list[str]]:
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 8, generator=g)
    loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    out = tmp_path / ("compiled" if compile else "plain")
    cb = TripwireCallback(out_dir=str(out), save_interval=2,
                          collections={"activations": {"include": ["^fc1/", "^act/"]}, "activation_inputs": {},
                                       "weights": {}})
    L.Trainer(max_epochs=1, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
              enable_checkpointing=False, enable_model_summary=False, callbacks=[cb]).fit(Net(compile), loader)
    torch._dynamo.reset()
    run = tripwire.open_run(out)
    return {c: run.tensor_names(collection=c) for c in ("activations", "activation_inputs", "weights")}


def test_a_layer_compiled_alone_is_named_as_uncompiled(tmp_path: Path) -> None:
    compiled = _names(tmp_path, True)
    assert compiled == _names(tmp_path, False)
    assert compiled["activations"] == ["act/output", "fc1/output"] and compiled["activation_inputs"] == ["act/input"]
