"""Trial 27a (Lightning bug zoo):

- F1: a parameter with a gradient that no optimizer holds (``configure_optimizers`` returned
  ``Adam(self.net[:-1].parameters())``) was not captured at all: its output layer never learnt, and
  the gradient rules' "last layer" was a hidden one. Its gradient is captured now, in network order,
  and automatic optimization says it in a WARNING, once; manual optimization (a GAN's generator
  getting gradients from the discriminator's loss, a parameter the step updates by hand) does not.
- F3: a loss computed on ``logits.detach().requires_grad_()`` trained nothing, and only the run's
  end said the gradient rules "had nothing to read". The step where the optimizer stepped with no
  gradient on any parameter of the module is said in a WARNING, once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tripwire.rules._common import in_capture_order  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

UNHELD = "no optimizer of the trainer holds them"
GRADLESS = "no parameter of the LightningModule had a gradient"


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))


class Clf(L.LightningModule):
    def __init__(self, bug: str = "") -> None:
        super().__init__()
        self.net = _mlp()
        self.bug = bug

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        logits = self.net(x)
        if self.bug == "detached":
            logits = logits.detach().requires_grad_()
        if self.bug == "skip_odd" and batch_idx % 2:
            return None  # (skipping a batch on purpose: Lightning runs no backward)
        return F.cross_entropy(logits, y)

    def configure_optimizers(self) -> Any:
        if self.bug == "head_left_out":
            return torch.optim.SGD(self.net[:-1].parameters(), lr=0.1)
        if self.bug == "head_group_first":  # (the head's group listed first: not the network order)
            return torch.optim.SGD([{"params": self.net[4].parameters()}, {"params": self.net[:4].parameters()}], lr=0.1)
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _data(n: int = 48) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()), batch_size=8)


def _fit(tmp_path: Path, model: L.LightningModule, caplog: pytest.LogCaptureFixture, **overrides: Any) -> tuple[Any, list[str]]:
    out = tmp_path / "run"
    kwargs: dict[str, Any] = {"rules": ["default"], "save_interval": 1, **overrides}
    cb = TripwireCallback(out_dir=out, **kwargs)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], default_root_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(model, _data())
    said = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    return tripwire.open_run(out), said


def _layers(run: Any) -> list[str]:
    return in_capture_order(run, [n for n in run.tensor_names("gradients") if n.endswith(".weight")])


def test_a_layer_left_out_of_the_optimizer_is_captured_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, Clf("head_left_out"), caplog, include_collections=["optimizer"])
    # its gradient is captured, in network order: the output layer is the gradient rules' last layer
    assert _layers(run) == ["gradients/net.0.weight", "gradients/net.2.weight", "gradients/net.4.weight"]
    assert "gradients/net.4.bias" in run.tensor_names("gradients")
    assert run.value("gradients/net.4.weight", "l2", 0) > 0
    # (update ratios stay the optimizer's parameters')
    ratios = [n for n in run.tensor_names("optimizer") if n.startswith("update_ratio/")]
    assert sorted(ratios) == ["update_ratio/net.0.bias", "update_ratio/net.0.weight", "update_ratio/net.2.bias",
                              "update_ratio/net.2.weight"]
    told = [m for m in said if UNHELD in m]
    assert len(told) == 1, said  # once, for the 12 steps
    assert "net.4.weight, net.4.bias" in told[0] and "train step 0" in told[0] and "configure_optimizers" in told[0]
    assert "never learn" in told[0]


def test_a_fit_saving_no_train_step_still_names_the_left_out_layer(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, Clf("head_left_out"), caplog, rules=[], save_interval=100, start_step=5)
    told = [m for m in said if UNHELD in m]
    assert len(told) == 1 and "net.4.weight" in told[0], said


def test_the_fixed_twin_and_a_reordered_optimizer_keep_the_network_order(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, Clf("head_group_first"), caplog)
    # (the optimizer lists the head first; the network order is the modules' registration order)
    assert _layers(run) == ["gradients/net.0.weight", "gradients/net.2.weight", "gradients/net.4.weight"]
    assert not [m for m in said if UNHELD in m or GRADLESS in m], said


def test_under_a_grad_scaler_the_left_out_layer_is_said_not_captured(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """fp16 AMP's GradScaler unscales only the optimizer's parameters: the left-out head's gradient
    stays scaled (65536x), so it is not stored; the WARNING says so. (A real GradScaler on the CPU:
    Lightning's 16-mixed plugin uses it where it has one.)"""
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, include_collections=["gradients"], save_interval=1)
    trainer = L.Trainer(max_steps=4, precision="16-mixed", accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[cb],
                        default_root_dir=str(tmp_path))
    trainer.precision_plugin.scaler = torch.amp.GradScaler("cpu")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(Clf("head_left_out"), _data())
    told = [r.getMessage() for r in caplog.records if UNHELD in r.getMessage()]
    assert len(told) == 1 and "net.4.weight" in told[0] and "not captured" in told[0], told
    names = tripwire.open_run(out).tensor_names("gradients")
    assert "gradients/net.2.weight" in names and not any(n.startswith("gradients/net.4.") for n in names), names


class Gan(L.LightningModule):
    """Manual optimization: the discriminator's loss reaches the generator (not detached), whose
    parameters the generator's optimizer holds; ``scale`` is in no optimizer, stepped by hand."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gen = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
        self.disc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.scale = nn.Parameter(torch.ones(()))
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        x, _ = batch
        opt_g, opt_d = self.optimizers()
        fake = self.gen(torch.randn(x.shape[0], 2)) * self.scale
        d_loss = F.softplus(self.disc(fake)).mean() + F.softplus(-self.disc(x)).mean()
        opt_d.zero_grad()
        self.manual_backward(d_loss)  # (the generator and scale get gradients here too)
        opt_d.step()
        with torch.no_grad():
            self.scale -= 0.01 * self.scale.grad
        g_loss = F.softplus(-self.disc(self.gen(torch.randn(x.shape[0], 2)) * self.scale)).mean()
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()

    def configure_optimizers(self) -> Any:
        return [torch.optim.SGD(self.gen.parameters(), lr=0.05), torch.optim.SGD(self.disc.parameters(), lr=0.05)]


def test_manual_optimization_says_nothing_of_gradients_from_another_loss(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    g = torch.Generator().manual_seed(1)
    data = DataLoader(TensorDataset(torch.randn(32, 4, generator=g), torch.zeros(32)), batch_size=8)
    out = tmp_path / "gan"
    cb = TripwireCallback(out_dir=out, include_collections=["gradients"], save_interval=1)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], default_root_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(Gan(), data)
    said = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert not [m for m in said if UNHELD in m or GRADLESS in m], said
    # (the hand-stepped parameter's gradient is captured all the same)
    assert "gradients/scale" in tripwire.open_run(out).tensor_names("gradients")


def test_a_detached_loss_is_said_at_its_first_step(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, Clf("detached"), caplog, save_interval=10)
    told = [m for m in said if GRADLESS in m]
    assert len(told) == 1, said
    assert "train step 0" in told[0] and ".detach()" in told[0] and "torch.no_grad()" in told[0], told[0]
    assert "requires_grad=False" in told[0] and "does not learn" in told[0]
    assert "manual_backward" not in told[0]  # (automatic optimization)


def test_a_training_step_that_returns_none_on_purpose_is_not_said(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, Clf("skip_odd"), caplog)
    assert not [m for m in said if GRADLESS in m or UNHELD in m], said


class ManualZeroGradAfter(L.LightningModule):
    """Manual optimization with zero_grad() between the backward and the step: nothing steps."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _mlp()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        opt = self.optimizers()
        self.manual_backward(F.cross_entropy(self.net(x), y))
        opt.zero_grad()
        opt.step()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_manual_optimization_stepping_after_zero_grad_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run, said = _fit(tmp_path, ManualZeroGradAfter(), caplog)
    told = [m for m in said if GRADLESS in m]
    assert len(told) == 1 and "train step 0" in told[0] and "manual_backward" in told[0], said
