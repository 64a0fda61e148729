"""TripwireCallback and gradient clipping: the recorded gradients are the ones the optimizer step
got before clipping (copied on save steps of fits that may change them in place: trainer clipping,
an overridden ``configure_gradient_clipping`` or ``on_before_optimizer_step``, a later callback's
``on_before_optimizer_step``, manual optimization), referenced without a copy otherwise; under
manual optimization, what ``optimizer.step()`` received. Tiny real fits."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tripwire.integrations.lightning import _callback as callback_module  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", ".*does not have many workers.*")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

CLIP = 0.01  # far below the gradient norms of these fits (~0.1-1): every step is clipped
NAMES = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


class Net(L.LightningModule):
    """A tiny MLP that records, after each backward, the L2 norm of every parameter's gradient
    (before any clipping: Lightning clips after ``on_after_backward``); the last backward of an
    optimizer step holds its accumulated gradients."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 2)
        self.after_backward: list[dict[str, float]] = []

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def on_after_backward(self) -> None:
        scaler = getattr(self.trainer.precision_plugin, "scaler", None)
        scale = float(scaler.get_scale()) if scaler is not None else 1.0  # fp16 AMP: not yet unscaled here
        norms = {n: float(torch.linalg.vector_norm(p.grad)) / scale for n, p in self.named_parameters()}
        self.after_backward.append(norms)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader(n: int = 32, batch: int = 8) -> Any:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g) * 3
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch)


def _fit(tmp_path: Path, module: L.LightningModule, steps: int = 3, extra: list[Any] | None = None, **kw: Any) -> Any:
    torch.manual_seed(0)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["losses", "gradients"])
    trainer = L.Trainer(callbacks=[cb, *(extra or [])], max_steps=steps, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, **kw)
    trainer.fit(module, _loader())
    return tripwire.open_run(tmp_path / "run")


def _stored(run: Any, name: str) -> np.ndarray:
    steps, values = run.series(f"gradients/{name}", "l2", "train")
    assert steps.tolist() == list(range(len(steps)))
    return values


def _expected(module: Net, name: str, micro: int = 1) -> np.ndarray:
    return np.array([d[name] for d in module.after_backward[micro - 1::micro]])


def _assert_unclipped(run: Any, module: Net, steps: int, micro: int = 1) -> None:
    total = 0.0
    for name in NAMES:
        got, want = _stored(run, name), _expected(module, name, micro)
        assert len(got) == len(want) == steps
        np.testing.assert_allclose(got, want, rtol=1e-5)
        total = max(total, float(want.max()))
    assert total > 10 * CLIP  # so the clipped gradients (total norm CLIP) differ from these


# ------------------------------------------------------------------------ by hand, with fakes
def test_copies_are_needed_exactly_when_something_may_change_the_gradients_in_place() -> None:
    may = callback_module._grads_may_change
    cb = TripwireCallback()

    class OwnHook(L.Callback):
        def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
            pass

    class ModuleHook(Net):
        def on_before_optimizer_step(self, optimizer: Any) -> None:
            pass

    class ModuleClip(Net):
        def configure_gradient_clipping(self, optimizer: Any, gradient_clip_val: Any = None,
                                        gradient_clip_algorithm: Any = None) -> None:
            pass

    manual = Net()
    manual.automatic_optimization = False
    lam = L.pytorch.callbacks.LambdaCallback(on_before_optimizer_step=lambda *a: None)

    def trainer(clip: Any = None, callbacks: tuple[Any, ...] = (cb,)) -> Any:
        return SimpleNamespace(gradient_clip_val=clip, callbacks=list(callbacks))

    assert not may(trainer(), Net(), cb)
    assert not may(trainer(0), Net(), cb)  # Lightning does not clip at 0
    assert not may(trainer(callbacks=(OwnHook(), cb, L.Callback())), Net(), cb)  # an earlier hook ran already
    assert not may(SimpleNamespace(), Net(), cb)  # a trainer without these attributes (the fakes of test_lightning)
    assert may(trainer(0.5), Net(), cb)
    assert may(trainer(), ModuleHook(), cb)
    assert may(trainer(), ModuleClip(), cb)
    assert may(trainer(), manual, cb)
    assert may(trainer(callbacks=(cb, OwnHook())), Net(), cb)
    assert may(trainer(callbacks=(cb, lam)), Net(), cb)  # an instance attribute, as LambdaCallback sets it


# ------------------------------------------------------------------------------- real fits
@pytest.mark.parametrize("micro", [1, 2])
def test_gradient_clip_val_records_the_unclipped_gradients(tmp_path: Path, micro: int) -> None:
    module = Net()
    run = _fit(tmp_path, module, gradient_clip_val=CLIP, accumulate_grad_batches=micro)
    _assert_unclipped(run, module, steps=3, micro=micro)


def test_fp16_amp_with_clipping_records_the_unscaled_unclipped_gradients(tmp_path: Path) -> None:
    from lightning.pytorch.plugins import MixedPrecision

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)  # no overflow: every step is applied
    module = Net()
    run = _fit(tmp_path, module, gradient_clip_val=CLIP, plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)])
    _assert_unclipped(run, module, steps=3)


class ClipsInConfigure(Net):
    def configure_gradient_clipping(self, optimizer: Any, gradient_clip_val: Any = None,
                                    gradient_clip_algorithm: Any = None) -> None:
        torch.nn.utils.clip_grad_norm_(self.parameters(), CLIP)


class ClipsInItsHook(Net):
    def on_before_optimizer_step(self, optimizer: Any) -> None:  # runs after the callbacks' hook
        torch.nn.utils.clip_grad_norm_(self.parameters(), CLIP)


class ClippingCallback(L.Callback):
    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        torch.nn.utils.clip_grad_value_(pl_module.parameters(), CLIP)


@pytest.mark.parametrize("where", ["configure_gradient_clipping", "module_hook", "later_callback"])
def test_clipping_elsewhere_records_the_unclipped_gradients(tmp_path: Path, where: str) -> None:
    module = {"configure_gradient_clipping": ClipsInConfigure, "module_hook": ClipsInItsHook}.get(where, Net)()
    extra = [ClippingCallback()] if where == "later_callback" else None
    _assert_unclipped(_fit(tmp_path, module, extra=extra), module, steps=3)


@pytest.mark.parametrize("clip", [None, CLIP])
def test_gradients_are_copied_only_when_the_fit_clips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      clip: float | None) -> None:
    calls: list[int] = []
    real = callback_module.snapshot

    def counted(params: Any, into: Any = None) -> Any:
        calls.append(len(params))
        return real(params, into=into)

    monkeypatch.setattr(callback_module, "snapshot", counted)
    module = Net()
    run = _fit(tmp_path, module, steps=3, gradient_clip_val=clip)
    if clip is None:
        assert calls == []  # the gradients themselves were offered: no copy
    else:
        assert calls == [len(NAMES)] * 3  # one fused copy of the four gradients per save step
    for name in NAMES:
        np.testing.assert_allclose(_stored(run, name), _expected(module, name), rtol=1e-5)


class Manual(Net):
    """Manual optimization: clips inside training_step, then steps, then zeroes the gradients in
    place (``set_to_none=False``) before the batch ends."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.received: list[dict[str, float]] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        opt = self.optimizers()
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=CLIP, gradient_clip_algorithm="norm")
        self.received.append({n: float(torch.linalg.vector_norm(p.grad)) for n, p in self.named_parameters()})
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss


def test_manual_optimization_records_what_optimizer_step_received(tmp_path: Path) -> None:
    module = Manual()
    run = _fit(tmp_path, module)
    for name in NAMES:
        got = _stored(run, name)
        np.testing.assert_allclose(got, [d[name] for d in module.received], rtol=1e-5)  # clipped, not zeroed
        assert (got < 1.01 * CLIP).all() and (_expected(module, name) > 0).all()


class TwoOptimizers(Net):
    """Manual optimization with one optimizer per layer, each clipped and stepped in turn."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.received: list[dict[str, float]] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        norms: dict[str, float] = {}
        for opt, layer in zip(self.optimizers(), (self.fc1, self.fc2)):
            opt.zero_grad()
            self.manual_backward(nn.functional.cross_entropy(self(x), y))
            torch.nn.utils.clip_grad_norm_(layer.parameters(), CLIP)
            norms.update({f"{n}.{k}": float(torch.linalg.vector_norm(p.grad))
                          for n in ("fc1", "fc2") if getattr(self, n) is layer for k, p in layer.named_parameters()})
            opt.step()
        self.received.append(norms)

    def configure_optimizers(self) -> Any:
        return [torch.optim.SGD(self.fc1.parameters(), lr=0.1), torch.optim.SGD(self.fc2.parameters(), lr=0.1)]


def test_manual_optimization_with_two_optimizers_reuses_each_ones_copies(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, bool]] = []
    real = callback_module.snapshot

    def counted(params: Any, into: Any = None) -> Any:
        out = real(params, into=into)
        calls.append((len(params), into is not None and all(a is b for a, b in zip(out, into))))
        return out

    monkeypatch.setattr(callback_module, "snapshot", counted)
    module = TwoOptimizers()
    run = _fit(tmp_path, module)  # max_steps counts optimizer steps: 3 steps are 2 batches
    assert calls == [(2, False), (2, False), (2, True), (2, True)]  # the second batch copies into the first's buffers
    for name in NAMES:
        steps, got = run.series(f"gradients/{name}", "l2", "train")
        assert steps.tolist() == [0, 2]  # the global step at each batch start
        np.testing.assert_allclose(got, [d[name] for d in module.received], rtol=1e-5)
