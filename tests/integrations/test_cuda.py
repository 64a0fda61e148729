"""The torch integrations on a CUDA device: statistics computed on the GPU against a float64
reference, no host synchronisation in tripwire's hooks on steps that are not saved (and how many
on those that are), a rule stopping training, bf16 autocast, and Keras on the torch backend's GPU.

These tests need a CUDA device and are skipped without one (CI has none; they are run on a GPU
machine, see docs/benchmarks.md). The host-sync check uses
``torch.cuda.set_sync_debug_mode``: in mode ``"error"`` every synchronising CUDA call (a
device-to-host copy, ``.item()``, ``nonzero``...) raises, so a hook that waits for the GPU on a
step that is not saved fails the fit."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported (the Keras test below)

import importlib.util  # noqa: E402
import math  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device (torch.cuda.is_available() is False)", allow_module_level=True)
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
ALL = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs",
       "optimizer", "inputs"]


class Net(L.LightningModule):
    def __init__(self, nan_at: int | None = None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))
        self.nan_at = nan_at
        self.seen_devices: set[str] = set()  # where training ran (Lightning moves the module back after fit)

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        self.seen_devices.add(next(self.parameters()).device.type)
        if self.nan_at is not None and self.global_step >= self.nan_at:
            x = x * float("nan")
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def _loader(n: int = 256, batch: int = 16, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return DataLoader(TensorDataset(x, (x[:, :4].argmax(1))), batch_size=batch)


def _trainer(callbacks: list[Any], **kw: Any) -> Any:
    opts = dict(max_epochs=1, accelerator="gpu", devices=1, enable_progress_bar=False, logger=False,
                enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    opts.update(kw)
    return L.Trainer(callbacks=callbacks, **opts)


@contextmanager
def _sync_mode(mode: str) -> Iterator[list[warnings.WarningMessage]]:
    """``torch.cuda.set_sync_debug_mode(mode)`` inside, the previous mode after; yields the
    synchronisation warnings raised inside (mode ``"warn"``)."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode(mode)
        try:
            yield seen
        finally:
            torch.cuda.set_sync_debug_mode(previous)


class SyncAudited(TripwireCallback):
    """Runs tripwire's per-step train hooks with synchronising CUDA calls raising on steps that
    are not saved (``step % interval != 0``) and counted on the others."""

    def __init__(self, interval: int, **kw: Any) -> None:
        super().__init__(save_interval=interval, **kw)
        self.interval = interval
        self.syncs: dict[int, list[str]] = {}
        self.audited_steps: set[int] = set()

    def _audit(self, trainer: Any, fn: Any, *args: Any) -> None:
        step = int(trainer.global_step)
        saved = step % self.interval == 0
        with _sync_mode("warn" if saved else "error") as seen:
            fn(*args)
        self.audited_steps.add(step)
        if saved:
            where = [f"{Path(w.filename).name}:{w.lineno}" for w in seen if "synchroniz" in str(w.message)]
            self.syncs.setdefault(step, []).extend(where)

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        self._audit(trainer, super().on_train_batch_start, trainer, *args)

    def on_before_optimizer_step(self, trainer: Any, *args: Any) -> None:
        self._audit(trainer, super().on_before_optimizer_step, trainer, *args)

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        # the step is complete here and the global step already counts it: audit as the step it ends
        step = int(trainer.global_step) - 1
        saved = step % self.interval == 0
        with _sync_mode("warn" if saved else "error") as seen:
            super().on_train_batch_end(trainer, *args)
        if saved:
            where = [f"{Path(w.filename).name}:{w.lineno}" for w in seen if "synchroniz" in str(w.message)]
            self.syncs.setdefault(step, []).extend(where)


# ------------------------------------------------------------------------------ Lightning
def test_statistics_computed_on_the_gpu_match_a_float64_reference(tmp_path: Path) -> None:
    out = tmp_path / "run"
    reductions = ["l2", "mean", "std", "min", "max", "abs_mean", "abs_max", "zero_fraction", "nonfinite_count"]
    cb = TripwireCallback(out_dir=out, save_interval=1, collections={
        "weights": {"reductions": reductions}, "biases": {"reductions": reductions},
        "gradients": {"reductions": ["raw", *reductions]}, "activations": {"reductions": ["raw", *reductions]},
        "losses": None})
    model = Net()
    _trainer([cb], max_steps=5).fit(model, _loader())
    assert model.seen_devices == {"cuda"}
    run = tripwire.open_run(out)
    assert run.steps("train") == [0, 1, 2, 3, 4]

    def check(name: str, ref: np.ndarray, step: int) -> None:
        ref = ref.astype(np.float64)
        want = {"l2": np.linalg.norm(ref), "mean": ref.mean(), "std": ref.std(), "min": ref.min(), "max": ref.max(),
                "abs_mean": np.abs(ref).mean(), "abs_max": np.abs(ref).max(), "zero_fraction": np.mean(ref == 0),
                "nonfinite_count": 0.0}
        for red, value in want.items():
            got = run.value(name, red, step, "train")
            assert got == pytest.approx(value, rel=2e-5, abs=1e-7), (name, red, got, value)

    # the weights of the last saved step are the fitted ones
    for pname, p in model.named_parameters():
        check(pname, p.detach().cpu().double().numpy(), 4)
    # gradients and activations: the reductions against the raw values saved beside them
    for step in (0, 4):
        for name in ("gradients/net.0.weight", "gradients/net.4.bias", "net.1/output", "net.3/output"):
            check(name, run.tensor(name).value(step), step)
    assert run.value("net.1/output", "zero_fraction", 4, "train") > 0.2  # ReLU: really computed, not zeros


def test_no_host_sync_in_hooks_off_save_steps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = SyncAudited(4, out_dir=out, collections=ALL, rules="default",
                     save={"modes": {"eval": {"interval": 1}}})
    _trainer([cb], max_steps=13, val_check_interval=6).fit(Net(), _loader(), _loader(64, seed=1))
    assert cb.audited_steps == set(range(13))
    run = tripwire.open_run(out)
    assert run.series("gradients/net.0.weight", "l2", "train")[0].tolist() == [0, 4, 8, 12]
    assert run.tensor_names("activations")
    # the training loss of every step, kept on the device between saves (every_step: the default)
    assert run.series("loss", "raw", "train")[0].tolist() == list(range(13))
    # a saved step reads everything back in one device-to-host copy; the first one also sends the
    # index layouts of the packed reductions to the device, once (printed for the record)
    print("synchronisations per saved step:", {step: where for step, where in sorted(cb.syncs.items())})
    assert sorted(cb.syncs) == [0, 4, 8, 12]
    for step in (4, 8, 12):
        assert len(cb.syncs[step]) == 1 and cb.syncs[step][0].startswith("_torch.py:"), (step, cb.syncs[step])
    assert len(cb.syncs[0]) <= 4, cb.syncs[0]


def test_rule_stops_a_gpu_fit_on_nan(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    trainer = _trainer([cb], max_epochs=2)
    trainer.fit(Net(nan_at=3), _loader())
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert cb.stopped_by.step == 3 and trainer.global_step == 4
    assert tripwire.open_run(out).status == "stopped"


def test_bf16_mixed_precision_on_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections={
        "activations": {"reductions": ["mean", "std", "nonfinite_count", "histogram"]}, "gradients": None,
        "weights": None, "losses": None})
    _trainer([cb], max_steps=3, precision="bf16-mixed").fit(Net(), _loader())
    run = tripwire.open_run(out)
    for step in (0, 2):
        assert math.isfinite(run.value("net.0/output", "mean", step, "train"))
        assert run.value("net.0/output", "std", step, "train") > 0
        counts, edges = run.histogram("net.0/output", step, "train", 0)
        assert counts.sum() == 16 * 64 and len(edges) == 31
    assert math.isfinite(run.value("gradients/net.0.weight", "l2", 2, "train"))


# ---------------------------------------------------------------------------------- Keras
def names_of(run: Any, collection: str, suffix: str) -> str:
    (name,) = [n for n in run.tensor_names(collection) if n.endswith(suffix)]
    return name


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
def test_keras_on_the_torch_backends_gpu(tmp_path: Path) -> None:
    import keras

    from tripwire.integrations.keras import TripwireCallback as KerasCallback

    assert keras.backend.backend() == "torch"
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu", name="d1"),
                              keras.layers.Dense(4, name="out")])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(112, 16)).astype("float32")  # 7 steps: the last (6) is saved
    y = x[:, :4].argmax(1)
    out = tmp_path / "run"
    cb = KerasCallback(out_dir=out, save_interval=2, collections={
        "weights": {"reductions": ["l2", "mean", "max"]}, "gradients": {"reductions": ["raw", "l2"]},
        "activations": None, "losses": None})
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert model.layers[0].kernel.value.device.type == "cuda"
    run = tripwire.open_run(out)
    assert run.series(names_of(run, "weights", "d1/kernel"), "l2", "train")[0].tolist() == [0, 2, 4, 6]
    kernel = np.asarray(keras.ops.convert_to_numpy(model.layers[0].kernel), dtype=np.float64)
    kname = names_of(run, "weights", "d1/kernel")
    assert run.value(kname, "l2", 6, "train") == pytest.approx(np.linalg.norm(kernel), rel=2e-5)
    gname = names_of(run, "gradients", "d1/kernel")
    g = run.tensor(gname).value(6).astype(np.float64)
    assert run.value(gname, "l2", 6, "train") == pytest.approx(np.linalg.norm(g), rel=2e-5)
    assert run.tensor_names("activations")
