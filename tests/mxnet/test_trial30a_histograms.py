"""Trial 30a finding F4 on MXNet: histograms replayed numpy's arithmetic in a float32 array's own
dtype, with float32-rounded edges (bins of unequal width, a zero-width bin for 1e4 + 1e-3*randn,
counts unlike ``numpy.histogram(x, bins, range=(lo, hi))`` with a float64 ``lo``/``hi``). Now the
edges are float64 and each value is binned with numpy's arithmetic in float64 on the array's context
(and MXNet's scalar operators, which parse a Python float from text and can be an ulp off, are not
used for it). Also: this environment's numpy 1.x bins a float32 array in float32 even over a float64
range, so the numpy backend bins the values as float64."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import NumpyBackend, Session
from tripwire.integrations.mxnet import MXNetBackend

from mxnet_testlib import nd

RNG = np.random.default_rng(30)
NEAR_ONE = (1.0 + 3e-7 * RNG.standard_normal(512)).astype(np.float32)
NEAR_1E4 = (1e4 + 1e-3 * RNG.standard_normal(1000)).astype(np.float32)


def numpy_reference(x: np.ndarray, bins: int, value_range: tuple[float, float] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.histogram`` of the finite values in float64, over the float64 finite min..max."""
    a = np.asarray(x, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    lo, hi = value_range if value_range is not None else (a.min(), a.max())
    return np.histogram(a, bins, range=(np.float64(lo), np.float64(hi)))


def test_the_finding_cases_match_numpy_through_a_session(tmp_path: Path) -> None:
    cfg = {"collections": {"weights": {"reductions": ["histogram"], "histogram_bins": 8}}, "save": {"interval": 1}}
    arrays = {"ln.weight": NEAR_ONE, "big": NEAR_1E4}
    with Session(cfg, backend=MXNetBackend(), out_dir=tmp_path / "run") as s:
        s.step("train", 0, {k: (nd.array(a, dtype=a.dtype), "weights") for k, a in arrays.items()})
    run = tripwire.open_run(tmp_path / "run")
    for name, a in arrays.items():
        counts, edges = run.histogram(name, 0)
        want_counts, want_edges = numpy_reference(a, 8)
        np.testing.assert_array_equal(edges, want_edges, err_msg=name)
        np.testing.assert_array_equal(counts, want_counts, err_msg=name)
        np.testing.assert_allclose(np.diff(edges), (float(a.max()) - float(a.min())) / 8, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int64"])
@pytest.mark.parametrize("bins,value_range", [(1, None), (8, None), (30, None), (5, (0.9999995, 1.0000004)),
                                              (7, (9999.999, 10000.002)), (12, (-0.4, 0.7))])
def test_every_dtype_matches_numpy_in_float64(dtype: str, bins: int, value_range: tuple[float, float] | None) -> None:
    backend, ref = MXNetBackend(), NumpyBackend()
    for center, spread in ((0.0, 1.0), (1.0, 3e-7), (1e4, 1e-3), (-3.0, 1e-4)):
        x = center + spread * RNG.standard_normal(2000)
        a = (x * 1000).astype(dtype) if dtype.startswith("int") else x.astype(dtype)
        if not dtype.startswith("int"):
            a[:3] = [np.nan, np.inf, -np.inf]
        counts, edges = backend.histogram(nd.array(a, dtype=dtype), bins, value_range)
        assert counts.dtype == np.int64 and edges.dtype == np.float64
        want_counts, want_edges = numpy_reference(a, bins, value_range)
        np.testing.assert_array_equal(edges, want_edges, err_msg=f"{dtype} {center}")
        np.testing.assert_array_equal(counts, want_counts, err_msg=f"{dtype} {center}")
        ref_counts, ref_edges = ref.histogram(a, bins, value_range)
        np.testing.assert_array_equal(counts, ref_counts, err_msg=f"{dtype} {center}")
        np.testing.assert_array_equal(edges, ref_edges)


@pytest.mark.parametrize("value, dtype", [(0.25, "float32"), (0.1, "float32"), (65504.0, "float16"),
                                          (3e38, "float32"), (1e300, "float64"), (7, "int32")])
def test_a_constant_tensor_gets_the_widened_range_and_one_middle_bin(value: float, dtype: str) -> None:
    # numpy's own raises for 65504 in float16 (its float16 edges are all equal), 3e38 and 1e300
    a = np.full(100, value, dtype=dtype)
    counts, edges = MXNetBackend().histogram(nd.array(a, dtype=dtype), 7, None)
    v = float(a[0])
    lo, hi = (v - 0.5, v + 0.5) if abs(v) < 1e15 else (v - abs(v) * 1e-6, v + abs(v) * 1e-6)
    np.testing.assert_array_equal(edges, np.linspace(lo, hi, 8))
    np.testing.assert_array_equal(counts, [0, 0, 0, 100, 0, 0, 0])
    ref_counts, ref_edges = NumpyBackend().histogram(a, 7, None)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(edges, ref_edges)


def test_a_float64_range_narrower_than_the_bins_and_one_that_overflows_match_the_numpy_backend() -> None:
    one, big = 1.0, np.finfo(np.float64).max
    for a in (np.array([one, np.nextafter(one, 2), np.nextafter(np.nextafter(one, 2), 2)]), np.array([-big, 0.0, big / 3, big])):
        counts, edges = MXNetBackend().histogram(nd.array(a, dtype="float64"), 8, None)
        ref_counts, ref_edges = NumpyBackend().histogram(a, 8, None)
        np.testing.assert_array_equal(edges, ref_edges)
        np.testing.assert_array_equal(counts, ref_counts)
        assert counts.sum() == len(a)


def test_empty_and_sparse_arrays() -> None:
    counts, edges = MXNetBackend().histogram(nd.array(np.zeros(0, np.float32)), 3, None)
    np.testing.assert_array_equal(counts, [0, 0, 0])
    np.testing.assert_array_equal(edges, np.linspace(0.0, 1.0, 4))
    dense = np.zeros((6, 3), np.float32)
    dense[1] = [1 + 3e-7, 1.0, 1 - 3e-7]
    counts, edges = MXNetBackend().histogram(nd.array(dense).tostype("row_sparse"), 8, None)
    want_counts, want_edges = numpy_reference(dense, 8)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)
