"""Trial 30a finding F4 on the torch backend: a float32 tensor's histogram had float32-rounded edges
(bins up to 1.6x wider than others; for 1e4 + 1e-3*randn two edges both exactly 10000.0) and counts
that differed from ``numpy.histogram(x, bins, range=(lo, hi))`` with a float64 ``lo``/``hi``: 512
values 1 + 3e-7*randn in 8 bins gave [2 28 114 139 142 78 5 4] where numpy gives
[5 25 114 139 182 38 5 4]. Now TorchBackend's edges are float64 and each value is binned with numpy's
arithmetic in float64 on the device (or, where numpy would not bin and on MPS, exactly against the
edges rounded to float32), and counts and edges equal the numpy backend's for every dtype."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
import tripwire._reductions as reductions  # noqa: E402
from tripwire import NumpyBackend  # noqa: E402
from tripwire.integrations._torch import TorchBackend  # noqa: E402

torch.set_num_threads(1)


def finding_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    near_one = (1.0 + 3e-7 * torch.randn(512, generator=g)).float()  # hist_f32_edges.py
    g = torch.Generator().manual_seed(0)
    near_1e4 = (1e4 + torch.randn(1000, generator=g) * 1e-3).float()  # numerics.py
    return {"ln.weight": near_one, "big": near_1e4}


def numpy_reference(t: torch.Tensor, bins: int, value_range: tuple[float, float] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.histogram`` of the finite values in float64, over the float64 finite min..max."""
    a = t.detach().to(torch.float64).numpy().ravel()
    a = a[np.isfinite(a)]
    lo, hi = value_range if value_range is not None else (a.min(), a.max())
    return np.histogram(a, bins, range=(np.float64(lo), np.float64(hi)))


def test_the_finding_cases_match_numpy_through_a_session(tmp_path: Path) -> None:
    tensors = finding_tensors()
    cfg = {"collections": {"weights": {"reductions": ["histogram"], "histogram_bins": 8}}, "save": {"interval": 1}}
    with tripwire.Session(cfg, out_dir=tmp_path / "run") as s:
        plan = s.begin_step("train", 0)
        for name, t in tensors.items():
            plan.add(name, t, "weights")
        s.end_step()
    run = tripwire.open_run(tmp_path / "run")
    want = {"ln.weight": [5, 25, 114, 139, 182, 38, 5, 4], "big": [8, 58, 238, 371, 247, 66, 10, 2]}
    for name, t in tensors.items():
        counts, edges = run.histogram(name, 0)
        want_counts, want_edges = numpy_reference(t, 8)
        np.testing.assert_array_equal(counts, want[name], err_msg=name)
        np.testing.assert_array_equal(counts, want_counts, err_msg=name)
        np.testing.assert_array_equal(edges, want_edges, err_msg=name)
        lo, hi = float(t.min()), float(t.max())
        # equal widths (float64 rounding only): the float32 edges were up to 1.6x apart, or 0
        np.testing.assert_allclose(np.diff(edges), (hi - lo) / 8, rtol=1e-6, err_msg=name)


def _tensors(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for center, spread in ((0.0, 1.0), (1.0, 3e-7), (1e4, 1e-3), (-3.0, 1e-2)):
        x = center + spread * torch.randn(3000, generator=g, dtype=torch.float64)
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            t = x.to(dtype)
            t[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
            out.append(t)
        out.append((x * 1000).to(torch.int64))
    out.append(torch.rand(50, generator=g) > 0.5)
    out.append(torch.randn(40, 30, generator=g).t()[::3])  # not contiguous
    return out


@pytest.mark.parametrize("bucketize", [False, True], ids=["numpy_arithmetic", "bucketize"])
@pytest.mark.parametrize("bins,value_range", [(1, None), (8, None), (30, None), (64, None), (5, (0.9999995, 1.0000004)),
                                              (12, (-0.4, 0.7)), (7, (9999.999, 10000.002))])
def test_every_dtype_matches_numpy_in_float64(monkeypatch: pytest.MonkeyPatch, bucketize: bool, bins: int,
                                              value_range: tuple[float, float] | None) -> None:
    # bucketize: the path where numpy would not bin, and MPS's (float32 values against the edges
    # rounded up to float32), forced here on the CPU
    if bucketize:
        monkeypatch.setattr(reductions, "numpy_binnable", lambda edges: False)
    backend, ref = TorchBackend(), NumpyBackend()
    for t in _tensors(bins):
        counts, edges = backend.histogram(t, bins, value_range)
        assert counts.dtype == np.int64 and edges.dtype == np.float64
        want_counts, want_edges = numpy_reference(t, bins, value_range)
        np.testing.assert_array_equal(edges, want_edges, err_msg=str(t.dtype))
        np.testing.assert_array_equal(counts, want_counts, err_msg=str(t.dtype))
        ref_counts, ref_edges = ref.histogram(backend.to_numpy(t), bins, value_range)
        np.testing.assert_array_equal(counts, ref_counts)
        np.testing.assert_array_equal(edges, ref_edges)


@pytest.mark.parametrize("value, dtype", [(0.25, torch.float32), (0.1, torch.float32), (65504.0, torch.float16),
                                          (-3.0, torch.bfloat16), (3e38, torch.float32), (1e300, torch.float64),
                                          (7, torch.int64)])
@pytest.mark.parametrize("bins", [7, 8])
def test_a_constant_tensor_gets_the_widened_range_and_one_middle_bin(value: float, dtype: torch.dtype, bins: int) -> None:
    # trial 30a: a constant fp16 tensor of 65504 stored 9 identical edges (numpy's float16 ones)
    t = torch.full((100,), value, dtype=dtype)
    counts, edges = TorchBackend().histogram(t, bins, None)
    v = float(t[0].double())
    lo, hi = (v - 0.5, v + 0.5) if abs(v) < 1e15 else (v - abs(v) * 1e-6, v + abs(v) * 1e-6)
    np.testing.assert_array_equal(edges, np.linspace(lo, hi, bins + 1))
    assert np.all(np.diff(edges) > 0)
    assert counts.sum() == 100 and np.count_nonzero(counts) == 1
    assert int(np.argmax(counts)) in ((bins // 2,) if bins % 2 else (bins // 2 - 1, bins // 2))
    ref_counts, ref_edges = NumpyBackend().histogram(TorchBackend().to_numpy(t), bins, None)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(edges, ref_edges)


def test_a_float64_range_narrower_than_the_bins_matches_the_numpy_backend() -> None:
    one = 1.0
    t = torch.tensor([one, np.nextafter(one, 2), np.nextafter(np.nextafter(one, 2), 2)], dtype=torch.float64)
    counts, edges = TorchBackend().histogram(t, 8, None)
    ref_counts, ref_edges = NumpyBackend().histogram(t.numpy(), 8, None)
    np.testing.assert_array_equal(edges, ref_edges)
    np.testing.assert_array_equal(counts, ref_counts)
    assert counts.sum() == 3


def test_a_sparse_tensor_is_binned_as_its_dense_one() -> None:
    dense = torch.zeros(6, 3)
    dense[1] = torch.tensor([1 + 3e-7, 1.0, 1 - 3e-7])
    counts, edges = TorchBackend().histogram(dense.to_sparse(), 8, None)
    want_counts, want_edges = numpy_reference(dense, 8)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)
