"""Trial 31a F2 and F4 (Keras).

F2: under ``mixed_float16`` a custom torch ``train_step`` that never calls ``optimizer.scale_loss`` has its
gradients divided by the loss scale (32768) by the ``LossScaleOptimizer``, and the model cannot learn;
the only WARNING said the recorded loss lags. Where the callback knows both facts (an optimizer that
scales the loss applied this step's gradients, and its ``scale_loss`` was not called) a WARNING now says
the applied gradients are divided by the loss scale N and the model barely learns, with the fix.

F4: the stop reason of an ``EarlyStopping`` on ``val_loss`` under ``fit(validation_freq=2)`` said "in the
last 2 epoch(s)" where its patience counted 2 validations over 4 epochs; it names the validations and
their epochs now.

Keras runs on the torch backend, set before keras is imported."""

from __future__ import annotations

import logging
import os

os.environ["KERAS_BACKEND"] = "torch"

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(128, 10)).astype("float32")
Y = (X[:, 0] + X[:, 1] > 0).astype("int64")


@pytest.fixture
def mixed_float16() -> Iterator[None]:
    before = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(before)


class CustomStep(keras.Model):
    """Keras's torch "customizing fit()" train_step; ``scale`` calls ``optimizer.scale_loss`` before the
    backward pass (as Keras's own train_step does), else not (as that guide writes it)."""

    def __init__(self, scale: bool) -> None:
        super().__init__()
        self.h = keras.layers.Dense(16, activation="relu", name="h")
        self.o = keras.layers.Dense(2, name="o", dtype="float32")
        self.scale = scale

    def call(self, x: Any, training: bool = False) -> Any:
        return self.o(self.h(x))

    def train_step(self, data: Any) -> dict[str, Any]:
        x, y = data
        self.zero_grad()
        y_pred = self(x, training=True)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        self._loss_tracker.update_state(loss)
        if self.scale:
            loss = self.optimizer.scale_loss(loss)
        loss.backward()
        with torch.no_grad():
            self.optimizer.apply([v.value.grad for v in self.trainable_weights], self.trainable_weights)
        return self.compute_metrics(x, y, y_pred)


def _fit_custom(tmp_path: Path, caplog: pytest.LogCaptureFixture, scale: bool, optimizer: Any) -> list[str]:
    keras.utils.set_random_seed(0)
    model = CustomStep(scale)
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[], include_collections=["gradients"], save_interval=2)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=32, epochs=1, verbose=0, callbacks=[cb])
    return [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("scale", [False, True])
def test_a_loss_scale_optimizer_without_scale_loss_is_said_plainly(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                    mixed_float16: None, scale: bool) -> None:
    said = _fit_custom(tmp_path, caplog, scale, keras.optimizers.SGD(0.1))  # (compile wraps it: mixed_float16)
    plain = [m for m in said if "divided by the loss scale" in m]
    if scale:
        assert plain == [], said
        return
    assert len(plain) == 1, said
    assert plain[0].startswith("tripwire: train step 0 applied the gradients of model.optimizer, a LossScaleOptimizer "
                               "(mixed_float16), without calling its scale_loss"), plain[0]
    assert "the applied gradients are divided by the loss scale 32768" in plain[0], plain[0]
    assert "the model barely learns" in plain[0]
    assert "call `loss = self.optimizer.scale_loss(loss)` before the backward pass" in plain[0]


def test_a_loss_scale_factor_without_scale_loss_is_said_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said = _fit_custom(tmp_path, caplog, False, keras.optimizers.SGD(0.1, loss_scale_factor=128.0))
    plain = [m for m in said if "divided by the loss scale" in m]
    assert len(plain) == 1 and "an optimizer with a loss_scale_factor" in plain[0], said
    assert "divided by the loss scale 128" in plain[0], plain[0]


def _model() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(1, activation="sigmoid", name="out")])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="binary_crossentropy")
    return model


@pytest.mark.parametrize("freq", [2, 3])
def test_early_stopping_under_validation_freq_counts_validations(tmp_path: Path, freq: int) -> None:
    # min_delta 1e9: the first validation sets the best, no later one improves on it
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, min_delta=1e9)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=[], save_interval=2)
    history = _model().fit(X, Y.astype("float32"), batch_size=32, epochs=12, verbose=0, validation_data=(X, Y),
                           validation_freq=freq, callbacks=[cb, stopper])
    stopped = 3 * freq  # (the validations at epochs freq, 2 freq, 3 freq: the best, then 2 without improvement)
    assert stopper.stopped_epoch == stopped - 1 and len(history.history["loss"]) == stopped
    best = history.history["val_loss"][0]
    assert cb.stop_reason == (
        f"model.stop_training was set outside tripwire (train step {4 * stopped - 1}): "
        f"EarlyStopping(monitor='val_loss'): epoch {stopped}: early stopping: val_loss did not improve by more than "
        f"min_delta=1e+09 in the last 2 validation(s), at epochs {2 * freq} and {3 * freq} (validation_freq={freq}) "
        f"(patience=2); best {best:.6g} at epoch {freq}")
    assert tripwire.open_run(tmp_path / "run").stop_reasons == {0: cb.stop_reason}


def test_early_stopping_on_a_training_metric_counts_epochs(tmp_path: Path) -> None:
    # a monitor logged at every epoch: its patience counts epochs, whatever validation_freq
    stopper = keras.callbacks.EarlyStopping(monitor="loss", patience=2, min_delta=1e9)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=[], save_interval=2)
    _model().fit(X, Y.astype("float32"), batch_size=32, epochs=12, verbose=0, validation_data=(X, Y),
                 validation_freq=2, callbacks=[cb, stopper])
    assert stopper.stopped_epoch == 2
    assert "loss did not improve by more than min_delta=1e+09 in the last 2 epoch(s) (patience=2)" in cb.stop_reason


@pytest.mark.parametrize("clip", [{"global_clipnorm": 1.0}, {}])
def test_exploding_gradient_does_not_advise_clipping_to_a_fit_that_clips(tmp_path: Path, clip: dict[str, float]) -> None:
    # trial 31a F3: targets in the hundreds, SGD(0.5, global_clipnorm=1.0): a learning fit, its unclipped
    # gradients far above max_norm; the finding advised "gradient clipping"
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 1)) * 100 + 300).astype("float32")
    inputs = keras.Input((8,))
    model = keras.Model(inputs, keras.layers.Dense(1, name="o")(keras.layers.Dense(32, activation="relu", name="h")(inputs)))
    model.compile(keras.optimizers.SGD(0.5 if clip else 1e-6, **clip), "mse")
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_gradient"], save_interval=2,
                          actions=["log", "stop_training"])
    model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[cb])
    found = cb.stopped_by
    assert found is not None and found.rule == "exploding_gradient", cb.findings
    run = tripwire.open_run(tmp_path / "run")
    if clip:
        assert run.series("clip/global_norm")[1].tolist() == [1.0] * len(run.series("clip/global_norm")[0])
        assert "gradient clipping" not in found.message, found.message
        assert "The optimizer clips the gradients it applies already (to a global norm 1)" in found.message
    else:
        assert not [n for n in run.tensor_names() if n.startswith("clip/")]
        assert "Usual fixes: gradient clipping" in found.message, found.message
