"""Trial 37c: with a reduction backend of the user's own (docs/architecture.md: ``name``, ``reduce``,
``histogram``, ``to_numpy``) and a tensor type with a ``shape`` and a ``dtype`` but no ``size`` (as a
``tf.Tensor`` has), ``raw`` of a tensor of three elements was stored as one number, their sum: the
session took it for one element. The number of elements now comes from the shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire


class Tensor:
    def __init__(self, a: object) -> None:
        self._a = np.asarray(a, dtype=np.float32)

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)


class MyBackend:
    name = "mine"

    def reduce(self, tensors, reductions):  # type: ignore[no-untyped-def]
        return tripwire.NumpyBackend().reduce([t._a for t in tensors], reductions)

    def histogram(self, tensor, bins, value_range):  # type: ignore[no-untyped-def]
        return tripwire.NumpyBackend().histogram(tensor._a, bins, value_range)

    def to_numpy(self, tensor):  # type: ignore[no-untyped-def]
        return tensor._a.copy()


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0], [[1.0, 2.0], [3.0, 4.0]], [5.0], 7.0])
def test_raw_of_a_users_tensor_type_is_the_whole_tensor(tmp_path: Path, value: object) -> None:
    session = tripwire.Session({"collections": {"mine": {"include": ["^w$"], "reductions": ["raw", "l2"]}}},
                               out_dir=tmp_path / "run", backend=MyBackend(), save_interval=1)
    session.step("train", 0, {"w": (Tensor(value), "weights")})
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    want = np.asarray(value, dtype=np.float32)
    got = run.tensor("w").value(0)
    if want.size == 1:  # (a one-element tensor's raw is a scalar, docs/config.md)
        assert float(got) == float(want.reshape(()))
    else:
        np.testing.assert_array_equal(got, want)
    assert run.tensor("w").value("l2", 0) == pytest.approx(float(np.linalg.norm(want)))
