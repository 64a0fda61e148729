"""Trial 29a follow-up (the Keras twin of 29a F3): ``TripwireCallback.findings`` said "Every finding
of this run so far", but a callback that resumes a training (``load_state_dict`` of a checkpoint's
state, into the same ``out_dir``) starts with none: the run holds every finding
(``tripwire.open_run(out_dir).findings``). The docstring now says what the property holds.

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
X = (RNG.normal(size=(48, 6)) * 1000 + 5000).astype("float32")  # (input_not_normalized fires at step 0)
Y = (X[:, 0] > 5000).astype("int64")


def mlp() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_a_resumed_callbacks_findings_start_empty_and_the_docstring_says_so(tmp_path: Path) -> None:
    model = mlp()
    first = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    model.fit(X, Y, batch_size=16, epochs=2, callbacks=[first], verbose=0)
    assert [(f.rule, f.step) for f in first.findings] == [("input_not_normalized", 0)]
    resumed = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    resumed.load_state_dict(first.state_dict())
    assert resumed.findings == []
    model.fit(X, Y, batch_size=16, epochs=4, initial_epoch=2, callbacks=[resumed], verbose=0)
    assert resumed.findings == []  # (the rule fired before the checkpoint: its state says so)
    assert [(f.rule, f.step) for f in tripwire.open_run(tmp_path).findings] == [("input_not_normalized", 0)]
    doc = TripwireCallback.findings.__doc__ or ""
    assert "resume" in doc and "starts with none" in doc and "open_run(out_dir).findings" in doc
    assert "of this run so far" not in doc
