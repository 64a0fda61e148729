"""Trial 33e F1: ``weight_update_ratio`` fired at step 0 (a learning rate 100x too high) with "the
learning rate is far too high (its weights have not shrunk toward 0: norm 2.867, 2.867 at step 0)":
two unlabelled, equal numbers (at step 0 the first save and the current one are the same). The
message labels each number with its step, and says one number where the two are the same save; the
condition is unchanged (tiny real Keras fits at a learning rate far too high)."""
from __future__ import annotations

import os
import re

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tripwire.integrations.keras import TripwireCallback

NUMBER = r"[0-9.e+-]+"


def _diverging_fit(tmp_path, **rule: object) -> list[tuple[int, str]]:
    """A linear regression at a learning rate far too high (0.5): update ratios of 2 to 5 at every
    step."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).random((64, 8), dtype=np.float32)
    y = x.sum(1, keepdims=True)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(learning_rate=0.5), "mse")
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), include_collections=["weights"], save_interval=1,
                          rules=[{"weight_update_ratio": {"actions": ["record"], **rule}}])
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[cb])
    return [(f.step, f.message) for f in cb.findings if f.rule == "weight_update_ratio"]


def test_at_the_first_save_one_number_is_said(tmp_path):
    found = _diverging_fit(tmp_path)
    assert [s for s, _ in found] == [0], found
    message = found[0][1]
    assert re.search(rf"the learning rate is far too high \(its weights have not shrunk toward 0: norm {NUMBER} at "
                     rf"step 0, their first save\)\. Lower it", message), message
    assert not re.search(rf"norm {NUMBER}, {NUMBER} at step", message), message


def test_at_a_later_save_each_number_names_its_step(tmp_path):
    found = _diverging_fit(tmp_path, start_step=2)
    assert [s for s, _ in found] == [2], found
    message = found[0][1]
    match = re.search(rf"its weights have not shrunk toward 0: norm ({NUMBER}) at step 2, ({NUMBER}) at their first "
                      rf"save, step 0\)\. Lower it", message)
    assert match, message
