"""KerasBackend against the numpy reference: every reduction (parametric ones too) and histograms,
over dtypes and awkward values (NaN/Inf, empty, bf16, ints, bools, huge, offset, constant).
Keras runs on the torch backend (CI); a jax run happens in test_keras.py when jax is installed."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported; torch is the backend CI uses

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402
from keras import ops  # noqa: E402

from tripwire import BASIC_REDUCTIONS, NumpyBackend  # noqa: E402
from tripwire.integrations.keras import KerasBackend  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning", "ignore::UserWarning")

REDUCTIONS = list(BASIC_REDUCTIONS) + [
    "fraction_gt:0.5", "fraction_lt:-0.5", "fraction_abs_gt:1", "fraction_gt:-1", "fraction_lt:1",
    "fraction_abs_gt:-1", "fraction_abs_gt:9.5", "fraction_gt:0", "fraction_lt:0",
]
RNG = np.random.default_rng(0)
ARRAYS = {
    "matrix": RNG.normal(size=(300, 70)).astype("float32"),  # large enough for its own bucket
    "vector": RNG.normal(size=(20,)).astype("float32"),
    "nan_inf": np.array([1.0, np.nan, 2.0, np.inf], "float32"),
    "neg_inf": np.array([-np.inf, 3.0, 0.0], "float32"),
    "all_nan": np.array([np.nan, np.nan], "float32"),
    "zeros": np.zeros((5, 3), "float32"),
    "ones": np.ones((7,), "float32"),
    "ints": RNG.integers(-3, 4, size=(9,)).astype("int32"),
    "bools": np.array([True, False, True, True]),
    "empty": np.zeros((0, 4), "float32"),
    "scalar": np.array(2.5, "float32"),
    "huge": (RNG.normal(size=(100,)) * 1e20).astype("float32"),  # float32 sum of squares overflows
    "offset": (1000 + RNG.normal(size=(50,)) * 1e-3).astype("float32"),  # one-pass variance fails
    "float64": RNG.normal(size=(40,)),
    "tiny": (RNG.normal(size=(30,)) * 1e-30).astype("float32"),
}


def _scale(x: np.ndarray, reduction: str) -> float:
    """Magnitude a float32 result is rounded against (sums of many terms lose ~1e-7 of it)."""
    a = np.abs(x.astype(np.float64)[np.isfinite(x.astype(np.float64))]) if x.size else np.zeros(0)
    if a.size == 0 or reduction.startswith(("fraction", "zero", "positive", "nonfinite", "numel")):
        return 0.0
    if reduction in ("sum", "l1", "abs_sum"):
        return float(a.sum())
    if reduction in ("variance", "abs_variance"):
        return float((a ** 2).mean())
    if reduction == "l2":
        return float(np.sqrt((a ** 2).sum()))
    return float(a.max())


def _assert_matches(arrays: list[np.ndarray], got: np.ndarray, ref: np.ndarray) -> None:
    for i, x in enumerate(arrays):
        for j, r in enumerate(REDUCTIONS):
            tol = 1e-6 * abs(ref[i, j]) + 1e-6 * _scale(x, r)
            ok = (np.isnan(got[i, j]) and np.isnan(ref[i, j])) or got[i, j] == ref[i, j] or abs(got[i, j] - ref[i, j]) <= tol
            assert ok, f"{r} of array {i} ({x.dtype}, shape {x.shape}): keras {got[i, j]!r}, numpy {ref[i, j]!r}"


def test_every_reduction_matches_numpy_together() -> None:
    arrays = list(ARRAYS.values())
    ref = NumpyBackend().reduce(arrays, REDUCTIONS)
    got = KerasBackend().reduce([ops.convert_to_tensor(a) for a in arrays], REDUCTIONS)
    assert got.shape == ref.shape and got.dtype == np.float64
    _assert_matches(arrays, got, ref)


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_every_reduction_matches_numpy_alone(name: str) -> None:
    x = ARRAYS[name]
    ref = NumpyBackend().reduce([x], REDUCTIONS)
    got = KerasBackend().reduce([ops.convert_to_tensor(x)], REDUCTIONS)
    _assert_matches([x], got, ref)


def test_exact_where_it_matters() -> None:
    kb = KerasBackend()
    got = kb.reduce([ops.convert_to_tensor(ARRAYS[k]) for k in ("ones", "offset", "huge", "nan_inf")],
                    ["std", "variance", "l2", "nonfinite_count", "numel"])
    assert got[0, 0] == 0.0 and got[0, 1] == 0.0  # a constant tensor has no spread, not float32 noise
    assert got[1, 0] == pytest.approx(ARRAYS["offset"].astype(np.float64).std(), rel=1e-6)
    assert np.isfinite(got[2, 2]) and got[2, 2] == pytest.approx(np.linalg.norm(ARRAYS["huge"].astype(np.float64)), rel=1e-6)
    assert got[3, 3] == 2.0 and got[3, 4] == 4.0


def test_bfloat16_and_grad_tensors() -> None:
    x = RNG.normal(size=(64, 16)).astype("float32")
    t = ops.cast(ops.convert_to_tensor(x), "bfloat16")
    host = KerasBackend().to_numpy(t)
    assert host.dtype == np.float32
    ref = NumpyBackend().reduce([host], REDUCTIONS)
    got = KerasBackend().reduce([t], REDUCTIONS)
    _assert_matches([host], got, ref)
    p = torch.nn.Parameter(torch.tensor(x))  # a trainable variable's value: no autograd graph from reductions
    kb = KerasBackend()
    assert kb.reduce([p], ["l2"])[0, 0] == pytest.approx(np.linalg.norm(x.astype(np.float64)), rel=1e-6)
    assert kb.numel(p) == x.size and kb.to_numpy(p).shape == x.shape


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("value_range", [None, (-1.0, 1.0), (0.0, 2.5)])
def test_histogram_matches_numpy(name: str, value_range: tuple[float, float] | None) -> None:
    x = ARRAYS[name]
    if x.dtype == bool:
        x = x.astype(np.uint8)
    ref_counts, ref_edges = NumpyBackend().histogram(x, 7, value_range)
    counts, edges = KerasBackend().histogram(ops.convert_to_tensor(x), 7, value_range)
    assert counts.dtype == np.int64 and edges.dtype == np.float64
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(edges, ref_edges, rtol=0, atol=0)


@settings(max_examples=40, deadline=None)
@given(
    arrays=st.lists(
        hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                   elements=st.floats(-1e6, 1e6, width=32) | st.sampled_from([0.0, np.nan, np.inf, -np.inf])),
        min_size=1, max_size=6,
    ),
    bins=st.integers(1, 12),
)
def test_random_tensors_match_numpy(arrays: list[np.ndarray], bins: int) -> None:
    ref = NumpyBackend().reduce(arrays, REDUCTIONS)
    kb = KerasBackend()
    got = kb.reduce([ops.convert_to_tensor(a) for a in arrays], REDUCTIONS)
    _assert_matches(arrays, got, ref)
    c1, e1 = NumpyBackend().histogram(arrays[0], bins, None)
    c2, e2 = kb.histogram(ops.convert_to_tensor(arrays[0]), bins, None)
    np.testing.assert_array_equal(c2, c1)
    np.testing.assert_array_equal(e2, e1)
