"""KerasBackend against the numpy reference: every reduction (parametric ones too) and histograms,
over dtypes and awkward values (NaN/Inf, empty, bf16, ints, bools, huge, offset, constant), on
both column paths: the torch fast path (``_native.torch_columns``, raw torch ops on the device
for large tensors, numpy on the host for small ones) and the ``keras.ops`` path other backends
use (forced here with ``backend._fast = False``). Keras runs on the torch backend here; the float32
path of jax without ``jax_enable_x64`` (no float64 pass) is checked in test_trial26e_jax.py."""

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
from tripwire.integrations.keras import _native  # noqa: E402

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


def backend(fast: bool) -> KerasBackend:
    kb = KerasBackend()
    kb._fast = fast
    return kb


PATHS = pytest.mark.parametrize("fast", [True, False], ids=["torch-fast", "keras-ops"])


@PATHS
def test_every_reduction_matches_numpy_together(fast: bool) -> None:
    arrays = list(ARRAYS.values())
    ref = NumpyBackend().reduce(arrays, REDUCTIONS)
    got = backend(fast).reduce([ops.convert_to_tensor(a) for a in arrays], REDUCTIONS)
    assert got.shape == ref.shape and got.dtype == np.float64
    _assert_matches(arrays, got, ref)


@PATHS
@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_every_reduction_matches_numpy_alone(name: str, fast: bool) -> None:
    x = ARRAYS[name]
    ref = NumpyBackend().reduce([x], REDUCTIONS)
    got = backend(fast).reduce([ops.convert_to_tensor(x)], REDUCTIONS)
    _assert_matches([x], got, ref)


@PATHS
def test_exact_where_it_matters(fast: bool) -> None:
    kb = backend(fast)
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


@settings(max_examples=25, deadline=None)
@given(
    arrays=st.lists(
        hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                   elements=st.floats(-1e6, 1e6, width=32) | st.sampled_from([0.0, np.nan, np.inf, -np.inf])),
        min_size=1, max_size=6,
    ),
    bins=st.integers(1, 12),
    fast=st.booleans(),
)
def test_random_tensors_match_numpy(arrays: list[np.ndarray], bins: int, fast: bool) -> None:
    ref = NumpyBackend().reduce(arrays, REDUCTIONS)
    kb = backend(fast)
    got = kb.reduce([ops.convert_to_tensor(a) for a in arrays], REDUCTIONS)
    _assert_matches(arrays, got, ref)
    c1, e1 = NumpyBackend().histogram(arrays[0], bins, None)
    c2, e2 = kb.histogram(ops.convert_to_tensor(arrays[0]), bins, None)
    np.testing.assert_array_equal(c2, c1)
    np.testing.assert_array_equal(e2, e1)


# ------------------------------------------------------------------------------------ torch fast path
def _big(shape: tuple[int, ...], seed: int, offset: float = 0.0) -> np.ndarray:
    return (offset + np.random.default_rng(seed).normal(size=shape)).astype("float32")


def test_fast_path_large_tensors_and_awkward_values_match_numpy() -> None:
    """Tensors above the host threshold (reduced on the device) with NaN/Inf, zeros, a shifted
    mean, mixed dtypes (float16, bf16, float64, ints, bools), a one-element and an empty tensor, in
    one call: the device and host columns, the float32 pass and the exact refinement, together."""
    assert KerasBackend()._torch_backend() is not None
    big = 3 * 8192
    relu = np.maximum(_big((big,), 1), 0)  # half exact zeros
    nan_inf = _big((big,), 2)
    nan_inf[[5, 77]] = np.nan
    nan_inf[[9]] = np.inf
    arrays = [
        _big((big,), 3), relu, nan_inf, _big((big,), 4, offset=1000.0), _big((big,), 5).astype("float16"),
        np.random.default_rng(6).integers(-5, 6, size=big).astype("int32"), (_big((big,), 7) > 0),
        _big((big,), 8).astype("float64"), np.array([3.5], "float32"), np.zeros((0, 3), "float32"),
        _big((40,), 9).astype("float16"), np.array([np.nan, 0.0, -0.0, 2.0], "float32"),
    ]
    ref = NumpyBackend().reduce([a.astype(np.uint8) if a.dtype == bool else a for a in arrays], REDUCTIONS)
    got = backend(True).reduce([ops.convert_to_tensor(a) for a in arrays], REDUCTIONS)
    _assert_matches(arrays, got, ref)
    x = ops.cast(ops.convert_to_tensor(_big((big,), 10)), "bfloat16")
    host = KerasBackend().to_numpy(x)
    _assert_matches([host], backend(True).reduce([x], REDUCTIONS), NumpyBackend().reduce([host], REDUCTIONS))


def test_fast_path_permuted_views_and_parameters() -> None:
    """A permuted (non-contiguous) view, like a channels-last conv output, and a trainable
    parameter are reduced in place, without autograd history."""
    x = torch.randn(8, 16, 13, 13)
    view = x.permute(0, 2, 3, 1)
    assert not view.is_contiguous()
    p = torch.nn.Parameter(torch.randn(300, 70))
    got = backend(True).reduce([view, p, x[:, :3]], REDUCTIONS)
    arrays = [view.numpy(), p.detach().numpy(), x[:, :3].numpy()]
    _assert_matches(arrays, got, NumpyBackend().reduce(arrays, REDUCTIONS))
    assert p.grad is None and torch.is_grad_enabled()  # no_grad stayed inside the reduction


def test_fast_path_thresholds_compare_like_numpy() -> None:
    """A threshold is rounded to a float tensor's type before comparing (numpy's rule), on the
    device and on the host path: float32(0.1) is not greater than 0.1 for either."""
    for n in (4, 3 * 8192):
        x = np.full(n, 0.1, dtype="float32")
        got = backend(True).reduce([ops.convert_to_tensor(x)], ["fraction_gt:0.1", "fraction_lt:0.1", "fraction_abs_gt:0.1"])
        np.testing.assert_array_equal(got, NumpyBackend().reduce([x], ["fraction_gt:0.1", "fraction_lt:0.1", "fraction_abs_gt:0.1"]))


def test_reduce_groups_on_torch_is_one_fused_torch_call_with_shared_tensors() -> None:
    """On torch a step's groups go to the Lightning integration's TorchBackend in one call (a ReLU
    output offered as an activation and as a ReLU output is reduced once); with the fast path off,
    one keras.ops reduction per group gives the same values."""
    from tripwire.integrations._torch import TorchBackend

    kb = backend(True)
    calls: list[int] = []

    class Counting(TorchBackend):
        def reduce_groups(self, groups):  # type: ignore[no-untyped-def]
            calls.append(len(groups))
            return super().reduce_groups(groups)

    kb._torch = Counting()
    big = torch.relu(torch.randn(3 * 8192))
    small = torch.randn(10)
    groups = [([big, small], ["zero_fraction", "mean"]), ([big, torch.tensor(2.5)], ["mean", "std", "zero_fraction"])]
    fused = kb.reduce_groups(groups)
    assert calls == [2]
    np.testing.assert_array_equal(fused[0][0, 1], fused[1][0, 0])
    slow = backend(False).reduce_groups(groups)
    for got, ref in zip(fused, slow):
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def test_update_norms_and_copies() -> None:
    before = [torch.randn(40, 30), torch.zeros(7), torch.randn(3, dtype=torch.float64)]
    copies = _native.copy_values(before)
    assert all(c is not b and torch.equal(c, b) for c, b in zip(copies, before))
    after = [b + 0.5 for b in before]
    diff = _native.subtract_values(after, copies)
    assert all(torch.allclose(d, torch.full_like(d, 0.5)) for d in diff)
    exact_calls: list[int] = []

    def exact(tensors: list[torch.Tensor]) -> np.ndarray:
        exact_calls.append(len(tensors))
        return np.array([np.linalg.norm(t.double().numpy()) for t in tensors])

    norms = _native.update_norms(copies, after, exact)
    np.testing.assert_allclose(norms[:3], [np.linalg.norm(np.full(s, 0.5)) for s in (1200, 7, 3)], rtol=1e-6)
    np.testing.assert_allclose(norms[3:], [np.linalg.norm(b.double().numpy()) for b in before], rtol=1e-6)
    assert exact_calls == []  # fused, in the copies' own buffers
    assert all(torch.allclose(c, torch.full_like(c, -0.5)) for c in copies)
    # a norm that overflows float32 (1e30 squared): the exact path, from the same values
    big = [torch.full((4,), 1e30)]
    norms = _native.update_norms(big, [torch.full((4,), -1e30)], exact)
    assert exact_calls == [2]
    np.testing.assert_allclose(norms, [4e30, 2e30], rtol=1e-6)


def test_a_step_declined_by_the_background_is_converted_and_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # the session asks reduce_groups_async, then reduce_groups with the same groups where it declines:
    # each tensor went through keras's conversion twice and the program was looked up twice
    from tripwire.integrations import _torch as torch_module

    calls = {"as_torch": 0, "program": 0}
    as_torch, program = _native.as_torch, torch_module._program

    def counted_as_torch(t):  # type: ignore[no-untyped-def]
        calls["as_torch"] += 1
        return as_torch(t)

    def counted_program(*a):  # type: ignore[no-untyped-def]
        calls["program"] += 1
        return program(*a)

    monkeypatch.setattr(_native, "as_torch", counted_as_torch)
    monkeypatch.setattr(torch_module, "_program", counted_program)
    b = KerasBackend()
    groups = [([torch.tensor(1.0), torch.tensor(2.0)], ["sum"]), ([torch.ones(3)], ["l2", "mean"])]
    assert b.reduce_groups_async(groups) is None  # a few numbers: not worth a thread
    got = b.reduce_groups(groups)
    assert calls == {"as_torch": 3, "program": 1}
    np.testing.assert_allclose(got[0], [[1.0], [2.0]])
    np.testing.assert_allclose(got[1], [[np.sqrt(3.0), 1.0]], rtol=1e-6)
    b.reduce_groups([(list(ts), rs) for ts, rs in groups])  # other groups: converted anew
    assert calls == {"as_torch": 6, "program": 2}
