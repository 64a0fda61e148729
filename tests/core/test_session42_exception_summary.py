"""Session-41 list (trial 41k): a Keras layer that raised in a fit ended the run ``failed`` with the
reason ``ValueError: Exception encountered when calling Bad.call(). ...``: Keras's wrapper line
only, the layer's own message (the next line, in a terminal's bold) lost. The reason now carries
both."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._session import exception_summary

KERAS_TEXT = ("Exception encountered when calling Bad.call().\n\n\x1b[1mthe real message: shape mismatch\x1b[0m\n\n"
              "Arguments received by Bad.call():\n  • x=torch.Tensor(shape=torch.Size([8, 8]), dtype=float32)")


def test_keras_wrapper_line_is_followed_by_the_layers_message() -> None:
    assert exception_summary(ValueError(KERAS_TEXT)) == (
        "ValueError: Exception encountered when calling Bad.call(): the real message: shape mismatch ...")


def test_a_keras_wrapped_key_error_and_an_empty_message() -> None:
    """Trial 42g: a layer's KeyError (its str a repr, one line with the escapes as text) and an empty
    message (the next line is Keras's argument dump, no message of the layer's)."""
    text = KERAS_TEXT.replace("the real message: shape mismatch", "missing_key")
    assert exception_summary(KeyError(text)) == (
        "KeyError: Exception encountered when calling Bad.call(): missing_key ...")
    assert exception_summary(KeyError("missing_key")) == "KeyError: 'missing_key'"
    empty = "Exception encountered when calling Bad.call().\n\nArguments received by Bad.call():\n  • x=..."
    assert exception_summary(ValueError(empty)) == "ValueError: Exception encountered when calling Bad.call(). ..."


def test_other_messages_keep_their_first_line() -> None:
    assert exception_summary(ValueError("\x1b[1mbold\x1b[0m first\nsecond")) == "ValueError: bold first ..."
    assert exception_summary(ValueError("Exception encountered when calling Bad.call().")) == (
        "ValueError: Exception encountered when calling Bad.call().")
    assert exception_summary(IndexError("Target 10 is out of bounds.")) == "IndexError: Target 10 is out of bounds."


def test_a_keras_layer_error_in_a_fit_names_the_layers_message(tmp_path: Path) -> None:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    from tripwire.integrations.keras import TripwireCallback

    class Bad(keras.layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def call(self, x):  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls == 7:
                raise ValueError("the real message: shape mismatch in Bad")
            return x

    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), Bad(), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["activations", "losses"])
    with pytest.raises(ValueError, match="the real message"):
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed"
    assert run.stop_reasons[0].startswith("ValueError: Exception encountered when calling ")
    assert "the real message: shape mismatch in Bad" in run.stop_reasons[0]
