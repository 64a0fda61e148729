"""Trial 26f finding 4: every integration reports a default ``out_dir`` the same way, as the docs write
it: ``tripwire-runs/run-<date>-<time>``, relative to the current directory (XGBoost's was absolute, MXNet's
relative). MXNet's is checked in tests/mxnet/test_trial26f_out_dir.py (its own environment)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tripwire

DEFAULT = re.compile(r"tripwire-runs/run-\d{8}-\d{6}(-\d+)?")


def _reported(out_dir: object, cwd: Path) -> str:
    """``out_dir`` as reported, checked: the docs' default form, a run there."""
    shown = str(out_dir)
    assert DEFAULT.fullmatch(shown), shown
    assert not Path(shown).is_absolute()
    assert tripwire.open_run(cwd / shown).steps("train")
    return shown


def test_xgboost_reports_the_default_out_dir_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xgb = pytest.importorskip("xgboost")
    from tripwire.integrations.xgboost import TripwireCallback

    monkeypatch.chdir(tmp_path)
    cb = TripwireCallback(rules=["default"])
    rng = np.random.default_rng(0)
    d = xgb.DMatrix(rng.random((50, 3)), label=rng.random(50))
    xgb.train({"nthread": 1}, d, 2, evals=[(d, "train")], callbacks=[cb], verbose_eval=False)
    _reported(cb.out_dir, tmp_path)
    assert tripwire.open_run(cb.out_dir).steps("train") == [0, 1] and cb.findings == []  # (read from the client)
    assert str(cb.out_dir) in repr(cb)
    with_name = TripwireCallback(name="xgb-named")
    assert str(with_name.out_dir) == "tripwire-runs/xgb-named"  # (as Lightning's and Keras's: tripwire-runs/<name>)


def test_session_reports_the_default_out_dir_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with tripwire.Session() as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    _reported(s.out_dir, tmp_path)


def test_lightning_reports_the_default_out_dir_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    L = pytest.importorskip("lightning")
    import torch
    from torch import nn

    from tripwire.integrations.lightning import TripwireCallback

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 1)

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.mse_loss(self.fc(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    cb = TripwireCallback(rules=["default"])
    trainer = L.Trainer(max_epochs=1, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=8))
    _reported(cb.out_dir, tmp_path)


def test_keras_reports_the_default_out_dir_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keras = pytest.importorskip("keras")
    from tripwire.integrations.keras import TripwireCallback

    monkeypatch.chdir(tmp_path)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    cb = TripwireCallback(rules=["default"])
    rng = np.random.default_rng(0)
    model.fit(rng.random((32, 4)), rng.random((32, 1)), batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    _reported(cb.out_dir, tmp_path)
