"""Trial 26j finding 2 through Keras (t10_twocls.py): a functional model with two classifier heads,
``cls`` (3 balanced classes) and ``aux`` (2 classes, 93:7, the minority neglected). The
class_imbalance finding named "minority class 1" only, where both heads have a class 1; it now
names the labels and predictions tensors it judged, ``labels/aux`` and ``predictions/aux``.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")


def test_class_imbalance_on_a_two_head_model_names_the_head(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 3000
    a = rng.normal(size=(n, 4)).astype("float32")
    b = rng.normal(size=(n, 3)).astype("float32")
    yc = (a[:, :3] + b).argmax(1).astype("int64")
    yaux = (np.random.default_rng(2).uniform(size=n) < 0.07).astype("int64")  # (random: nothing to learn)
    keras.utils.set_random_seed(0)
    ia, ib = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(16, activation="relu", name="h")(keras.layers.Concatenate()([ia, ib]))
    model = keras.Model([ia, ib], {"cls": keras.layers.Dense(3, activation="softmax", name="cls")(h),
                                   "aux": keras.layers.Dense(2, activation="softmax", name="aux")(h)})
    model.compile(keras.optimizers.Adam(3e-3),
                  loss={"cls": "sparse_categorical_crossentropy", "aux": "sparse_categorical_crossentropy"},
                  loss_weights={"cls": 1.0, "aux": 0.3})
    callback = TripwireCallback(out_dir=str(tmp_path / "run"), rules=[{"name": "class_imbalance", "min_class_samples": 3}],
                                actions=["record"])
    model.fit({"a": a, "b": b}, {"cls": yc, "aux": yaux}, batch_size=32, epochs=2, validation_split=0.3, verbose=0,
              callbacks=[callback])
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert {"labels/aux", "labels/cls", "predictions/aux", "predictions/cls"} <= set(names)
    assert callback.findings and {f.rule for f in callback.findings} == {"class_imbalance"}
    found = callback.findings[0]
    assert list(found.tensors) == ["labels/aux", "predictions/aux"]
    assert found.message.startswith("the classes of labels/aux are imbalanced (")
    assert "minority class 1 (" in found.message and " in predictions/aux (limit 0.3)" in found.message
