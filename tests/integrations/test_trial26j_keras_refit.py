"""Trial 26j finding 1: a fit of the same model again, after a fit whose
``EarlyStopping(restore_best_weights=True)`` was listed AFTER the TripwireCallback, was taken for a
new model: tripwire fingerprinted the weights at its own ``on_train_end``, then EarlyStopping's
restored the best epoch's weights, so the next fit started from other weights than the fingerprint
(``continued: False``) and ``loss_not_decreasing``, judging a converged model alone, stopped a
healthy "train some more" fit. The callback now also fingerprints the weights at each epoch end: a
fit continues the training when it starts from the weights the last fit ended with or from those of
one of its epoch ends (restored by EarlyStopping, a best checkpoint loaded), whatever the callbacks'
order.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(256, 8)).astype("float32")
Y = (X @ RNG.normal(size=8) > 0).astype("float32")


def model_of(seed: int = 0) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(1, activation="sigmoid", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    return model


def continued(out: Path) -> list[bool]:
    return [t["continued"] for t in tripwire.open_run(out).trainings[0]]


def restoring_first_epoch() -> Any:
    """An EarlyStopping that stops after the second epoch and restores the first's weights: the
    'best' loss under mode='max' is the first (the loss falls), patience 1."""
    return keras.callbacks.EarlyStopping(monitor="loss", mode="max", patience=1, restore_best_weights=True)


@pytest.mark.parametrize("order", ["after", "before"])
def test_weights_restored_by_early_stopping_continue_the_training_in_either_order(tmp_path: Path, order: str) -> None:
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=5)
    seen: list[list[np.ndarray]] = []
    last_epoch = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(model.get_weights()))
    stopper = restoring_first_epoch()
    callbacks = [callback, stopper, last_epoch] if order == "after" else [stopper, callback, last_epoch]
    model.fit(X, Y, batch_size=32, epochs=10, verbose=0, callbacks=callbacks)
    assert len(seen) == 2  # (stopped after the second epoch)
    restored = model.get_weights()
    assert all(np.array_equal(r, w) for r, w in zip(restored, seen[0]))  # the first epoch's weights ...
    assert not all(np.array_equal(r, w) for r, w in zip(restored, seen[1]))  # ... not those the fit ended with
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback])
    assert continued(tmp_path / "run") == [False, True]


def test_a_best_epoch_loaded_after_the_fit_continues_the_training(tmp_path: Path) -> None:
    """A ModelCheckpoint(save_best_only=True, save_weights_only=True) loaded after the fit: the
    weights of an epoch end, not the fit's last."""
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=5)
    path = str(tmp_path / "best.weights.h5")
    checkpoint = keras.callbacks.ModelCheckpoint(path, monitor="loss", mode="max", save_best_only=True,
                                                 save_weights_only=True)
    model.fit(X, Y, batch_size=32, epochs=3, verbose=0, callbacks=[callback, checkpoint])
    last = model.get_weights()
    model.load_weights(path)  # (the first epoch's: the 'best' under mode='max')
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), last))
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback])
    assert continued(tmp_path / "run") == [False, True]


def test_the_initial_weights_set_again_are_still_a_new_training(tmp_path: Path) -> None:
    """Weights no epoch of the last fit ended with (the model's initial ones, set back) start a new
    training, as other weights did before."""
    model = model_of()
    initial = model.get_weights()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=5)
    model.fit(X, Y, batch_size=32, epochs=3, verbose=0, callbacks=[callback])
    model.set_weights(initial)
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback])
    assert continued(tmp_path / "run") == [False, False]


def test_an_earlier_fits_epoch_weights_do_not_continue_a_later_fit(tmp_path: Path) -> None:
    """Only the last fit's epoch ends count: the weights of the first fit's first epoch, set again
    after a second fit, start a new training."""
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=5)
    seen: list[list[np.ndarray]] = []
    keep = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(model.get_weights()))
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback, keep])
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback])
    model.set_weights(seen[0])
    model.fit(X, Y, batch_size=32, epochs=2, verbose=0, callbacks=[callback])
    assert continued(tmp_path / "run") == [False, True, False]


def test_the_trials_healthy_refit_after_a_restore_is_not_stopped(tmp_path: Path) -> None:
    """The trial's repro (t4_refit.py after): a converged two-head model, EarlyStopping restoring
    the best epoch listed after tripwire, fitted again for 10 epochs: continued, no finding."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(512, 4)).astype("float32")
    b = rng.normal(size=(512, 3)).astype("float32")
    yc = (a[:, :3] + b).argmax(1).astype("int64")
    yr = (a.sum(1, keepdims=True) - b[:, :1]).astype("float32")
    keras.utils.set_random_seed(0)
    ia, ib = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(8, activation="relu", name="h")(keras.layers.Concatenate(name="cat")([ia, ib]))
    model = keras.Model([ia, ib], {"cls": keras.layers.Dense(3, activation="softmax", name="cls")(h),
                                   "reg": keras.layers.Dense(1, name="reg")(h)})
    model.compile(keras.optimizers.Adam(3e-2), loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                  loss_weights={"cls": 1.0, "reg": 0.5})
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"])
    kw = {"batch_size": 32, "validation_split": 0.25, "verbose": 0}
    x, y = {"a": a, "b": b}, {"cls": yc, "reg": yr}
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    first = model.fit(x, y, epochs=40, callbacks=[callback, stopper], **kw)
    assert stopper.stopped_epoch > 0 and len(first.history["loss"]) < 40  # (it did stop early and restore)
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    model.fit(x, y, epochs=10, callbacks=[callback, stopper], **kw)
    assert continued(tmp_path / "run") == [False, True]
    assert [f.rule for f in callback.findings] == []
