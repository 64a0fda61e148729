"""Trial 21a: the planned length of a manual-optimization fit with several optimizer steps per batch
(a GAN), and weights changed in place by user code that runs after the callback's batch end (the
LightningModule's own on_train_batch_end, a callback after TripwireCallback)."""

from __future__ import annotations

import json
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


def _loader(n: int = 32, batch: int = 8, seed: int = 0) -> Any:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch)


def _trainer(callbacks: list[Any], **kw: Any) -> Any:
    opts = dict(max_epochs=1, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
                enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    opts.update(kw)
    return L.Trainer(callbacks=callbacks, **opts)


def _planned(out: Path) -> int:
    return int(json.loads((out / "workers" / "worker-00000.json").read_text())["planned_steps"])


# ------------------------------------------------------------------- 1. planned steps (GAN)
class Gan(L.LightningModule):
    """Two optimizers stepped by hand: the discriminator at every batch, the generator at every
    ``g_every``-th batch (Lightning counts both in global_step)."""

    def __init__(self, g_every: int = 1) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.g_every = g_every
        self.G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
        self.D = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

    def training_step(self, batch: Any, batch_idx: int) -> None:
        x = batch[0]
        opt_d, opt_g = self.optimizers()
        bce = nn.functional.binary_cross_entropy_with_logits
        fake = self.G(torch.randn(len(x), 2))
        d_loss = bce(self.D(x), torch.ones(len(x), 1)) + bce(self.D(fake.detach()), torch.zeros(len(x), 1))
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        if batch_idx % self.g_every == 0:
            g_loss = bce(self.D(fake), torch.ones(len(x), 1))
            opt_g.zero_grad()
            self.manual_backward(g_loss)
            opt_g.step()

    def configure_optimizers(self) -> Any:
        return [torch.optim.SGD(self.D.parameters(), lr=0.01), torch.optim.SGD(self.G.parameters(), lr=0.01)]


@pytest.mark.parametrize("g_every,trainer_kw", [
    (1, {"max_epochs": 3}),                 # 2 steps a batch: 12 batches, 24 train steps
    (2, {"max_epochs": 3}),                 # 1.5 steps a batch: 18 train steps
    (1, {"max_epochs": 3, "max_steps": 14}),  # max_steps counts global_step too: 14
])
def test_a_manual_fit_with_two_optimizers_plans_its_real_number_of_train_steps(
        tmp_path: Path, g_every: int, trainer_kw: dict) -> None:
    """trial 21a: the planned length was estimated_stepping_batches (the batches, 12), half the
    train steps that global_step counts: the rules' windows that scale with it were half as long,
    and unchanged_tensor stopped judging halfway through the training."""
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, include_collections=["weights"])
    trainer = _trainer([cb], **trainer_kw)
    trainer.fit(Gan(g_every), _loader())
    assert trainer.global_step in (24, 18, 14)
    assert _planned(out) == trainer.global_step
    assert tripwire.open_run(out).planned_steps == trainer.global_step


def test_automatic_optimization_keeps_estimated_stepping_batches(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, include_collections=["weights"])
    trainer = _trainer([cb], max_epochs=2, accumulate_grad_batches=2)
    trainer.fit(Net(), _loader())
    assert _planned(out) == trainer.estimated_stepping_batches == trainer.global_step == 4


# ------------------------------------------------------- 2. weights changed at the batch end
class Net(L.LightningModule):
    def __init__(self, constrain: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.constrain = constrain
        self.at_end: dict[int, float] = {}  # global step of the step that ended -> l2 of net.2.weight then

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        # (Lightning calls it after every callback's on_train_batch_end)
        if self.constrain:
            halve(self)
        self.at_end[self.trainer.global_step - 1] = float(self.net[2].weight.detach().norm())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def halve(module: Any) -> None:
    """A weight constraint applied in place (a max-norm constraint, a pruning mask), through .data."""
    module.net[2].weight.data.mul_(0.5)


class Halve(L.Callback):
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        halve(pl_module)


@pytest.mark.parametrize("where,checkpoint", [("module", False), ("later_callback", False), ("later_callback", True),
                                              ("module", True)])
def test_a_weight_changed_after_the_callbacks_batch_end_is_stored_as_at_the_steps_end(
        tmp_path: Path, where: str, checkpoint: bool) -> None:
    """trial 21a: a weight halved by the LightningModule's own on_train_batch_end, or by a callback
    after TripwireCallback, was stored as it was before: weights the model never held. Every step is
    recorded, the last of each epoch too (ended at the validation's start and the training's end),
    and with a checkpoint written at each batch end (state_dict ends the step first). Lightning
    runs ModelCheckpoint's batch end after every callback's and before the LightningModule's: a
    step checkpointed there is stored with the weights the checkpoint holds."""
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, include_collections=["weights", "losses"])
    callbacks: list[Any] = [cb] + ([Halve()] if where == "later_callback" else [])
    if checkpoint:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1,
                                                             save_top_k=-1))
    model = Net(constrain=where == "module")
    trainer = _trainer(callbacks, max_epochs=2, enable_checkpointing=checkpoint)
    trainer.fit(model, _loader(), _loader(16, seed=1))
    run = tripwire.open_run(out)
    steps, l2 = run.tensor("net.2.weight").series("l2")
    assert [int(s) for s in steps] == list(range(8)) == run.steps("train")
    expected = [model.at_end[int(s)] for s in steps]
    if where == "module" and checkpoint:
        saved = {int(p.stem.split("step=")[1]) - 1: p for p in (tmp_path / "ckpt").glob("*.ckpt")}
        expected = [float(torch.load(saved[int(s)], weights_only=False)["state_dict"]["net.2.weight"].norm())
                    for s in steps]
        assert expected == pytest.approx([2 * model.at_end[int(s)] for s in steps], rel=1e-5)
    assert [float(v) for v in l2] == pytest.approx(expected, rel=1e-5)
    assert len(run.series("loss", "raw", "train")[1]) == 8
    assert len(run.series("val_loss", "raw", "eval")[1]) >= 2


class NanAfter(Net):
    """A weight turned NaN by the module's own on_train_batch_end from step 3."""

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.trainer.global_step - 1 >= 3:
            self.net[2].weight.data.fill_(float("nan"))


def test_a_rule_still_stops_a_fit_whose_module_has_its_own_batch_end(tmp_path: Path) -> None:
    """The step's end is taken at the next hook there: its rules run then, and the stop they ask
    for takes effect one step later (the NaN the module wrote at step 3 is found at step 3)."""
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, include_collections=["weights", "losses"],
                          rules=[{"name": "exploding_tensor", "collections": ["weights"],
                                  "actions": ["stop_training"]}])
    trainer = _trainer([cb], max_epochs=5)
    trainer.fit(NanAfter(), _loader(64))  # (8 batches an epoch: step 3 is not an epoch's last)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert cb.stopped_by.step == 3 and trainer.global_step == 5
    assert tripwire.open_run(out).status == "stopped"
