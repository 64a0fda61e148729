"""Contract: the torch reduction backend matches tripwire's numpy reference on every reduction
(basic and parametric) and on histograms, for float32/float64/float16/bf16/int/bool tensors with
NaN, Inf and empty ones."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tripwire import BASIC_REDUCTIONS, NumpyBackend  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
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
        torch.randn(100, generator=g) * 1e20,  # float32 squares overflow
        torch.randn(30, generator=g) * 1e-30,  # float32 squares underflow
        torch.cat([torch.randn(600, generator=g) * 1e-30, torch.zeros(300)]),  # the same, packed past a chunk
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
    rtol, atol = _tolerances(tensors, REDUCTIONS)
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    problems = [(str(tensors[i].dtype), tuple(tensors[i].shape), REDUCTIONS[j], got[i, j], want[i, j]) for i, j in zip(*np.nonzero(bad))]
    assert not problems


def _tolerances(tensors: list, reductions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The documented accuracy: float64 and integer tensors 1e-12 relative; float32/bf16/fp16
    2e-6 relative, and sums and means of those within ``_SUM_ERROR * sqrt(sum(x^2))`` (divided by
    n for a mean) even where the sum cancels (a zero-mean tensor)."""
    exact = [t.dtype == torch.float64 or not t.is_floating_point() for t in tensors]
    rtol = np.array([[1e-12 if e else 2e-6] for e in exact])
    atol = np.zeros((len(tensors), len(reductions)))
    for i, t in enumerate(tensors):
        if exact[i] or t.numel() == 0:
            continue
        x = TorchBackend().to_numpy(t).astype(np.float64)
        scale = torch_module._SUM_ERROR * np.sqrt(np.sum(x * x))
        for j, r in enumerate(reductions):
            if r in ("sum", "mean"):
                atol[i, j] = scale / (x.size if r == "mean" else 1)
    return rtol, atol


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


def test_one_element_tensors_of_every_dtype_match_numpy() -> None:
    # one-element tensors are stacked on the device and reduced on the host: thresholds compare
    # in each tensor's own dtype (0.1 as float16/float32/bf16 differs from 0.1 as float64)
    dtypes = (torch.float16, torch.float32, torch.float64, torch.bfloat16)
    tensors = [torch.tensor(v, dtype=d) for d in dtypes for v in (0.1, -0.1, 0.0, float("nan"), float("inf"))]
    tensors += [torch.tensor([3]), torch.tensor(True), torch.tensor([[-2.5]])]
    backend = TorchBackend()
    reductions = REDUCTIONS + ["fraction_gt:-0.1", "fraction_abs_gt:0.1", "fraction_lt:0.1"]
    for group in (tensors, tensors[5:10], tensors[-3:]):  # mixed dtypes, one dtype, integers
        got = backend.reduce(group, reductions)
        want = NumpyBackend().reduce([backend.to_numpy(t) for t in group], reductions)
        np.testing.assert_array_equal(got, want)


def test_groups_of_one_element_tensors_only_are_reduced_in_one_host_copy() -> None:
    # the default config's save steps: losses kept raw ("sum"), metrics, learning rates, each group
    # its own reductions, mixed dtypes across groups; one stacked copy, sliced back per group
    losses = [torch.tensor(v) for v in (2.5, float("nan"), 0.0)]
    metrics = [torch.tensor(0.25, dtype=torch.float64), torch.tensor([7]), torch.tensor(-1.5, dtype=torch.bfloat16)]
    groups = [(losses, ["sum"]), (metrics, ["l2", "zero_fraction", "nonfinite_count", "fraction_gt:0.1"]),
              (losses[:1], ["mean", "max"])]
    backend = TorchBackend()
    outs = backend.reduce_groups(groups)
    (program,) = backend._scratch.programs.values()
    assert program.scalar_only
    for (tensors, reductions), got in zip(groups, outs):
        want = NumpyBackend().reduce([backend.to_numpy(t) for t in tensors], reductions)
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


def test_empty_and_all_zero_tensors_reduce_as_numpy_does() -> None:
    # an empty tensor's sums are 0 (they were NaN: a rule reading l2 saw a non-finite value), its
    # other statistics NaN; an all-zero tensor's abs_max is +0.0 (it was -0.0)
    tensors = [torch.zeros(0, 4), torch.zeros(7), torch.zeros(300)]
    arrays = [t.numpy() for t in tensors]
    got = TorchBackend().reduce(tensors, REDUCTIONS)
    want = NumpyBackend().reduce(arrays, REDUCTIONS)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    row = dict(zip(REDUCTIONS, want[0]))
    assert row["sum"] == row["l1"] == row["l2"] == row["abs_sum"] == row["numel"] == row["nonfinite_count"] == 0.0
    assert np.isnan(row["mean"]) and np.isnan(row["max"])
    assert [float(np.linalg.norm(arrays[0])), float(arrays[0].sum())] == [row["l2"], row["sum"]]
    assert not np.signbit(dict(zip(REDUCTIONS, got[1]))["abs_max"])


def test_update_ratios() -> None:
    before = [torch.tensor([3.0, 4.0]), torch.tensor([1.0])]
    after = [torch.tensor([3.0, 4.5]), torch.tensor([1.0])]
    np.testing.assert_allclose(update_ratios(before, after).numpy(), [0.1, 0.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("inplace", [False, True])
def test_update_ratios_of_half_weights_are_exact_to_float32(dtype: torch.dtype, inplace: bool) -> None:
    # trial 18b: under precision="bf16-true" the difference of two bf16 weights was rounded to bf16
    # (up to 2e-3 relative off, where the weights' own norms were exact to 1e-7)
    g = torch.Generator().manual_seed(0)
    before = [torch.randn(64, 32, generator=g).to(dtype), torch.randn(100, generator=g).to(dtype)]
    after = [(b.float() * (1 + 0.01 * torch.randn(b.shape, generator=g))).to(dtype) for b in before]
    kept = [b.clone() for b in before]
    exact = [np.linalg.norm(a.double().numpy() - b.double().numpy()) / np.linalg.norm(b.double().numpy())
             for a, b in zip(after, before)]
    got = update_ratios(before, after, inplace=inplace)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), exact, rtol=1e-5)
    assert all(torch.equal(b, k) for b, k in zip(before, kept))  # (the caller's half tensors are left alone)


# ------------------------------------------------------------------ fused path (reduce_groups)

GROUP_REDUCTIONS = [
    ["l2", "mean", "std", "min", "max", "nonfinite_count"],
    ["l2", "mean", "std", "abs_mean", "abs_max", "zero_fraction", "nonfinite_count"],
    ["mean", "std", "abs_max", "zero_fraction", "nonfinite_count", "fraction_gt:-0.5", "fraction_lt:0.25"],
    list(BASIC_REDUCTIONS) + ["fraction_abs_gt:0.7", "fraction_gt:-1e-3", "fraction_lt:-2"],
    ["sum", "numel"],
]


def _mixed_groups(seed: int) -> list[tuple[list, list[str]]]:
    """Groups as a step offers them: several dtypes, empty, one-element and large tensors,
    NaN/Inf, a tensor in two groups and a view of it with another shape, a transposed one."""
    g = torch.Generator().manual_seed(seed)
    big = torch.randn(300_001, generator=g)
    act = torch.relu(torch.randn(64, 1031, generator=g) + 0.3)
    weight = torch.randn(257, 129, generator=g) * 0.05
    nan_big = torch.randn(70_000, generator=g)
    nan_big[123] = float("nan")
    inf_big = torch.randn(5_000, generator=g).double()
    inf_big[7] = float("-inf")
    groups = [
        [weight, weight.t(), torch.randn(10, generator=g), torch.empty(0), torch.tensor([2.5])],
        [big, torch.randn(300, generator=g).half(), torch.randn(1000, generator=g).to(torch.bfloat16), nan_big],
        [act, act.reshape(-1), torch.randint(-3, 4, (513,), generator=g), torch.tensor([True, False, True, True])],
        [weight, inf_big, torch.zeros(777), torch.full((300,), 2.0), torch.tensor(float("nan")),
         torch.randn(2, generator=g), torch.empty(0, 5, dtype=torch.float64)],
        [torch.tensor(1.5), torch.tensor(3), big[:5], torch.randn(4, 4, generator=g).double()],
    ]
    return list(zip(groups, GROUP_REDUCTIONS))


def _assert_matches_reference(tensors: list, reductions: list[str], got: np.ndarray) -> None:
    backend = TorchBackend()
    want = NumpyBackend().reduce([backend.to_numpy(t) for t in tensors], reductions)
    assert got.shape == want.shape and got.dtype == np.float64
    rtol, atol = _tolerances(tensors, reductions)
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    problems = [(str(tensors[i].dtype), tuple(tensors[i].shape), reductions[j], got[i, j], want[i, j])
                for i, j in zip(*np.nonzero(bad))]
    assert not problems


@pytest.mark.parametrize("seed", range(2))
def test_reduce_groups_matches_numpy_reference_on_mixed_groups(seed: int) -> None:
    groups = _mixed_groups(seed)
    outs = TorchBackend().reduce_groups(groups)
    assert len(outs) == len(groups)
    for (tensors, reductions), got in zip(groups, outs):
        _assert_matches_reference(tensors, reductions, got)


def test_reduce_groups_equals_one_call_per_group_and_repeats_identically() -> None:
    groups = _mixed_groups(3)
    backend = TorchBackend()
    fused = backend.reduce_groups(groups)
    again = backend.reduce_groups(groups)  # scratch buffers and cached layouts reused
    separate = [TorchBackend().reduce(t, r) for t, r in groups]
    for a, b, c in zip(fused, again, separate):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-12, equal_nan=True)


def test_small_chunks_and_no_scratch_give_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = _mixed_groups(4)
    want = TorchBackend().reduce_groups(groups)
    monkeypatch.setattr(torch_module, "_CHUNK", 1000)  # many buckets, tensors larger than a bucket
    monkeypatch.setattr(torch_module, "_SCRATCH_MAX", 512)  # fresh buffers instead of scratch
    got = TorchBackend().reduce_groups(groups)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)


def test_variance_of_offset_and_constant_tensors_is_exact() -> None:
    # sum(x^2) - sum(x)^2/n loses digits when the mean is large against the spread: those
    # tensors are recomputed in two passes (float64), so they still match numpy
    g = torch.Generator().manual_seed(5)
    tensors = [1000 + torch.randn(10_000, generator=g) * 1e-2, torch.sigmoid(torch.randn(5000, generator=g) + 4),
               torch.full((1000,), 0.1), 3 + torch.rand(300, generator=g), -7 - torch.rand(2000, generator=g)]
    reductions = ["variance", "std", "abs_variance", "abs_std", "mean"]
    got = TorchBackend().reduce(tensors, reductions)
    want = NumpyBackend().reduce([t.numpy() for t in tensors], reductions)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-12)


def test_large_float32_statistics_are_accurate() -> None:
    # float32 sums go through chunks of 256 (cascade summation) and float64 across chunks:
    # sequential float32 accumulation (torch._foreach_norm, dot) is off by ~1e-5 at 4M elements
    g = torch.Generator().manual_seed(6)
    tensors = [torch.randn(4_000_000, generator=g), torch.relu(torch.randn(1_000_003, generator=g))]
    reductions = ["l2", "mean", "std", "abs_mean", "sum", "zero_fraction", "positive_fraction", "fraction_gt:1.5"]
    _assert_matches_reference(tensors, reductions, TorchBackend().reduce(tensors, reductions))


def test_session_makes_one_backend_call_per_step(tmp_path) -> None:
    import tripwire

    class Counting(TorchBackend):
        calls = 0

        def reduce_groups(self, groups):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().reduce_groups(groups)

        def reduce(self, tensors, reductions):  # type: ignore[no-untyped-def]
            raise AssertionError("the session should use reduce_groups")

    session = tripwire.Session(out_dir=tmp_path / "run", backend=Counting(), save_interval=1,
                               collections=["weights", "gradients", "activations", "losses"])
    w = torch.randn(20, 30)
    for step in range(2):
        plan = session.begin_step("train", step)
        plan.add("fc.weight", w, "weights")
        plan.add("gradients/fc.weight", w * 0.1, "gradients")
        plan.add("fc/output", torch.relu(w), "activations")
        plan.add("loss", torch.tensor(0.5), "losses")
        plan.add("loss_py", 0.25, "losses")  # a Python number goes to the numpy backend
        session.end_step()
    session.close()
    assert Counting.calls == 2
    h = session.history
    np.testing.assert_allclose(h.latest("fc.weight", "std", "train", 0)[1], float(w.double().std(unbiased=False)), rtol=2e-6)
    np.testing.assert_allclose(h.latest("gradients/fc.weight", "l2", "train", 0)[1], float((w * 0.1).double().norm()), rtol=2e-6)
    assert h.latest("loss", "raw", "train", 0)[1] == 0.5
    assert h.latest("loss_py", "raw", "train", 0)[1] == 0.25


def test_snapshot_reuses_buffers_and_inplace_update_ratios() -> None:
    from tripwire.integrations._torch import snapshot

    params = [torch.tensor([3.0, 4.0]), torch.tensor([1.0])]
    before = snapshot(params)
    assert before[0] is not params[0] and torch.equal(before[0], params[0])
    params[0].add_(torch.tensor([0.0, 0.5]))
    ratios = update_ratios(before, params, inplace=True)
    np.testing.assert_allclose(ratios.numpy(), [0.1, 0.0], rtol=1e-6)
    again = snapshot(params, into=before)
    assert again[0] is before[0] and torch.equal(again[0], params[0])  # copied into the old buffers
    other = snapshot([torch.ones(3)], into=before)  # shapes differ: fresh copies
    assert other[0] is not before[0] and other[0].tolist() == [1.0, 1.0, 1.0]


def test_nonfinite_count_of_a_tensor_packed_with_others_that_need_other_statistics() -> None:
    # one pack: the first tensor needs means (float64 sums), the NaN one only a non-finite count
    g = torch.Generator().manual_seed(11)
    x = torch.randn(1000, generator=g)
    bad = torch.randn(600, generator=g)
    bad[[3, 500]] = float("nan")
    bad[10] = float("inf")
    out = TorchBackend().reduce_groups([([x], ["mean"]), ([bad], ["nonfinite_count"]), ([bad, x], ["l2"])])
    assert out[1][0, 0] == 3
    atol = torch_module._SUM_ERROR * float(x.double().norm()) / x.numel()  # the documented bound on means
    np.testing.assert_allclose(out[0][0, 0], float(x.double().mean()), rtol=2e-6, atol=atol)
    assert np.isnan(out[2][0, 0]) and out[2][1, 0] == pytest.approx(float(x.double().norm()), rel=2e-6)


def test_activation_capture_remembers_the_hooked_layers_per_key() -> None:
    from torch import nn

    from tripwire.integrations._torch import ActivationCapture

    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    asked: list[tuple[str, str]] = []

    def select(name: str, kind: str) -> bool:
        asked.append((name, kind))
        return name != "2/output"

    acts = ActivationCapture()
    for _ in range(3):  # three save steps with the same due collections: one scan of the model
        acts.attach(net, outputs=True, inputs=True, relu=True, select=select, key="due")
        net(torch.randn(5, 4))
        acts.detach()
        got = {name: kinds for name, _, kinds in acts.take()}
        assert got == {"0/output": ("activations",), "1/output": ("activations", "relu_outputs"),
                       "1/input": ("activation_inputs",)}
    assert len(asked) == 5  # 0/output, 1/output (twice: activations, relu_outputs), 1/input, 2/output
    acts.attach(net, outputs=True, inputs=False, relu=False, select=select, key="due")  # other flags: a new scan
    assert len(asked) == 8
    acts.detach()
    acts.forget()
    acts.attach(net, outputs=True, inputs=True, relu=True, select=select, key="due")
    assert len(asked) == 13 and acts.attached
    acts.detach()
    assert not acts.attached and not net[0]._forward_hooks


def test_a_session_without_a_backend_takes_the_torch_one_at_the_first_torch_tensor(tmp_path) -> None:
    """A hand-written loop (docs/config.md): ``plan.add("loss", loss.detach(), "losses")`` with a
    0-d torch tensor failed in the numpy backend's element count; now the session takes the torch
    backend, and the values are the ones numpy gives."""
    import tripwire

    s = tripwire.Session(None, out_dir=str(tmp_path), save_interval=1, collections=["losses", "gradients"])
    w = torch.randn(3, 4, requires_grad=True)
    for step in range(2):
        plan = s.begin_step("train", step)
        loss = (w ** 2).sum()
        loss.backward()
        if plan.keeps("losses"):
            plan.add("loss", loss.detach(), "losses")
        plan.add("gradients/w", w.grad, "gradients")
        s.end_step()
        grad, w.grad = w.grad, None
    s.close()
    assert isinstance(s.backend, TorchBackend)
    run = tripwire.open_run(tmp_path)
    assert run.series("loss")[1].tolist() == pytest.approx([float((w ** 2).sum())] * 2)
    want = NumpyBackend().reduce([grad.numpy()], ["l2"])[0, 0]
    assert run.series("gradients/w", "l2")[1].tolist() == pytest.approx([want, want], rel=1e-6)
    s = tripwire.Session(None, out_dir=str(tmp_path / "np"), backend=NumpyBackend(), save_interval=1)
    s.step("train", 0, {"loss": (torch.tensor(2.0), "losses")})  # a given backend is kept: numpy reads it too
    s.close()
    assert isinstance(s.backend, NumpyBackend) and tripwire.open_run(tmp_path / "np").series("loss")[1].tolist() == [2.0]


@pytest.mark.parametrize("values, dtype", [
    ([65504.0, -65504.0, 60000.0], torch.float16),   # float16's whole range: its bin arithmetic overflowed
    ([3e38, -3e38, 1.0], torch.float32),
    ([3e38] * 10, torch.float32),                      # constant, where v +- 0.5 is v in float64
])
def test_a_histogram_at_the_edge_of_the_dtypes_range_never_ends_the_step(values: list[float], dtype: torch.dtype) -> None:
    # trial 23u: IndexError inside end_step() (numpy's own np.histogram fails the same way): the step was lost
    from tripwire import NumpyBackend

    t = torch.tensor(values, dtype=dtype)
    for backend in (TorchBackend(), NumpyBackend()):
        counts, edges = backend.histogram(t if backend.name == "torch" else t.numpy(), 30, None)
        assert counts.sum() == len(values) and np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)
        assert edges[0] <= float(t.double().min()) and edges[-1] >= float(t.double().max())


@pytest.mark.parametrize("values, dtype", [
    ([1e20, -1e20] * 50, torch.float32),       # squares overflow, the signed sum cancels to 0: l2 was inf
    ([3e38, -3e38, 1.0] * 5, torch.float32),    # |x| sums overflow float32: l1 was inf
    ([3.3e38, 3.3e38, -3.3e38], torch.bfloat16),
    ([1e-22, -3e-22, 2e-22, 5e-23] * 25, torch.float32),  # squares are denormals: l2/std were off by 88%
])
def test_statistics_at_the_edges_of_float32_match_numpy(values: list[float], dtype: torch.dtype) -> None:
    # trial 23u: the float64 recompute missed an overflowed |x| sum, a sum of squares that overflowed
    # beside a zero sum, and squares below float32's normal range
    t = torch.tensor(values, dtype=dtype)
    reductions = ["l1", "l2", "abs_sum", "abs_mean", "std", "variance", "mean"]
    [row] = TorchBackend().reduce([t], reductions)
    x = t.double().numpy()
    expected = [np.abs(x).sum(), np.sqrt((x * x).sum()), np.abs(x).sum(), np.abs(x).mean(), x.std(), x.var(), x.mean()]
    np.testing.assert_allclose(row, expected, rtol=1e-6, atol=abs(x).max() * 1e-7)


@pytest.mark.parametrize("reductions", [["l2"], ["l2", "abs_mean"], ["l1"], ["abs_sum", "l2"]])
@pytest.mark.parametrize("values", [[1e-22, -3e-22, 2e-22, 5e-23] * 25, [3e38, -3e38, 1.0] * 5])
def test_edge_statistics_are_recomputed_without_a_sum_asked_for(reductions: list[str], values: list[float]) -> None:
    # trial 37b: the float64 recompute of squares below float32's normal range (and of |x| sums that
    # overflowed) ran only where a plain sum was computed too; the default rules' l2 and abs_mean alone
    # stored a gradient's norm 65% low
    t = torch.tensor(values, dtype=torch.float32)
    [row] = TorchBackend().reduce([t], reductions)
    x = t.double().numpy()
    ref = {"l2": np.sqrt((x * x).sum()), "abs_mean": np.abs(x).mean(), "l1": np.abs(x).sum(), "abs_sum": np.abs(x).sum()}
    np.testing.assert_allclose(row, [ref[r] for r in reductions], rtol=1e-6)
