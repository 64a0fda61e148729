"""Trial 30f F4 (Keras, a notebook's interrupt button): a KeyboardInterrupt raised inside a train
step (a layer's forward pass), then the fit cell run again with the same callback. The next fit's
steps follow the interrupted one's (after the step it began, where the session counted it), the
run's ``trainings`` say where its records begin, and no WARNING speaks of ``begin_step`` or gradient
accumulation (a hand-loop message: the steps started at the interrupted step's number again).

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

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(128, 6)).astype("float32")  # 8 batches of 16
Y = (X[:, 0] > 0).astype("int64")


class Boom(keras.layers.Layer):
    """Raises KeyboardInterrupt in its ``at``-th forward pass (counted from 1; -1: never)."""

    at, calls = -1, 0

    def call(self, t: Any) -> Any:
        Boom.calls += 1
        if Boom.calls == Boom.at:
            raise KeyboardInterrupt
        return t


@pytest.mark.parametrize("save_interval", [2, 5])  # the interrupted step 10: a save step / a quiet step
def test_a_fit_after_a_ctrl_c_inside_a_train_step_counts_on_after_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, save_interval: int) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), Boom(),
                              keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=save_interval)
    fit = dict(batch_size=16, verbose=0, shuffle=False, callbacks=[cb])
    model.fit(X, Y, epochs=1, **fit)  # train steps 0-7
    Boom.calls, Boom.at = 0, 3
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y, epochs=1, **fit)  # steps 8, 9; interrupted inside step 10
    Boom.at = -1
    with caplog.at_level(logging.INFO, logger="tripwire"):
        model.fit(X, Y, epochs=1, **fit)  # the cell run again
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
    run = tripwire.open_run(tmp_path)
    losses = run.series("loss", mode="train")[0].tolist()
    assert losses[:10] == list(range(10))
    third = losses[10:]
    assert third == list(range(11, 19))  # (after step 10, which the interrupted fit began, as docs/keras.md says)
    starts = [t["steps"].get("train") for t in run.trainings[0]]
    assert starts[1:] == [8, 11]
