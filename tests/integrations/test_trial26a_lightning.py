"""Trial 26a (Lightning): two TripwireCallbacks without ``name=`` in one Trainer share Lightning's
callback ``state_key``. ``Trainer(callbacks=[...])`` refuses them (Lightning's RuntimeError, at
construction); those added by ``LightningModule.configure_callbacks`` trained with no word, and a
checkpoint held one state for both (the last one's). Now the callback's setup refuses them, with a
ConfigError naming ``name=``, before anything runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Net(L.LightningModule):
    def __init__(self, callbacks: list[Any] | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.own_callbacks = callbacks
        self.trained = 0

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def configure_callbacks(self) -> Any:
        return list(self.own_callbacks or [])

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.trained += 1
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", nn.functional.cross_entropy(self(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> Any:
        return self(batch[0]).softmax(-1)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader(n: int = 32, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)


def _trainer(callbacks: list[Any], tmp_path: Path, **kw: Any) -> Any:
    kw.setdefault("max_epochs", 1)
    return L.Trainer(callbacks=callbacks, logger=False, enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=str(tmp_path), **kw)


# ------------------------------------------------------------------- finding 3: two callbacks
def test_two_unnamed_callbacks_from_configure_callbacks_are_refused_before_training(tmp_path: Path) -> None:
    model = Net([TripwireCallback(out_dir=tmp_path / "a", rules=["default"]),
                 TripwireCallback(out_dir=tmp_path / "b", collections=["losses", "weights"], rules=["unchanged_tensor"])])
    trainer = _trainer([ModelCheckpoint(dirpath=tmp_path / "ck", save_last=True)], tmp_path)
    with pytest.raises(ConfigError, match=r"name: this Trainer holds 2 TripwireCallbacks with name=None \(out_dir "
                                          r".*'.*a', '.*b'\).*state_key.*accepted: a distinct name= for each"):
        trainer.fit(model, _loader())
    assert model.trained == 0  # (they trained, and the checkpoint held one state for both)
    assert not (tmp_path / "ck").exists()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_two_callbacks_with_one_name_are_refused_at_any_stage(tmp_path: Path) -> None:
    model = Net([TripwireCallback(out_dir=tmp_path / "a", name="x"), TripwireCallback(out_dir=tmp_path / "b", name="x")])
    with pytest.raises(ConfigError, match=r"2 TripwireCallbacks with name='x'.*TripwireCallback\(name=\"main\""):
        _trainer([], tmp_path, enable_checkpointing=False).validate(model, _loader(), verbose=False)


def test_two_unnamed_callbacks_given_to_the_trainer_are_refused_by_lightning_at_construction(tmp_path: Path) -> None:
    # (Lightning's own check, before anything runs; the class docstring it points to names name=)
    with pytest.raises(RuntimeError, match="more than one stateful callback of type `TripwireCallback`"):
        _trainer([TripwireCallback(out_dir=tmp_path / "a"), TripwireCallback(out_dir=tmp_path / "b")], tmp_path)
    assert "distinct ``name=``" in (TripwireCallback.__doc__ or "")


def test_two_named_callbacks_checkpoint_and_resume_each_with_its_own_state(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    def callbacks() -> list[Any]:
        return [TripwireCallback(out_dir=tmp_path / "a", name="main", save_interval=1),
                TripwireCallback(out_dir=tmp_path / "b", name="probe", save_interval=2, collections=["losses"]),
                ModelCheckpoint(dirpath=tmp_path / "ck", save_last=True)]

    _trainer(callbacks(), tmp_path).fit(Net(), _loader())
    states = torch.load(tmp_path / "ck" / "last.ckpt", weights_only=False)["callbacks"]
    held = {key: state["out_dir"] for key, state in states.items() if key.startswith("TripwireCallback")}
    assert held == {"TripwireCallback{'name': 'main'}": str(tmp_path / "a"),
                    "TripwireCallback{'name': 'probe'}": str(tmp_path / "b")}
    again = callbacks()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer(again, tmp_path, max_epochs=2).fit(Net(), _loader(), ckpt_path=str(tmp_path / "ck" / "last.ckpt"))
    assert not [r.getMessage() for r in caplog.records if "earlier training" in r.getMessage()]  # (each resumed)
    assert [c.out_dir for c in again[:2]] == [tmp_path / "a", tmp_path / "b"]
    for out in ("a", "b"):
        assert tripwire.open_run(tmp_path / out).steps("train") == list(range(8))


# ------------------------------------------------------- finding 4: a rule input's WARNING, once
def test_an_unmatched_rule_input_is_said_once_not_again_after_validate_test_predict(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    val = [_loader(16, seed=1), _loader(16, seed=2)]  # two: val_loss/dataloader_idx_0 and _1, no val_loss
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default", "overfit"], save_interval=2)
    trainer = _trainer([cb], tmp_path, max_epochs=2, enable_checkpointing=False)
    model = Net()

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "validation='val_loss' matches no loss or metric" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(model, _loader(), val)
        assert len(said()) == 1 and "did you mean 'val_loss/dataloader_idx_0'?" in said()[0], said()
        trainer.validate(model, val, verbose=False)
        trainer.test(model, _loader(16, seed=3), verbose=False)
        trainer.predict(model, _loader(16, seed=4))
    assert len(said()) == 1, said()
