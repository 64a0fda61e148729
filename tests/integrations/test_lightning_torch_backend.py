"""Contract: the torch reduction backend matches tripwire's numpy reference on every reduction
(basic and parametric) and on histograms, for float32/float64/float16/bf16/int/bool tensors with
NaN, Inf and empty ones."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tripwire import BASIC_REDUCTIONS, NumpyBackend  # noqa: E402
from tripwire.integrations._torch import TorchBackend, update_ratios  # noqa: E402

PARAMETRIC = ["fraction_gt:0.5", "fraction_lt:-0.25", "fraction_abs_gt:1.3", "fraction_gt:0.1", "fraction_abs_gt:0"]
REDUCTIONS = list(BASIC_REDUCTIONS) + PARAMETRIC

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's reference on NaN/Inf/empty


def _tensors(seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    out = [
        torch.randn(3, 4, generator=g),
        torch.randn(257, generator=g).to(torch.bfloat16),
        (torch.randn(64, generator=g) * 3).round().to(torch.bfloat16),  # many ties on bin edges
        torch.empty(0),
        torch.empty(0, 3, dtype=torch.bfloat16),
        torch.tensor([1.0, float("nan"), 2.0]),
        torch.tensor([float("inf"), -1.0, 0.0]),
        torch.tensor([float("-inf"), float("inf")]),
        torch.randn(7, generator=g).double() * 1e6,
        torch.randint(-3, 4, (20,), generator=g),
        torch.randn(50, generator=g).half(),
        torch.tensor([True, False, True]),
        torch.tensor(3.5),
        torch.zeros(5),
        torch.full((4,), 2.0),
        torch.rand(2, 3, 5, generator=g) - 0.5,
    ]
    x = torch.randn(40, generator=g)
    x[torch.randperm(40, generator=g)[:5]] = float("nan")
    out.append(x)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_reductions_match_numpy_reference(seed: int) -> None:
    tensors = _tensors(seed)
    backend = TorchBackend()
    got = backend.reduce(tensors, REDUCTIONS)
    want = NumpyBackend().reduce([backend.to_numpy(t) for t in tensors], REDUCTIONS)
    assert got.shape == want.shape == (len(tensors), len(REDUCTIONS))
    assert got.dtype == np.float64
    # float64 and integer tensors are reduced in float64 (exact to rounding); float32/bf16/fp16 in
    # float32 with float32 accumulation (counts, min, max and fractions are exact in any case)
    rtol = np.array([[1e-12 if t.dtype == torch.float64 or not t.is_floating_point() else 2e-6] for t in tensors])
    bad = ~np.isclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    problems = [(str(tensors[i].dtype), tuple(tensors[i].shape), REDUCTIONS[j], got[i, j], want[i, j]) for i, j in zip(*np.nonzero(bad))]
    assert not problems


def test_each_tensor_alone_matches_the_batched_call() -> None:
    tensors = _tensors(7)
    backend = TorchBackend()
    batched = backend.reduce(tensors, REDUCTIONS)
    for i, t in enumerate(tensors):
        np.testing.assert_allclose(backend.reduce([t], REDUCTIONS)[0], batched[i], rtol=1e-12)


def test_threshold_is_rounded_like_numpy_for_each_dtype() -> None:
    # 0.1 is not representable: float16/float32 arrays compare against the threshold in their own dtype
    tensors = [torch.tensor([0.1, 0.2], dtype=d) for d in (torch.float16, torch.float32, torch.float64, torch.bfloat16)]
    backend = TorchBackend()
    got = backend.reduce(tensors, ["fraction_gt:0.1", "fraction_lt:0.1"])
    want = NumpyBackend().reduce([backend.to_numpy(t) for t in tensors], ["fraction_gt:0.1", "fraction_lt:0.1"])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bins,value_range", [(30, None), (7, None), (5, (-1.0, 1.5)), (1, None), (12, (0.1, 0.7))])
def test_histograms_match_numpy_exactly(seed: int, bins: int, value_range) -> None:
    backend, ref = TorchBackend(), NumpyBackend()
    for t in _tensors(seed):
        if t.dtype == torch.bool:
            continue
        counts, edges = backend.histogram(t, bins, value_range)
        want_counts, want_edges = ref.histogram(backend.to_numpy(t), bins, value_range)
        assert counts.dtype == np.int64 and edges.dtype == np.float64
        np.testing.assert_array_equal(edges, want_edges, err_msg=f"{t.dtype} {tuple(t.shape)}")
        np.testing.assert_array_equal(counts, want_counts, err_msg=f"{t.dtype} {tuple(t.shape)}")


def test_to_numpy_and_numel() -> None:
    backend = TorchBackend()
    t = torch.randn(3, 2).to(torch.bfloat16)
    arr = backend.to_numpy(t)
    assert arr.dtype == np.float32 and arr.shape == (3, 2)
    assert backend.numel(t) == 6
    x = torch.ones(2, requires_grad=True) * 2
    assert backend.to_numpy(x).tolist() == [2.0, 2.0]


def test_empty_call_and_no_reductions() -> None:
    backend = TorchBackend()
    assert backend.reduce([], ["mean"]).shape == (0, 1)
    assert backend.reduce([torch.ones(2)], []).shape == (1, 0)


def test_update_ratios() -> None:
    before = [torch.tensor([3.0, 4.0]), torch.tensor([1.0])]
    after = [torch.tensor([3.0, 4.5]), torch.tensor([1.0])]
    np.testing.assert_allclose(update_ratios(before, after).numpy(), [0.1, 0.0], rtol=1e-6)
