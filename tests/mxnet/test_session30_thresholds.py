"""MXNetBackend counts values equal to a comparison's threshold as numpy does (session 30: MXNet's
scalar operators parse their scalar from text, one unit in the last place off for some float32
values, so ``fraction_gt:T`` counted a value equal to T as above it)."""

from __future__ import annotations

import numpy as np

from tripwire import NumpyBackend
from tripwire.integrations.mxnet import MXNetBackend

from mxnet_testlib import nd


def test_values_equal_to_the_threshold_are_counted_as_numpy_counts_them() -> None:
    rng = np.random.default_rng(0)
    backend, reference = MXNetBackend(), NumpyBackend()
    wrong = []
    for _ in range(200):
        v = np.float32(rng.standard_normal() * 10.0 ** rng.integers(-5, 5))
        arr = np.array([v, v, -v, np.float32(0.0)], dtype=np.float32)
        reductions = [f"fraction_gt:{float(v)!r}", f"fraction_lt:{float(v)!r}", f"fraction_abs_gt:{float(abs(v))!r}"]
        got = backend.reduce([nd.array(arr, dtype="float32")], reductions)[0]
        want = reference.reduce([arr], reductions)[0]
        if not np.array_equal(got, want):
            wrong.append((float(v), got.tolist(), want.tolist()))
    assert not wrong, wrong[:5]
