"""Trial 30a finding F4: histograms of float32 tensors had float32-rounded edges (numpy's default
for a float32 array): bins of unequal width (up to 1.6x), a zero-width bin for values 1e4 + 1e-3*randn
(two edges both exactly 10000.0), and counts that differed from ``numpy.histogram(x, bins,
range=(lo, hi))`` with a float64 ``lo``/``hi``, which docs/lightning.md promised they match. Now the
edges are float64 (``numpy.linspace(lo, hi, bins + 1)``) and every value is binned in float64, for
every dtype. Here: the numpy backend (directly and through a Session) and the helpers the device
backends share; tests/integrations and tests/mxnet have the same cases for torch, Keras and MXNet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import NumpyBackend
from tripwire._reductions import bin_counts, bin_thresholds, histogram_edges, numpy_binnable, widened

RNG = np.random.default_rng(30)
NEAR_ONE = (1.0 + 3e-7 * RNG.standard_normal(512)).astype(np.float32)  # a LayerNorm weight early on
NEAR_1E4 = (1e4 + 1e-3 * RNG.standard_normal(1000)).astype(np.float32)  # a large mean, a tiny spread


def numpy_reference(x: np.ndarray, bins: int, value_range: tuple[float, float] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.histogram`` of the finite values in float64, over the float64 finite min..max."""
    a = np.asarray(x, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    lo, hi = value_range if value_range is not None else (a.min(), a.max())
    return np.histogram(a, bins, range=(np.float64(lo), np.float64(hi)))


def assert_even_float64_edges(edges: np.ndarray, lo: float, hi: float, bins: int) -> None:
    assert edges.dtype == np.float64 and len(edges) == bins + 1
    assert edges[0] == lo and edges[-1] == hi
    np.testing.assert_array_equal(edges, np.linspace(np.float64(lo), np.float64(hi), bins + 1))
    # equal widths (float64 rounding only): float32 edges were up to 1.6x apart, or 0
    np.testing.assert_allclose(np.diff(edges), (hi - lo) / bins, rtol=1e-6)


@pytest.mark.parametrize("x", [NEAR_ONE, NEAR_1E4], ids=["near_one", "near_1e4"])
def test_a_float32_histogram_has_float64_edges_and_numpys_float64_counts(x: np.ndarray) -> None:
    counts, edges = NumpyBackend().histogram(x, 8, None)
    want_counts, want_edges = numpy_reference(x, 8)
    assert_even_float64_edges(edges, float(x.min()), float(x.max()), 8)
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(counts, want_counts)
    assert counts.dtype == np.int64 and counts.sum() == x.size


def test_the_finding_cases_through_a_session(tmp_path: Path) -> None:
    cfg = {"collections": {"weights": {"exclude": ["^zoom$"], "reductions": ["histogram"], "histogram_bins": 8},
                           "zoom": {"include": ["^zoom$"], "reductions": ["histogram"], "histogram_bins": 5,
                                    "histogram_range": [0.9999995, 1.0000004]}},
           "save": {"interval": 1}}
    with tripwire.Session(cfg, out_dir=tmp_path / "run") as s:
        plan = s.begin_step("train", 0)
        plan.add("ln.weight", NEAR_ONE, "weights")
        plan.add("big", NEAR_1E4, "weights")
        plan.add("zoom", NEAR_ONE, "weights")
        s.end_step()
    run = tripwire.open_run(tmp_path / "run")
    for name, x, bins, rng in (("ln.weight", NEAR_ONE, 8, None), ("big", NEAR_1E4, 8, None),
                               ("zoom", NEAR_ONE, 5, (0.9999995, 1.0000004))):
        counts, edges = run.histogram(name, 0)
        want_counts, want_edges = numpy_reference(x, bins, rng)
        np.testing.assert_array_equal(edges, want_edges, err_msg=name)
        np.testing.assert_array_equal(counts, want_counts, err_msg=name)
        assert len(np.unique(edges)) == bins + 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("bins,value_range", [(1, None), (7, None), (30, None), (64, None), (5, (-0.3, 0.45))])
def test_every_dtype_matches_numpy_in_float64(dtype: type, bins: int, value_range: tuple[float, float] | None) -> None:
    backend = NumpyBackend()
    for center, spread in ((0.0, 1.0), (1.0, 1e-6), (-3.0, 1e-3), (100.0, 5.0)):
        x = center + spread * RNG.standard_normal(2000)
        if np.dtype(dtype).kind != "f":
            x = np.clip(x * 40, 0, 255) if dtype == np.uint8 else x * 1000
        x = x.astype(dtype)
        if np.dtype(dtype).kind == "f":
            x[:3] = [np.nan, np.inf, -np.inf]
        counts, edges = backend.histogram(x, bins, value_range)
        want_counts, want_edges = numpy_reference(x, bins, value_range)
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("value, dtype", [(0.25, np.float32), (0.1, np.float32), (-3.0, np.float64),
                                          (65504.0, np.float16), (3e38, np.float32), (1e300, np.float64)])
@pytest.mark.parametrize("bins", [7, 8])
def test_a_constant_tensor_gets_the_widened_range_and_one_middle_bin(value: float, dtype: type, bins: int) -> None:
    # numpy raises "Too many bins" for 65504 in float16 (its edges in float16 are all equal), 3e38
    # and 1e300; tripwire stores (v - 0.5, v + 0.5), or v -+ v * 1e-6 where v +- 0.5 is v in float64
    x = np.full(100, value, dtype=dtype)
    counts, edges = NumpyBackend().histogram(x, bins, None)
    v = float(x[0])
    lo, hi = (v - 0.5, v + 0.5) if abs(v) < 1e15 else (v - abs(v) * 1e-6, v + abs(v) * 1e-6)
    assert (lo, hi) == widened(v, v)
    assert_even_float64_edges(edges, lo, hi, bins)
    assert np.all(np.diff(edges) > 0)
    assert counts.sum() == 100 and np.count_nonzero(counts) == 1
    assert int(np.argmax(counts)) in ((bins // 2,) if bins % 2 else (bins // 2 - 1, bins // 2))


def test_the_largest_float64_constant_keeps_finite_edges() -> None:
    big = np.finfo(np.float64).max
    for v in (big, -big):
        counts, edges = NumpyBackend().histogram(np.full(4, v), 8, None)
        assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0) and counts.sum() == 4
        assert edges[0] <= v <= edges[-1]


def test_a_range_whose_span_overflows_float64_is_binned() -> None:
    big = np.finfo(np.float64).max
    x = np.array([-big, 0.0, big / 3, big])
    counts, edges = NumpyBackend().histogram(x, 4, None)  # (numpy's own edges: NaN, Inf)
    np.testing.assert_array_equal(edges, np.linspace(-big / 2, big / 2, 5) * 2)
    assert edges[0] == -big and edges[-1] == big and np.all(np.diff(edges) > 0)
    np.testing.assert_array_equal(counts, [1, 0, 2, 1])
    assert not numpy_binnable(edges)


def test_a_range_narrower_than_the_bins_keeps_equal_edges_and_counts_each_value_once() -> None:
    one = 1.0
    x = np.array([one, np.nextafter(one, 2), np.nextafter(np.nextafter(one, 2), 2)])
    with pytest.raises(ValueError, match="Too many bins"):
        np.histogram(x, 8, range=(x.min(), x.max()))  # numpy's own refuses
    counts, edges = NumpyBackend().histogram(x, 8, None)
    np.testing.assert_array_equal(edges, np.linspace(x.min(), x.max(), 9))
    assert not numpy_binnable(edges) and counts.sum() == 3
    # each value in the bin whose edges hold it: edges[i] <= v < edges[i + 1] (the last closed)
    for v in x:
        i = int(np.searchsorted(edges[1:-1], v, side="right"))
        assert edges[i] <= v and (v < edges[i + 1] or i == 8 - 1)
    # the zero-width bins count nothing, but the last, closed, holds the values equal to its edges
    assert np.diff(edges)[-1] == 0 and counts[-1] == 1
    assert np.all(counts[:-1][np.diff(edges)[:-1] == 0] == 0)


def test_histogram_edges_are_numpys_linspace_in_float64() -> None:
    np.testing.assert_array_equal(histogram_edges(0.1, 0.7, 12), np.linspace(0.1, 0.7, 13))
    assert histogram_edges(np.float32(0.1), 1, 3).dtype == np.float64
    assert histogram_edges(np.float32(0.1), 1, 3)[0] == float(np.float32(0.1))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_bin_thresholds_compare_every_value_of_the_dtype_as_the_float64_edges_do(dtype: type) -> None:
    # the device backends without float64 (MPS, jax's default) compare against these
    for lo, hi, bins in ((1 - 4e-7, 1 + 5e-7, 9), (0.1, 0.7, 12), (-70000.0, 70000.0, 5), (9999.0, 10001.0, 30)):
        edges = histogram_edges(lo, hi, bins)
        inner, bounds = bin_thresholds(edges, dtype)
        assert inner.dtype == np.dtype(dtype) and bounds.dtype == np.dtype(dtype) and np.all(np.isfinite(bounds))
        with np.errstate(over="ignore"):
            near = edges.astype(dtype)  # each edge rounded to the dtype, and the values beside that
        values = np.concatenate([near, np.nextafter(near, np.array(-np.inf, dtype=dtype)),
                                 np.nextafter(near, np.array(np.inf, dtype=dtype)),
                                 np.array([np.nan, np.inf, -np.inf], dtype=dtype)])
        v64 = values.astype(np.float64)
        for j, e in enumerate(edges[1:-1]):
            np.testing.assert_array_equal(values >= inner[j], v64 >= e)
        np.testing.assert_array_equal((values >= bounds[0]) & (values <= bounds[1]), (v64 >= edges[0]) & (v64 <= edges[-1]))
    with pytest.raises(TypeError, match=r"dtype int32 is not a float dtype; accepted: float16, float32, float64"):
        bin_thresholds(histogram_edges(0, 1, 2), np.int32)


def test_bin_counts_is_numpy_histogram_in_float64() -> None:
    edges = histogram_edges(float(NEAR_1E4.min()), float(NEAR_1E4.max()), 8)
    np.testing.assert_array_equal(bin_counts(NEAR_1E4, edges), numpy_reference(NEAR_1E4, 8)[0])
    np.testing.assert_array_equal(bin_counts(np.array([np.nan, np.inf, 5.0]), histogram_edges(0, 1, 2)), [0, 0])
