"""Trial 30a F2 (Keras): a ``LossScaleOptimizer``'s dynamic scale is recorded as ``loss_scale`` (kind
optimizer) at save steps, so ``loss_scale_collapse`` (default set) names a NaN gradient at every step
that makes the scaler skip every step (the gradients are never captured there)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402


@pytest.fixture
def mixed_float16() -> Iterator[None]:
    before = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(before)


class _NanGradient(keras.layers.Layer):
    """0 in the forward pass, a NaN gradient at every step (the torch.where/sqrt trap)."""

    def call(self, x):  # type: ignore[no-untyped-def]
        return x + keras.ops.where(x > 1e9, keras.ops.sqrt(x - 1e9 - 1.0), 0.0)


def _fit(tmp_path: Path, *layers: object, epochs: int = 2, **overrides: object) -> TripwireCallback:
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), *layers,
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run", **{"rules": ["default"], "save_interval": 5, **overrides})
    model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, callbacks=[cb])
    return cb


def test_the_loss_scale_is_recorded_and_a_collapse_is_found(tmp_path: Path, mixed_float16: None) -> None:
    cb = _fit(tmp_path, _NanGradient(), epochs=3, actions=["log", "stop_training"])
    found = cb.stopped_by
    # (session 30, trial 30g F1: min_scale 0.001 and every step since the save before skipped: step 25)
    assert found is not None and found.rule == "loss_scale_collapse" and found.step == 25, cb.findings
    assert "is 0.000977 (2^-10)" in found.message and "it was 32768 (2^15) at step 0" in found.message, found.message
    run = tripwire.open_run(tmp_path / "run")
    steps, scales = run.series("loss_scale")
    assert steps.tolist() == [0, 5, 10, 15, 20, 25]
    assert scales.tolist() == [32768.0, 1024.0, 32.0, 1.0, 0.03125, 2.0 ** -10]
    # the default set reads the optimizer kind for the loss scale alone: no lr/0, no update ratio
    assert [n for n in run.tensor_names() if not n.startswith("gradients/")] == ["loss", "loss_scale"]


def test_a_healthy_mixed_float16_fit_records_its_scale_and_finds_nothing(tmp_path: Path, mixed_float16: None) -> None:
    cb = _fit(tmp_path, include_collections=["optimizer"])
    assert cb.findings == []
    run = tripwire.open_run(tmp_path / "run")
    assert run.series("loss_scale")[1].tolist() == [32768.0] * 4
    assert "lr/0" in run.tensor_names()


def test_float32_records_no_loss_scale(tmp_path: Path) -> None:
    _fit(tmp_path, epochs=1, include_collections=["optimizer"])
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert "lr/0" in names and "loss_scale" not in names
