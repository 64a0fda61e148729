"""Contract: MXNetBackend matches the numpy reference on every reduction and on histograms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tripwire import BASIC_REDUCTIONS, NumpyBackend, ReductionBackend, Session
from tripwire.integrations.mxnet import MXNetBackend

from mxnet_testlib import mx, nd

REDUCTIONS = list(BASIC_REDUCTIONS) + [
    "fraction_gt:0.1", "fraction_lt:-0.3", "fraction_abs_gt:0.5", "fraction_gt:0", "fraction_abs_gt:1e-3",
    "fraction_lt:0.5", "fraction_gt:-0.2", "fraction_abs_gt:-1",  # thresholds that the zero padding satisfies
]
BACKEND = MXNetBackend()
REFERENCE = NumpyBackend()


def _close(got: np.ndarray, want: np.ndarray) -> list[tuple[str, float, float]]:
    return [
        (r, g, w) for r, g, w in zip(REDUCTIONS, got, want)
        if not np.allclose(g, w, rtol=1e-9, atol=1e-9 * max(1.0, abs(w) if np.isfinite(w) else 1.0), equal_nan=True)
    ]


def test_variance_of_a_large_mean_with_a_small_spread_is_numpys() -> None:
    """The one-pass float64 variance lost ~3.5e-9 relative on values near 1e4 with a spread of 2.5
    (a hypothesis example): such tensors get two passes, as numpy computes them."""
    for arr in (np.array([9974.0] + [9950.0] * 89, np.float32), np.full(90, 9950.0, np.float32),
                (np.arange(1000, dtype=np.float64) * 1e-6 + 1e6)):
        got = BACKEND.reduce([nd.array(arr, dtype=arr.dtype)], ["variance", "std", "abs_variance", "mean"])[0]
        want = REFERENCE.reduce([arr], ["variance", "std", "abs_variance", "mean"])[0]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def _cases() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [
        rng.normal(size=(7, 5)).astype(np.float32),
        np.array([0.1, 0.2, np.nan, np.inf, -1.0, 0.0, -np.inf], np.float32),
        np.array([0.1] * 5 + [-0.3] * 3, np.float32),  # values exactly at float32-rounded thresholds
        rng.integers(-3, 4, size=20).astype(np.int32),
        rng.normal(size=100).astype(np.float16),
        rng.normal(5.0, 1.0, 1000),  # float64, mean far from zero (two-pass variance)
        np.zeros((3, 4), np.float32),
        np.array([2.5], np.float32),
        (rng.normal(size=(4, 3, 8, 8)) * 1e4).astype(np.float32),
    ]


def test_is_a_reduction_backend() -> None:
    assert isinstance(BACKEND, ReductionBackend)
    assert BACKEND.name == "mxnet"


@pytest.mark.parametrize("case", range(len(_cases())))
def test_every_reduction_matches_numpy(case: int) -> None:
    arr = _cases()[case]
    got = BACKEND.reduce([nd.array(arr, dtype=arr.dtype)], REDUCTIONS)[0]
    want = REFERENCE.reduce([arr], REDUCTIONS)[0]
    assert _close(got, want) == []


def test_reduce_batches_many_tensors_and_contexts() -> None:
    cases = _cases()
    tensors = [nd.array(a, dtype=a.dtype, ctx=mx.cpu(i % 2)) for i, a in enumerate(cases)]
    got = BACKEND.reduce(tensors, REDUCTIONS)
    want = REFERENCE.reduce(cases, REDUCTIONS)
    assert got.shape == (len(cases), len(REDUCTIONS)) and got.dtype == np.float64
    for g, w in zip(got, want):
        assert _close(g, w) == []


def test_reduce_groups_packs_every_group_and_shares_tensors() -> None:
    """Several groups in one call (one host copy): a tensor in two groups, mixed dtypes and
    contexts, sizes on both sides of the 256-element rows, an empty tensor."""
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=n).astype(np.float32) for n in (1, 255, 256, 257, 600)] + [
        rng.normal(size=(3, 100)), rng.integers(-2, 3, 300).astype(np.int32), np.zeros(0, np.float32)]
    tensors = [nd.array(a, dtype=a.dtype, ctx=mx.cpu(i % 2)) for i, a in enumerate(arrays)]
    groups = [(tensors[:5], REDUCTIONS), (tensors[3:], ["l2", "min", "zero_fraction", "fraction_lt:0.5"]), ([tensors[0]], ["max"])]
    got = BACKEND.reduce_groups(groups)
    for (ts, reds), g in zip(groups, got):
        want = REFERENCE.reduce([arrays[next(i for i, t in enumerate(tensors) if t is x)] for x in ts], reds)
        assert g.shape == want.shape
        assert np.allclose(g, want, rtol=1e-9, atol=1e-9, equal_nan=True), (reds, g, want)


@pytest.mark.parametrize("case", range(len(_cases())))
@pytest.mark.parametrize("value_range", [None, (-1.0, 1.3), (0.1, 0.2)])
@pytest.mark.parametrize("bins", [1, 7, 30])
def test_histogram_matches_numpy(case: int, value_range: tuple[float, float] | None, bins: int) -> None:
    arr = _cases()[case]
    counts, edges = BACKEND.histogram(nd.array(arr, dtype=arr.dtype), bins, value_range)
    want_counts, want_edges = REFERENCE.histogram(arr, bins, value_range)
    assert counts.dtype == np.int64 and edges.dtype == np.float64
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)


@settings(max_examples=40, deadline=None)
@given(
    arr=arrays(np.float32, st.integers(1, 300),
               elements=st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False)),
    bins=st.integers(1, 50),
)
def test_property_random_float32(arr: np.ndarray, bins: int) -> None:
    x = nd.array(arr, dtype=np.float32)
    assert _close(BACKEND.reduce([x], REDUCTIONS)[0], REFERENCE.reduce([arr], REDUCTIONS)[0]) == []
    counts, edges = BACKEND.histogram(x, bins, None)
    want_counts, want_edges = REFERENCE.histogram(arr, bins, None)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)


def test_host_copy_and_numel() -> None:
    x = nd.arange(12).reshape((3, 4))
    np.testing.assert_array_equal(BACKEND.to_numpy(x), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert BACKEND.numel(x) == 12
    assert BACKEND.to_numpy(mx.np.ones((2, 2))).shape == (2, 2)  # numpy-interface arrays too


def test_rejects_non_mxnet_tensors() -> None:
    with pytest.raises(TypeError, match="expected an mxnet NDArray, got ndarray"):
        BACKEND.reduce([np.ones(3)], ["mean"])


def test_session_records_the_same_values_with_either_backend(tmp_path) -> None:
    rng = np.random.default_rng(1)
    arrays_ = {f"t{i}": rng.normal(size=(5, 6)).astype(np.float32) for i in range(3)}
    cfg = {"collections": {"weights": {"reductions": REDUCTIONS + ["histogram"]}}, "save": {"interval": 1}}
    values = []
    for name, convert in (("np", lambda a: a), ("mx", lambda a: nd.array(a))):
        session = Session(cfg, backend=BACKEND, out_dir=str(tmp_path / name))
        session.step("train", 0, {k: (convert(a), "weights") for k, a in arrays_.items()})
        values.append({(k, r): session.history.value(k, r, 0) for k in arrays_ for r in REDUCTIONS})
        values.append({k: session.history.histogram(k, 0)[0].tolist() for k in arrays_})
        session.close()
    assert values[0].keys() == values[2].keys()
    for key in values[0]:
        assert np.isclose(values[0][key], values[2][key], rtol=1e-9, equal_nan=True), key
    assert values[1] == values[3]
