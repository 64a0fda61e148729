"""Trial 27d finding 8: at the end of a Lightning fit without validation, "collection 'predictions'
captured nothing: the training offered no tensor of its kinds (predictions) in this session", for a
config that saves predictions in predict (which the ``trainer.predict`` after it then stored). The
WARNING is for a collection asked for in a mode that ran, where the integration offers its kinds."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Session


def _closing(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "captured nothing" in r.getMessage()]


def _train(s: Session, steps: int = 3) -> None:
    for step in range(steps):
        s.step("train", step, {"loss": (1.0, "losses")})


def test_a_collection_whose_save_disables_the_modes_that_ran_is_not_said_to_capture_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    off = {"modes": {"train": {"enabled": False}, "eval": {"enabled": False}, "test": {"enabled": False}}}
    s = Session(out_dir=tmp_path / "a", rules=[], save_interval=1,
                collections={"losses": None, "inputs": {"save": off}})
    _train(s)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert _closing(caplog) == []
    # (asked for in train, where it ran: said, as before)
    caplog.clear()
    s = Session(out_dir=tmp_path / "b", rules=[], save_interval=1, collections={"losses": None, "inputs": None})
    _train(s)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert _closing(caplog) == ["tripwire: collection 'inputs' captured nothing: the training offered no tensor of "
                                "its kinds (inputs) in this session"]


@pytest.mark.parametrize("collections, said", [
    (["losses", "predictions"], []),                       # Lightning offers no predictions at train steps
    (["losses", "inputs"], ["inputs"]),                    # (it does offer inputs there)
])
def test_a_lightning_fit_without_validation_says_nothing_of_predictions(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, collections: list[str], said: list[str]) -> None:
    s = Session(out_dir=tmp_path / "run", rules=[], save_interval=1, collections=collections, framework="lightning")
    _train(s)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert [m.split("'")[1] for m in _closing(caplog)] == said


def test_a_lightning_fit_then_predict_stores_predictions_without_the_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("lightning")
    import lightning as L
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class M(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.net(x)

        def training_step(self, batch: Any, i: int) -> Any:
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def predict_step(self, batch: Any, i: int) -> Any:
            return self(batch[0])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 4, generator=g), torch.randint(0, 2, (32,), generator=g)
    cb = TripwireCallback({"save": {"interval": 2, "modes": {"predict": {"interval": 1}}},
                           "collections": {"losses": None, "predictions": {"reductions": ["raw"]}}},
                          out_dir=tmp_path / "run", rules=[])
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    model = M()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(model, DataLoader(TensorDataset(x, y), batch_size=8))
    assert _closing(caplog) == []
    preds = trainer.predict(model, DataLoader(TensorDataset(x[:16], y[:16]), batch_size=8))
    run = tripwire.open_run(tmp_path / "run")
    steps = run.tensor("predictions").steps(mode="predict")
    assert len(steps) == 2
    for step, pred in zip(steps, preds):
        assert np.array_equal(run.tensor("predictions").value(step, mode="predict"), pred.numpy())
