"""Session 43 (trial 43e), the Lightning callback and the torch backend:

- A model with lazy layers (``nn.LazyLinear``) not built before the fit (no sanity check) crashed in
  ``on_train_start`` where weights or activations were captured and a CPU was free for the
  background reduction: ``warm_up`` counted the elements of a parameter that has none yet
  ("Attempted to use an uninitialized parameter"). Lazy parameters are left out of that count.
- A layer with a parametrization (``torch.nn.utils.parametrizations.weight_norm``, ``spectral_norm``)
  is no leaf module: its output was not captured, and the hook landed on the parametrization inside
  it, whose "output" is the recomputed weight, stored as the activation
  ``fc1.parametrizations.weight.0/output``. The parametrized layer is now the leaf.
- Parameters added during the fit (a layer given to the optimizer with ``add_param_group``) were never
  captured, without a word. They are now indexed again at the next save step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations import _torch  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def _data() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 8, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)


class Net(L.LightningModule):
    def __init__(self, first: nn.Module) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2 = first, nn.ReLU(), nn.Linear(16, 2)
        self.seen: dict[str, float] = {}

    def forward(self, x: Any) -> Any:
        return self.fc2(self.act(self.fc1(x)))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        with torch.no_grad():
            if self.global_step == 0:
                self.seen["fc1/output"] = float(self.fc1(batch[0]).mean())
            elif self.global_step == 1:  # (the weights as step 0 ended, which it saves)
                self.seen["fc1.weight"] = float(torch.linalg.vector_norm(self.fc1.weight))
        return F.cross_entropy(self(batch[0]), batch[1])

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path: Path, first: nn.Module, **kw: Any) -> tuple[Net, Any]:
    model = Net(first)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, **kw)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, max_epochs=1, callbacks=[cb])
    trainer.fit(model, _data())
    return model, tripwire.open_run(tmp_path / "run")


@pytest.mark.parametrize("collection", ["weights", "activations"])
def test_a_lazy_layer_built_in_the_first_step_is_captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          collection: str) -> None:
    monkeypatch.setattr(_torch, "background_allowed", lambda: True)  # (a free CPU: warm_up counts the elements)
    model, run = _fit(tmp_path, nn.LazyLinear(16), include_collections=[collection])
    assert run.status == "complete"
    name = "fc1.weight" if collection == "weights" else "fc1/output"
    reduction = "l2" if collection == "weights" else "mean"
    assert run.tensor(name).value(reduction, 0) == pytest.approx(model.seen[name], rel=1e-5)


def test_warm_up_leaves_a_lazy_parameter_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torch, "background_allowed", lambda: True)
    backend = _torch.TorchBackend()
    lazy = nn.LazyLinear(4)
    collections = tripwire.Config.from_dict({"collections": ["weights"]}).collections.values()
    assert backend.warm_up(list(lazy.parameters()), collections) is False  # (nothing of a size to reduce yet)


@pytest.mark.parametrize("parametrize", ["weight_norm", "spectral_norm"])
def test_a_parametrized_layer_is_the_leaf_whose_output_is_captured(tmp_path: Path, parametrize: str) -> None:
    wrap = getattr(torch.nn.utils.parametrizations, parametrize)
    model, run = _fit(tmp_path, wrap(nn.Linear(8, 16)), include_collections=["activations"])
    names = run.tensor_names(collection="activations")
    assert "fc1/output" in names and not any("parametrizations" in n for n in names)
    assert run.tensor("fc1/output").value("mean", 0) == pytest.approx(model.seen["fc1/output"], rel=1e-5)
    assert np.isfinite(run.tensor("fc2/output").value("mean", 0))


class Growing(Net):
    """Progressive growing: a layer added at epoch 1, given to the optimizer (trial 43e)."""

    def forward(self, x: Any) -> Any:
        h = self.act(self.fc1(x))
        if hasattr(self, "extra"):
            h = h + self.act(self.extra(h))
        return self.fc2(h)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.extra = nn.Linear(16, 16)
            self.optimizers().optimizer.add_param_group({"params": self.extra.parameters()})


def test_a_layer_added_during_the_fit_is_captured_from_its_first_save_step(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2,
                          include_collections=["weights", "gradients", "activations", "optimizer"])
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, max_epochs=2, callbacks=[cb])
    with caplog.at_level("INFO", logger="tripwire"):
        trainer.fit(Growing(nn.Linear(8, 16)), _data())
    run = tripwire.open_run(tmp_path / "run")
    for name in ("extra.weight", "gradients/extra.weight", "extra/output", "update_ratio/extra.weight"):
        assert run.tensor(name).steps() == [4, 6], name
    assert run.tensor("fc1.weight").steps() == [0, 2, 4, 6]
    assert ("parameters changed during the fit (6 now): captured from train step 4 on, the new ones included: "
            "extra.weight, extra.bias") in caplog.text


class Swapping(Net):
    """A head re-initialised at epoch 1: a new layer of the same size (trial 43f)."""

    truth: dict[int, float]

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.truth = getattr(self, "truth", {})
        self.truth[int(self.global_step)] = float(torch.linalg.vector_norm(self.fc2.weight))
        return F.cross_entropy(self(batch[0]), batch[1])

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.fc2 = nn.Linear(16, 2)
            self.optimizers().optimizer.param_groups[0]["params"] = list(self.parameters())


def test_a_layer_replaced_by_one_of_the_same_size_is_captured_as_the_new_one(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["weights", "optimizer"])
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, max_epochs=2, callbacks=[cb])
    model = Swapping(nn.Linear(8, 16))
    with caplog.at_level("INFO", logger="tripwire"):
        trainer.fit(model, _data())
    run = tripwire.open_run(tmp_path / "run")
    steps, values = run.series("fc2.weight", "l2")
    recorded = dict(zip(steps.tolist(), values.tolist()))
    for step in range(4, 7):  # (the new layer's weights as the step ended, not the old one's last)
        assert recorded[step] == pytest.approx(model.truth[step + 1], rel=1e-5), step
    assert "no optimizer of the trainer holds them" not in caplog.text
    assert "captured from train step 4 on" in caplog.text


def test_a_validation_right_at_the_checkpoint_is_not_superseded_by_the_resume(tmp_path: Path) -> None:
    """Trial 43m: a resume from a checkpoint taken at an epoch's last batch, before that epoch's
    validation (which the resumed training does not run again): ``Run.dataframe`` marked that
    validation ``superseded`` (the resumed session began its global steps before it), so
    ``df[~df.superseded]`` dropped it, while ``run.tensor("val_loss")`` kept it."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    class M(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.fc = nn.Linear(8, 2)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return F.cross_entropy(self.fc(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", F.cross_entropy(self.fc(batch[0]), batch[1]))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    out, ckpt = tmp_path / "run", tmp_path / "ckpt"

    def trainer(epochs: int) -> L.Trainer:
        return L.Trainer(max_epochs=epochs, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0,
                         callbacks=[TripwireCallback(out_dir=out),
                                    ModelCheckpoint(ckpt, every_n_train_steps=4, save_top_k=-1)])

    val = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=32)
    trainer(2).fit(M(), _data(), val)
    trainer(3).fit(M(), _data(), val, ckpt_path=str(ckpt / "epoch=1-step=8.ckpt"))
    frame = tripwire.open_run(out).dataframe()
    held = frame[frame["tensor"] == "val_loss"]
    assert sorted(held["step"]) == [1, 2, 3] and not held["superseded"].any()


def test_a_ddp_stop_taken_between_the_points_ranks_agree_at_is_dropped_at_the_fits_end(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 43m: under DDP a ``request_stop`` read at a step that saves nothing, with no save step or
    validation left before the fit's end, stopped nothing, yet the run read ``stopped`` by it and
    ``stopped_by`` named it. Driven by hand: a rank whose session took such a stop, at the fit's end."""
    from types import SimpleNamespace

    cb = TripwireCallback(out_dir=tmp_path / "run")
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1000, collections=["losses"])
    session.step("train", 0, {"loss": (np.float32(1.0), "losses")})
    found = tripwire.Finding("operator", 0, "train", "operator asked to stop", source="request_stop")
    session.stopped_by = found
    cb._session, cb._pending_stop, cb._stopped = session, True, False
    with caplog.at_level("WARNING", logger="tripwire"):
        cb._drop_unagreed_stop(SimpleNamespace(world_size=2, global_rank=1))
    assert session.stopped_by is None and cb.stopped_by is None
    assert "rank 1: rule 'operator' at step 0 (train) asked to stop training at a step where the ranks do not " \
           "agree on a stop" in caplog.text
    session.close()
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    # (a single process, or a stop the ranks agreed on, is left as it is)
    other = TripwireCallback(out_dir=tmp_path / "run2")
    other._session = tripwire.Session(out_dir=tmp_path / "run2", save_interval=1000, collections=["losses"])
    other._session.stopped_by, other._pending_stop, other._stopped = found, True, False
    other._drop_unagreed_stop(SimpleNamespace(world_size=1, global_rank=0))
    assert other._session.stopped_by is found
    other._session.close()
