"""Trial 30a (a PyTorch engineer using mixed precision), the Lightning callback:

- F1: a complex ``nn.Parameter`` (an FFT filter) crashed every fit with ``rules=["default"]`` at step 0
  (``add('gradients/spec'): a complex tensor``): its weights and gradients are captured as their
  magnitude ``|z|`` (whose L2 norm is the complex norm), a complex layer output likewise, and its
  update ratio is the complex one.
- F2: under fp16 AMP a NaN gradient at every step made the GradScaler skip every step; nothing was
  captured of the gradients, and the run's end blamed the capture. The scale is recorded
  (``loss_scale``, kind optimizer), ``loss_scale_collapse`` (default set) stops the run, and the end
  says the scaler skipped every save step.
- F3: update ratios of a step the scaler skipped (0: the weights do not move) stopped a healthy run
  through ``weight_update_ratio``: they are not recorded, as the gradients are not.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.plugins import MixedPrecision  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def _data(n: int = 64) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)


def _fit(tmp_path: Path, module: L.LightningModule, epochs: int = 1, plugins: Any = None, **overrides: Any
         ) -> tuple[TripwireCallback, Any]:
    cb = TripwireCallback(out_dir=tmp_path / "run", **{"rules": ["default"], **overrides})
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb],
                        plugins=plugins)
    trainer.fit(module, _data())
    return cb, trainer


def _fp16(init_scale: float = 65536.0) -> list[Any]:
    return [MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=init_scale,
                                                                          growth_interval=5))]


# ------------------------------------------------------------------------------------ F1: complex
class _FFTLayer(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.fft.fft(x)  # (a complex layer output)


class Spectral(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fft = _FFTLayer()
        self.spec = nn.Parameter(torch.randn(8, dtype=torch.complex64) * 0.1)
        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        self.seen: dict[int, dict[str, float]] = {}

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        x = x + torch.fft.ifft(self.fft(x) * self.spec).real
        return F.cross_entropy(self.net(x), y)

    def on_before_optimizer_step(self, optimizer: Any) -> None:  # (after the callback's hook: the same gradient)
        self.seen[self.global_step] = {"grad": float(torch.linalg.vector_norm(self.spec.grad).double()),
                                       "before": self.spec.detach().clone()}  # type: ignore[dict-item]

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        s = self.global_step - 1
        before = self.seen[s]["before"]
        self.seen[s]["ratio"] = float(torch.linalg.vector_norm(self.spec.detach() - before) /  # type: ignore[operator]
                                      torch.linalg.vector_norm(before))
        self.seen[s]["weight"] = float(torch.linalg.vector_norm(self.spec.detach()))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def test_a_complex_parameter_fits_with_the_default_rules(tmp_path: Path) -> None:
    module = Spectral()
    cb, trainer = _fit(tmp_path, module, save_interval=2)
    assert trainer.global_step == 8 and cb.findings == []
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    steps, norms = run.series("gradients/spec", "l2")
    assert steps.tolist() == [0, 2, 4, 6]
    # the magnitude's L2 norm is the complex gradient's norm
    assert np.allclose(norms, [module.seen[s]["grad"] for s in steps.tolist()], rtol=1e-5)


def test_a_complex_parameters_weights_update_ratio_and_layer_output_are_captured(tmp_path: Path) -> None:
    module = Spectral()
    _fit(tmp_path, module, save_interval=2, include_collections=["weights", "optimizer", "activations"])
    run = tripwire.open_run(tmp_path / "run")
    steps, weights = run.series("spec", "l2")
    assert np.allclose(weights, [module.seen[s]["weight"] for s in steps.tolist()], rtol=1e-5)
    assert run.series("spec", "min")[1].min() >= 0  # (magnitudes)
    steps, ratios = run.series("update_ratio/spec")
    assert len(steps) and np.allclose(ratios, [module.seen[s]["ratio"] for s in steps.tolist()], rtol=1e-4)
    # the FFT layer's complex output: its magnitude, no refusal
    assert run.series("fft/output", "mean")[1].min() > 0


# --------------------------------------------------------------------------- F2, F3: fp16 AMP
class Clf(L.LightningModule):
    def __init__(self, nan_grad: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.nan_grad = nan_grad

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        if self.nan_grad:  # (0 in the forward pass, a NaN gradient at every step: the torch.where trap)
            w = self.net[0].weight
            loss = loss + torch.where(w > 10, torch.sqrt(w), torch.zeros_like(w)).sum()
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_nan_gradient_under_fp16_is_named_by_the_collapsing_loss_scale(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        cb, trainer = _fit(tmp_path, Clf(nan_grad=True), epochs=4, plugins=_fp16(), actions=["log", "stop_training"],
                           save_interval=10)
    found = cb.stopped_by
    # (session 30, trial 30g F1: min_scale 0.001 and every step since the save before skipped: step 30)
    assert found is not None and found.rule == "loss_scale_collapse" and found.step == 30, cb.findings
    assert found.severity == "critical"
    assert "is 6.1e-05 (2^-14)" in found.message and "it was 65536 (2^16) at step 0" in found.message, found.message
    assert "skipped every one of the 30 optimizer steps since then" in found.message, found.message
    run = tripwire.open_run(tmp_path / "run")
    steps, scales = run.series("loss_scale")
    assert steps.tolist() == [0, 10, 20, 30] and scales.tolist() == [65536.0, 64.0, 0.0625, 2.0 ** -14]
    # the run's end: the gradient rules read nothing because the scaler skipped every save step
    [said] = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert "fp16 AMP's GradScaler skipped 4 of the 4 train save steps that asked for gradients" in said, said
    assert "the loss scale was 6.1e-05 at the last save step read" in said, said
    assert "see what the lightning integration captures" not in said, said  # (the cause is known: session 30)


def test_skipped_first_steps_record_no_update_ratio(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # init_scale 2^30 overflows on the first steps of this net: a healthy fit whose first ratios read 0
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        cb, _ = _fit(tmp_path, Clf(), epochs=3, plugins=_fp16(2.0 ** 30), save_interval=1,
                     rules=["default", "weight_update_ratio"], actions=["log", "stop_training"])
    assert cb.findings == [], cb.findings
    run = tripwire.open_run(tmp_path / "run")
    steps, scales = run.series("loss_scale")
    assert scales[0] == 2.0 ** 30 and steps.tolist() == list(range(24))
    skipped = [int(s) for s, now, after in zip(steps, scales, scales[1:]) if after < now]
    assert skipped[:3] == [0, 1, 2], skipped
    ratio_steps = run.series("update_ratio/net.0.weight")[0].tolist()
    grad_steps = run.series("gradients/net.0.weight", "l2")[0].tolist()
    assert ratio_steps == grad_steps and not set(ratio_steps) & set(skipped), (ratio_steps, skipped)
    assert not [r for r in caplog.records if "had nothing to read" in r.getMessage()]


def test_no_scaler_records_no_loss_scale_and_the_default_set_no_optimizer_values(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        cb, _ = _fit(tmp_path, Clf(), save_interval=2)
    run = tripwire.open_run(tmp_path / "run")
    # the default set reads the optimizer kind for the loss scale only: no lr/*, no update ratio
    # (no copy of the parameters at save steps), and no word of a loss scale that a run without
    # a scaler does not have
    assert [n for n in run.tensor_names() if not n.startswith("gradients/")] == ["loss"], run.tensor_names()
    assert not [r for r in caplog.records if "nothing to read" in r.getMessage()], caplog.text


def test_a_scaler_records_its_scale_beside_the_learning_rate_where_the_optimizer_is_collected(tmp_path: Path) -> None:
    _fit(tmp_path, Clf(), plugins=_fp16(), save_interval=4, include_collections=["optimizer"])
    run = tripwire.open_run(tmp_path / "run")
    assert {"loss_scale", "lr/0", "update_ratio/net.0.weight"} <= set(run.tensor_names())
    assert run.series("loss_scale")[0].tolist() == [0, 4]


def test_bf16_records_no_loss_scale(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], save_interval=2,
                          include_collections=["optimizer"])
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", precision="bf16-mixed", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[cb])
    trainer.fit(Clf(), _data())
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert "lr/0" in names and "loss_scale" not in names
