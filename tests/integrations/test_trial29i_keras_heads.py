"""Trial 29i F4 and F3 (a Keras 3 power user, torch backend), documentation findings.

F4: a multi-output model's per-output losses (``cls_loss``, ``reg_loss``) are Keras's running means over
the epoch, stored as metrics at save steps; docs/rules.md suggests ``loss: "loss|.*_loss"``, which
would judge these series that jump at every epoch's first step. docs/keras.md now says what they are
and that the loss rules should read ``loss`` on Keras; the behaviour it describes is checked here.

F3: with ``jit_compile=True``, a save step that captures inputs, labels or predictions compiles a
graph with those tensors as outputs, and a loss computed there can differ in its last float32 bits
(Keras's own ``val_loss``): docs/keras.md ("Backends") says so.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import re  # noqa: E402
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

DOC = Path(__file__).resolve().parents[2] / "docs" / "keras.md"
RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 6)).astype("float32")
Y_CLS = (X[:, 0] > 0).astype("int64")
Y_REG = (X[:, 1:2] * 3).astype("float32")


def two_heads() -> Any:
    keras.utils.set_random_seed(0)
    inp = keras.Input((6,))
    h = keras.layers.Dense(8, activation="relu", name="h")(inp)
    model = keras.Model(inp, {"cls": keras.layers.Dense(2, name="cls")(h), "reg": keras.layers.Dense(1, name="reg")(h)})
    model.compile(keras.optimizers.SGD(0.05),
                  loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "reg": "mse"},
                  loss_weights={"cls": 1.0, "reg": 0.3})
    return model


def text(path: Path) -> str:
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


def test_a_heads_loss_is_stored_as_the_running_mean_metric_the_docs_describe(tmp_path: Path) -> None:
    model = two_heads()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1)
    history = model.fit(X, {"cls": Y_CLS, "reg": Y_REG}, batch_size=16, epochs=2, shuffle=False, verbose=0,
                        callbacks=[cb])
    run = tripwire.open_run(tmp_path)
    assert "reg_loss" in run.collections()["metrics"] and "reg_loss" not in run.collections()["losses"]
    steps, reg = run.series("reg_loss")
    assert steps.tolist() == list(range(8))
    # each epoch's last value is Keras's epoch log (the running mean over the epoch), the next epoch's
    # first the batch's own: a jump at the epoch boundary, which the docs tell the loss rules to avoid
    assert reg[3] == pytest.approx(history.history["reg_loss"][0], rel=1e-6)
    assert reg[7] == pytest.approx(history.history["reg_loss"][1], rel=1e-6)
    doc = text(DOC)
    assert "`<output>_loss` (`cls_loss`, `reg_loss`" in doc and "running mean over the epoch" in doc
    assert 'Point the loss rules at `loss` on Keras' in doc and '`loss: "loss|.*_loss"` also judges' in doc


def test_the_docs_say_what_capture_under_jit_compile_changes() -> None:
    doc = text(DOC)
    backends = doc[doc.index("## Backends"):doc.index("## Tuning")]
    assert "the same seeded fit ends with the same weights with and without the callback" in backends
    assert "in the last float32 bits" in backends and "`val_loss`" in backends
    checkpoints = doc[doc.index("## Checkpoints"):doc.index("## Overhead")]
    assert "The rules start afresh there" not in checkpoints
    assert "Its rules judge the whole training" in checkpoints
