"""Trial 25h's Keras findings on a later fit through the same TripwireCallback: freezing (or
unfreezing) a layer between two fits, the fine-tuning step, made the fit "a new model" (the
fingerprint covered the trainable weights only), and other weights with the same per-tensor norms
(every sign flipped, two layers of one shape swapped) were taken for the same model (the fingerprint
was the norms alone). The fingerprint now covers all ``model.weights`` with each one's L2 norm and
sum.

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
from tripwire.rules._common import BuiltinRule  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(256, 8)).astype("float32")
Y = (X @ RNG.normal(size=8) > 0).astype("float32")
RULES = ["default", "loss_diverging"]


def model_of(seed: int = 0) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(8, activation="relu", name="d2"),
                              keras.layers.Dense(1, activation="sigmoid", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    return model


def continued(out: Path) -> list[bool]:
    return [t["continued"] for t in tripwire.open_run(out).trainings[0]]


def fit(model: Any, callback: TripwireCallback, epochs: int = 2) -> None:
    model.fit(X, Y, batch_size=32, epochs=epochs, callbacks=[callback], verbose=0)


def test_freezing_then_unfreezing_a_layer_between_fits_continues_the_training(tmp_path: Path) -> None:
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=RULES, save_interval=5)
    fit(model, callback)
    model.get_layer("d1").trainable = False  # the fine-tuning step: the same object, the same weights
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    fit(model, callback)
    model.get_layer("d1").trainable = True  # unfrozen again
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    fit(model, callback)
    rules = [r for r in callback.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from == {} for r in rules)  # (the rules kept their view of fit 1)
    assert continued(tmp_path / "run") == [False, True, True]


def test_a_frozen_converged_model_trained_on_is_not_stopped(tmp_path: Path) -> None:
    """The trial's repro: loss_not_decreasing judged the fine-tune alone and fired."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    x = np.random.default_rng(0).normal(size=(512, 8)).astype("float32")
    y = (x @ np.random.default_rng(1).normal(size=8) > 0).astype("float32")
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=RULES, save_interval=5)
    kw = {"batch_size": 32, "verbose": 0, "validation_data": (x[:128], y[:128]), "callbacks": [callback]}
    model.fit(x, y, epochs=25, **kw)
    model.layers[0].trainable = False
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
    model.fit(x, y, epochs=10, **kw)
    assert continued(tmp_path / "run") == [False, True]
    assert [f.rule for f in callback.findings] == []


@pytest.mark.parametrize("change", ["negate", "swap"])
def test_other_weights_with_the_same_norms_are_a_new_training(tmp_path: Path, change: str) -> None:
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=RULES, save_interval=5)
    fit(model, callback)
    weights = model.get_weights()
    if change == "negate":  # every weight's sign flipped: the same norms
        model.set_weights([-w for w in weights])
    else:  # the two hidden layers' kernels swapped (8x8 each): the same norms, in other places
        d1, d2 = model.get_layer("d1"), model.get_layer("d2")
        k1, k2 = d1.kernel.numpy().copy(), d2.kernel.numpy().copy()
        d1.kernel.assign(k2)
        d2.kernel.assign(k1)
    fit(model, callback)
    rules = [r for r in callback.session.rules if isinstance(r, BuiltinRule)]
    assert rules and all(r.armed_from["train"] == r.fit_from["train"] == 16 for r in rules)
    assert continued(tmp_path / "run") == [False, False]


@pytest.mark.parametrize("how", ["load", "set"])
def test_the_same_weights_loaded_or_set_again_continue_the_training(tmp_path: Path, how: str) -> None:
    model = model_of()
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=RULES, save_interval=5)
    fit(model, callback)
    if how == "load":
        model.save_weights(str(tmp_path / "w.weights.h5"))
        model.load_weights(str(tmp_path / "w.weights.h5"))
    else:
        model.set_weights(model.get_weights())
    fit(model, callback)
    assert continued(tmp_path / "run") == [False, True]
