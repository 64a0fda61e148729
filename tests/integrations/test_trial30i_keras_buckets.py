"""Trial 30i F4: a packed matrix of small tensors is gathered with int32 indices (jax without x64 has no
int64: an int64 request was truncated with a UserWarning); a bucket never holds more elements, padded,
than int32 indexes exactly. (The jax side, no warning in a real fit: test_trial30i_keras_jax.py.)"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")


def test_buckets_split_where_the_padded_matrix_would_pass_the_int32_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from tripwire.integrations.keras import _backend

    sizes = [100] * 50
    assert _backend._buckets(list(range(50)), sizes) == [list(range(50))]  # (one bucket: 5000 elements)
    monkeypatch.setattr(_backend, "_MAX_PACKED", 1000)  # (the int32 limit, scaled down)
    buckets = _backend._buckets(list(range(50)), sizes)
    assert [len(b) for b in buckets] == [10] * 5 and sum(buckets, []) == list(range(50))
    assert all(len(b) * max(sizes[i] for i in b) <= 1000 for b in buckets)


def test_packed_gather_indices_are_int32_and_reductions_match_numpy() -> None:
    import keras

    from tripwire import NumpyBackend
    from tripwire.integrations.keras import KerasBackend

    from tripwire.integrations.keras import _backend

    assert _backend._MAX_PACKED + 1 <= np.iinfo(np.int32).max  # (the pad index, one past the elements, fits)
    backend = KerasBackend()
    backend._fast = False  # (the keras.ops path, the one jax takes)
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(n,)).astype("float32") for n in (300, 290, 280, 7)]
    got = backend.reduce([keras.ops.convert_to_tensor(a) for a in arrays], ["mean", "l2", "max"])
    np.testing.assert_allclose(got, NumpyBackend().reduce(arrays, ["mean", "l2", "max"]), rtol=1e-6)
    [(gather, _mask, _zero)] = list(backend._layouts.values())
    assert keras.backend.standardize_dtype(gather.dtype) == "int32"
