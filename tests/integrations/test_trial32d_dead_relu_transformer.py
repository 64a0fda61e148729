"""Trial 32d F1 and F9 (Lightning): ReLUs in a transformer.

F1: a planted dead ReLU in a transformer's head (``Linear(16, 32) -> nn.ReLU -> Linear(32, 2)``, the first
bias -20; Adam 1e-3; rules ``default`` and ``dead_relu``) was blamed by ``vanishing_gradient`` on "a
learning rate too high without warm-up", and the dead layer was never named although ``relu_outputs``
held its zero fraction 1.0. The message now leads with dead ReLUs and names ``head.1/output``.

F9: ``dead_relu`` on an ``nn.TransformerEncoder`` had nothing to read: ``nn.TransformerEncoderLayer``
calls its ReLU as a function (``F.relu``), which no forward hook sees. Given as a module
(``activation=nn.ReLU()``) it is hooked and captured as ``<layer>.activation/output``."""

from __future__ import annotations

import logging
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


def _data() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(1, 20, (320, 12), generator=g)
    y = ((x == 5) | (x == 7)).any(1).long()
    return DataLoader(TensorDataset(x, y), batch_size=32)


class Tiny(L.LightningModule):
    """Embedding -> one nn.TransformerEncoderLayer -> mean over tokens -> head."""

    def __init__(self, dead_head: bool = False, activation: Any = "relu") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(20, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, activation=activation)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        if dead_head:
            self.head = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
            with torch.no_grad():
                self.head[0].bias.fill_(-20.0)
        else:
            self.head = nn.Linear(16, 2)

    def training_step(self, batch: Any, i: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.head(self.enc(self.emb(x)).mean(1)), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _fit(tmp_path: Path, model: Tiny, epochs: int = 3) -> tuple[TripwireCallback, Any]:
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), actions=["log", "stop_training"],
                          rules=["default", {"name": "dead_relu", "actions": ["log", "stop_training"]}])
    trainer = L.Trainer(max_epochs=epochs, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(model, _data())
    return cb, trainer


def test_a_dead_relu_head_in_a_transformer_is_named_first(tmp_path: Path) -> None:
    cb, trainer = _fit(tmp_path, Tiny(dead_head=True))
    assert cb.stopped_by is not None and cb.stopped_by.rule == "vanishing_gradient", cb.findings
    assert cb.stopped_by.step == 20
    message = cb.stopped_by.message
    assert ("the network does not learn. The network has ReLUs (head.1/output captured); the usual cause is dead "
            "ReLUs, and the run shows a dead layer (95% zeros or more, dead_relu's default threshold): head.1/output, "
            "100% zeros at step 20. Dead ReLUs:") in message, message
    assert "warm-up" not in message, message


def test_a_transformer_layers_relu_given_as_a_module_is_captured(tmp_path: Path) -> None:
    # (the hint F9's message gives: activation=nn.ReLU() is a submodule, hooked like any nn.ReLU)
    cb, _ = _fit(tmp_path, Tiny(activation=nn.ReLU()), epochs=1)
    run = tripwire.open_run(str(tmp_path / "run"))
    assert run.tensor_names(collection="relu_outputs") == ["enc.layers.0.activation/output"]
    steps, zeros = run.tensor("enc.layers.0.activation/output").series("zero_fraction")
    assert len(steps) and 0.2 < zeros[0] < 0.8


def test_dead_relu_with_nothing_to_read_names_functional_relus(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _fit(tmp_path, Tiny(), epochs=1)
    [said] = [r.getMessage() for r in caplog.records if "rule 'dead_relu' had nothing to read" in r.getMessage()]
    assert "F.relu" in said and "activation=nn.ReLU()" in said, said
