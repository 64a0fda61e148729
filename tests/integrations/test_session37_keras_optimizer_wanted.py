"""Trial 36k (the Lightning twin fixed in session 36): a collection of the user's that takes one
layer's tensors, beside the default rules, counted as one that may take the optimizer's learning
rates and update ratios, so every save step readied them (a host sync of every variable). The Keras
callback now asks ``Session.optimizer_wanted`` with the names it would offer.

Keras runs on the torch backend, set before keras is imported."""

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
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.mark.parametrize("include, full", [(["^dense_a/kernel$"], False), (["^update_ratio/dense_a/kernel$"], True)])
def test_a_collection_of_one_layer_does_not_capture_the_optimizer_in_full(tmp_path: Path, include: list[str],
                                                                           full: bool) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="dense_a"),
                              keras.layers.Dense(1, name="dense_b")])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    cb = TripwireCallback(rules=["default"], out_dir=tmp_path / "run", save_interval=2,
                          collections={"mine": {"include": include, "reductions": ["l2"]}, "losses": None})
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
    model.fit(x, y, batch_size=16, epochs=1, callbacks=[cb], verbose=0)
    assert cb._full_optimizer() is full
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert ("update_ratio/dense_a/kernel" in names) is full
    if not full:
        assert not any(n.startswith(("update_ratio/", "lr/")) for n in names), names
