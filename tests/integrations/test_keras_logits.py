"""TripwireCallback for Keras 3: a cross-entropy loss whose ``from_logits`` does not fit the model's
output layer is said in a WARNING when the fit begins.

Trial 18g: ``Dense(4)`` logits into ``SparseCategoricalCrossentropy()`` (``from_logits=False``,
Keras's default) trained to a validation accuracy of 0.005 against chance 0.25, and no rule fired:
the loss clips the logits to ``[1e-7, 1 - 1e-7]``, so it learns little or the opposite of the task.
The check reads the compiled loss and the output layer only: nothing runs on a step.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import logging  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

from tripwire.integrations.keras import TripwireCallback  # noqa: E402
from tripwire.integrations.keras._callback import _logits_mismatch, _output_layer  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

X = np.random.default_rng(0).normal(size=(32, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")
LOGITS = "reads the model's outputs as probabilities"
TWICE = "applies softmax"


def sequential(activation: str | None, units: int = 2) -> Any:
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"),
                             keras.layers.Dense(units, activation=activation, name="out")])


def functional_softmax_layer() -> Any:
    inp = keras.Input((6,))
    logits = keras.layers.Dense(2, name="logits")(keras.layers.Dense(8, activation="relu")(inp))
    return keras.Model(inp, keras.layers.Softmax(name="probs")(logits))


@pytest.mark.parametrize("loss", [
    "sparse_categorical_crossentropy",
    "SparseCategoricalCrossentropy",
    keras.losses.sparse_categorical_crossentropy,
    keras.losses.SparseCategoricalCrossentropy(),
])
def test_logits_read_as_probabilities_are_named(loss: Any) -> None:
    message = _logits_mismatch(loss, _output_layer(sequential(None)))
    assert message is not None and LOGITS in message
    assert "'out' has no activation" in message
    assert "keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in message
    assert "activation='softmax'" in message


def test_probabilities_read_as_logits_are_named() -> None:
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    message = _logits_mismatch(loss, _output_layer(sequential("softmax")))
    assert message is not None and TWICE in message and "from_logits=True" in message
    # a functional model whose output is a Softmax layer: the layer that makes the output
    message = _logits_mismatch(loss, _output_layer(functional_softmax_layer()))
    assert message is not None and "'probs' applies softmax" in message


def test_binary_crossentropy_expects_a_sigmoid() -> None:
    message = _logits_mismatch("binary_crossentropy", _output_layer(sequential(None, units=1)))
    assert message is not None and "activation='sigmoid'" in message
    assert "keras.losses.BinaryCrossentropy(from_logits=True)" in message
    twice = _logits_mismatch(keras.losses.BinaryCrossentropy(from_logits=True), _output_layer(sequential("sigmoid", 1)))
    assert twice is not None and "applies sigmoid" in twice


@pytest.mark.parametrize(("loss", "activation"), [
    ("sparse_categorical_crossentropy", "softmax"),                          # probabilities as probabilities
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), None),    # logits as logits
    (keras.losses.BinaryCrossentropy(from_logits=True), None),
    ("binary_crossentropy", "sigmoid"),
    ("mse", None),                                                           # not a cross-entropy
    ("sparse_categorical_crossentropy", "relu"),                             # an activation it cannot judge
    (lambda y, p: keras.ops.mean((y - p) ** 2), None),                       # a user's function
])
def test_a_fitting_or_unknown_pair_says_nothing(loss: Any, activation: str | None) -> None:
    assert _logits_mismatch(loss, _output_layer(sequential(activation))) is None


def test_several_outputs_or_a_subclassed_model_are_not_judged() -> None:
    inp = keras.Input((6,))
    two = keras.Model(inp, [keras.layers.Dense(2, name="a")(inp), keras.layers.Dense(2, name="b")(inp)])
    assert _output_layer(two) is None

    class Sub(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.d = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.d(x)

    assert _output_layer(Sub()) is None


@pytest.mark.parametrize(("loss", "activation", "said"), [
    ("sparse_categorical_crossentropy", None, LOGITS),
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), "softmax", TWICE),
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), None, None),
])
def test_a_real_fit_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture, loss: Any, activation: str | None,
                               said: str | None) -> None:
    keras.utils.set_random_seed(0)
    model = sequential(activation)
    model.compile(keras.optimizers.SGD(0.01), loss)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])  # a second fit: said once
    told = [r.getMessage() for r in caplog.records if "from_logits" in r.getMessage()]
    if said is None:
        assert told == []
    else:
        assert len(told) == 1 and said in told[0], told
