"""Trial 42b F1: a mixed-precision model built as Keras's guide says, a softmax (or sigmoid)
``Dense`` followed by ``Activation("linear", dtype="float32")``, compiled with the default
``from_logits=False``, got a ``loss_output_mismatch`` finding ("the model's output layer 'cast32'
has no activation: its outputs are logits") whose advice would apply softmax twice. A linear
``Activation`` is the identity: the check looks behind it, as behind a ``Dropout``; logits behind it
are still named."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402


def _fit(tmp_path: Path, last: str | None, loss: str, units: int, functional: bool) -> list[tripwire.Finding]:
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    layers = [keras.layers.Dense(8, activation="relu"), keras.layers.Dense(units, activation=last, name="head"),
              keras.layers.Activation("linear", dtype="float32", name="cast32")]
    if functional:
        inp = keras.Input((6,))
        out = inp
        for layer in layers:
            out = layer(out)
        model = keras.Model(inp, out)
    else:
        model = keras.Sequential([keras.Input((6,)), *layers])
    model.compile(optimizer="adam", loss=loss)
    cb = TripwireCallback(out_dir=tmp_path / f"run-{last}-{functional}")
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[cb])
    return [f for f in cb.findings if f.rule == "loss_output_mismatch"]


@pytest.mark.parametrize("functional", [False, True])
@pytest.mark.parametrize(("last", "loss", "units"), [("softmax", "sparse_categorical_crossentropy", 2),
                                                     ("sigmoid", "binary_crossentropy", 1)])
def test_a_float32_cast_after_probabilities_is_no_mismatch(tmp_path: Path, last: str, loss: str, units: int,
                                                           functional: bool) -> None:
    assert _fit(tmp_path, last, loss, units, functional) == []


def test_logits_behind_a_float32_cast_are_still_named(tmp_path: Path) -> None:
    found = _fit(tmp_path, None, "sparse_categorical_crossentropy", 2, functional=False)
    assert len(found) == 1 and "the layer 'head' that makes the model's output (through 'cast32': the identity at " \
        "inference) has no activation" in found[0].message, [f.message for f in found]
