"""Trial 30a finding F4 on the Keras backend: histograms binned a float32 tensor in float32 against
float32-rounded edges (bins of unequal width, a zero-width bin for 1e4 + 1e-3*randn, counts unlike
``numpy.histogram(x, bins, range=(lo, hi))`` with a float64 ``lo``/``hi``). Now the edges are
float64 and each value is binned as numpy bins it in float64: on torch by TorchBackend, elsewhere with
``keras.ops`` (numpy's arithmetic in float64 where the backend has float64, else a search against the
edges rounded up to float32, which is exact too). Runs Keras on torch here (both paths: the
``keras.ops`` one forced with ``_fast = False``); the same file runs on jax with ``KERAS_BACKEND=jax``
(with and without ``JAX_ENABLE_X64=1``) where jax is installed. Imports no torch."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")  # before keras is imported (torch is the backend CI uses)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")

from keras import ops  # noqa: E402

import tripwire.integrations.keras._backend as keras_backend  # noqa: E402
from tripwire import NumpyBackend  # noqa: E402
from tripwire.integrations.keras import KerasBackend, _native  # noqa: E402

RNG = np.random.default_rng(30)
NEAR_ONE = (1.0 + 3e-7 * RNG.standard_normal(512)).astype(np.float32)
NEAR_1E4 = (1e4 + 1e-3 * RNG.standard_normal(1000)).astype(np.float32)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (keras-on-torch __array__ copy= warning)
PATHS = ["fast", "ops"] if keras.backend.backend() == "torch" else ["ops"]


def make_backend(path: str) -> KerasBackend:
    kb = KerasBackend()
    kb._fast = path == "fast"
    return kb


def numpy_reference(x: np.ndarray, bins: int, value_range: tuple[float, float] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.histogram`` of the finite values in float64, over the float64 finite min..max."""
    a = np.asarray(x, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    lo, hi = value_range if value_range is not None else (a.min(), a.max())
    return np.histogram(a, bins, range=(np.float64(lo), np.float64(hi)))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("x", [NEAR_ONE, NEAR_1E4], ids=["near_one", "near_1e4"])
def test_the_finding_cases_match_numpy_in_float64(path: str, x: np.ndarray) -> None:
    counts, edges = make_backend(path).histogram(ops.convert_to_tensor(x), 8, None)
    want_counts, want_edges = numpy_reference(x, 8)
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(counts, want_counts)
    assert counts.dtype == np.int64 and edges.dtype == np.float64 and len(np.unique(edges)) == 9


def _arrays() -> list[np.ndarray]:
    out = []
    dtypes = ["float32", "float16", "bfloat16", "int32"] + (["float64"] if _native.float64_supported() else [])
    for center, spread in ((0.0, 1.0), (1.0, 3e-7), (1e4, 1e-3), (-3.0, 1e-2)):
        x = center + spread * RNG.standard_normal(2000)
        for dtype in dtypes:
            if dtype == "int32":
                out.append((x * 1000).astype(np.int32))
                continue
            a = x.astype(np.float32 if dtype == "bfloat16" else dtype)
            a[:3] = [np.nan, np.inf, -np.inf]
            out.append((a, dtype))
    return out


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("search", [False, True], ids=["numpy_arithmetic", "search"])
@pytest.mark.parametrize("bins,value_range", [(1, None), (8, None), (30, None), (5, (0.9999995, 1.0000004)),
                                              (7, (9999.999, 10000.002))])
def test_every_dtype_matches_numpy_in_float64(monkeypatch: pytest.MonkeyPatch, path: str, search: bool, bins: int,
                                              value_range: tuple[float, float] | None) -> None:
    if search:  # the path without float64 (jax's default), forced
        monkeypatch.setattr(keras_backend, "numpy_binnable", lambda edges: False)
    kb = make_backend(path)
    for item in _arrays():
        a, dtype = item if isinstance(item, tuple) else (item, str(item.dtype))
        t = ops.cast(ops.convert_to_tensor(a), dtype)
        host = kb.to_numpy(t)  # (bf16: the values bf16 holds)
        counts, edges = kb.histogram(t, bins, value_range)
        want_counts, want_edges = numpy_reference(host, bins, value_range)
        np.testing.assert_array_equal(edges, want_edges, err_msg=dtype)
        np.testing.assert_array_equal(counts, want_counts, err_msg=dtype)
        ref_counts, ref_edges = NumpyBackend().histogram(host, bins, value_range)
        np.testing.assert_array_equal(counts, ref_counts, err_msg=dtype)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("value, dtype", [(0.25, "float32"), (0.1, "float32"), (65504.0, "float16"),
                                          (3e38, "float32"), (7, "int32")])
def test_a_constant_tensor_gets_the_widened_range_and_one_middle_bin(path: str, value: float, dtype: str) -> None:
    # trial 30a: a constant fp16 tensor of 65504 stored 9 identical edges (numpy's float16 ones)
    t = ops.full((100,), value, dtype=dtype)
    counts, edges = make_backend(path).histogram(t, 7, None)
    v = float(np.asarray(value, dtype=dtype))
    lo, hi = (v - 0.5, v + 0.5) if abs(v) < 1e15 else (v - abs(v) * 1e-6, v + abs(v) * 1e-6)
    np.testing.assert_array_equal(edges, np.linspace(lo, hi, 8))
    np.testing.assert_array_equal(counts, [0, 0, 0, 100, 0, 0, 0])


@pytest.mark.parametrize("path", PATHS)
def test_empty_and_all_nonfinite_tensors_get_zero_counts_over_0_1(path: str) -> None:
    kb = make_backend(path)
    for a in (np.zeros(0, np.float32), np.array([np.nan, np.inf], np.float32)):
        counts, edges = kb.histogram(ops.convert_to_tensor(a), 3, None)
        np.testing.assert_array_equal(counts, [0, 0, 0])
        np.testing.assert_array_equal(edges, np.linspace(0.0, 1.0, 4))
