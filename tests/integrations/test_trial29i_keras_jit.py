"""Trial 29i F2 (a Keras 3 power user, torch backend): ``jit_compile=True`` + ``Dropout`` + the
activations collection (``save_interval=1``, ``validation_split``): the same seeded fit ended with
other weights when the callback was there (max |diff| 0.025 after two epochs; loss 1.1779 vs 1.2298).

The layer wrappers were new functions at every save step and offered what they saw to the step's
plan inside the step (set and dict mutations TorchDynamo cannot keep in one graph): every wrapped
layer after the first broke the graph, Keras's shared layer code was recompiled per layer type, mode
and save step, and at TorchDynamo's ``recompile_limit`` (8) those frames ran eagerly from then on; a
``Dropout`` run eagerly draws its mask from torch's generator, not from the compiled graph's seeds.
Now a save step installs the same wrapper objects each time, and they only append what they are handed
to a list, offered at the step's end: one more compiled graph per mode, and the training is the
same with and without the callback.

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
X = RNG.normal(size=(128, 8)).astype("float32")
Y = (X @ RNG.normal(size=(8, 3))).argmax(1).astype("int64")


def model_with_dropout() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="h"),
                              keras.layers.Dropout(0.5, name="drop"), keras.layers.Dense(3, name="out")])
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    return model


def test_capturing_activations_in_a_compiled_step_with_dropout_leaves_the_training_as_it_is(tmp_path: Path) -> None:
    # the trial's reproducer (t32_jit_dropout.py)
    fit: dict[str, Any] = dict(batch_size=32, epochs=2, shuffle=True, verbose=0, validation_split=0.25)
    alone = model_with_dropout()
    without = alone.fit(X, Y, **fit)
    model = model_with_dropout()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["losses", "activations"])
    with_cb = model.fit(X, Y, callbacks=[cb], **fit)
    for a, b in zip(alone.weights, model.weights):
        np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()), err_msg=a.path)
    assert with_cb.history == without.history
    # and the activations are those of the step: every train and eval step captured, Dropout's output
    # zero where its input is in training and its input itself in validation
    run = tripwire.open_run(tmp_path)
    for name in ("h/output", "drop/output", "out/output"):
        assert run.tensor(name).steps(mode="train") == list(range(6)), name
        assert run.tensor(name).steps(mode="eval") == [0, 2], name
    for step in range(6):
        kept = run.value("drop/output", "zero_fraction", step, mode="train")
        assert kept > run.value("h/output", "zero_fraction", step, mode="train") + 0.2, step
    for step in (0, 2):
        assert run.value("drop/output", "mean", step, mode="eval") == run.value("h/output", "mean", step, mode="eval")
