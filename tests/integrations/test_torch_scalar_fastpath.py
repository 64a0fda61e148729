"""The torch backend's path for save steps of one-element tensors only (``_Program.scalar_only``:
losses, metrics, learning rates): the values read with ``.item()`` on the CPU must give exactly
what the stacked path gives, and what the numpy reference gives, for every dtype, shape, special
value and reduction, across several groups with their own reductions."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tripwire import BASIC_REDUCTIONS, NumpyBackend  # noqa: E402
from tripwire.integrations._torch import TorchBackend  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's reference on NaN/Inf

PARAMETRIC = ["fraction_gt:0.5", "fraction_lt:-0.25", "fraction_abs_gt:1.3", "fraction_gt:0.1", "fraction_abs_gt:0",
              "fraction_lt:0.1"]
ALL_REDUCTIONS = list(BASIC_REDUCTIONS) + PARAMETRIC
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
SPECIAL = (0.0, -0.0, 0.1, -0.1, 0.5, 1.3, -1.3, 1e-30, 7e4, 3e38, float("nan"), float("inf"), float("-inf"))


def _scalar(rng: random.Random) -> torch.Tensor:
    shape = rng.choice(((), (), (1,), (1, 1)))
    kind = rng.random()
    if kind < 0.6:
        dtype = rng.choice(FLOATS)
        value = rng.choice(SPECIAL) if rng.random() < 0.5 else rng.gauss(0.0, 2.0)
        with np.errstate(over="ignore"):
            return torch.tensor(value, dtype=torch.float64).to(dtype).reshape(shape)
    if kind < 0.9:
        dtype = rng.choice(INTS)
        info = torch.iinfo(dtype)
        low = info.min + 1 if info.min < 0 else info.min  # (numpy's |x| of the lowest int wraps around: negative)
        value = rng.choice((low, info.max, 0, 1, -1 if info.min < 0 else 2, rng.randint(low, info.max)))
        return torch.tensor(value, dtype=dtype).reshape(shape)
    return torch.tensor(rng.random() < 0.5).reshape(shape)


def _groups(seed: int) -> list[tuple[list[torch.Tensor], list[str]]]:
    rng = random.Random(seed)
    groups = []
    for _ in range(rng.randint(1, 4)):
        tensors = [_scalar(rng) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.3:
            reductions = ["sum"]  # a kept loss ("raw")
        elif rng.random() < 0.3:
            reductions = rng.sample(["sum", "mean", "min", "max"], rng.randint(1, 4))  # the value itself
        else:
            reductions = rng.sample(ALL_REDUCTIONS, rng.randint(1, 8))
        groups.append((tensors, reductions))
    if rng.random() < 0.3:  # a tensor offered in two groups
        groups.append(([groups[0][0][0]], ["sum", "l2"]))
    return groups


def _reference(backend: TorchBackend, groups) -> list[np.ndarray]:
    return [NumpyBackend().reduce([backend.to_numpy(t) for t in tensors], reductions) for tensors, reductions in groups]


def _stacked(groups) -> list[np.ndarray]:
    """The same groups through the stacked path (one ``torch.stack``, one host copy)."""
    backend = TorchBackend()
    backend.reduce_groups(groups)
    (program,) = backend._scratch.programs.values()
    program.scalar_items = False
    return backend.reduce_groups(groups)


@pytest.mark.parametrize("seed", range(60))
def test_random_scalar_groups_match_numpy_and_the_stacked_path(seed: int) -> None:
    groups = _groups(seed)
    backend = TorchBackend()
    got = backend.reduce_groups(groups)
    (program,) = backend._scratch.programs.values()
    assert program.scalar_only and program.scalar_items
    again = backend.reduce_groups(groups)  # (the cached program)
    for out, ref, stacked, (tensors, reductions) in zip(got, _reference(backend, groups), _stacked(groups), groups):
        assert out.shape == (len(tensors), len(reductions)) and out.dtype == np.float64
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(out, stacked)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(stacked))  # (-0.0 kept as such)
    for a, b in zip(got, again):
        assert a is not b
        np.testing.assert_array_equal(a, b)


def test_kept_losses_and_metrics_as_a_save_step_offers_them() -> None:
    # a Lightning fit with the default config: eleven kept losses and a few logged metrics, all
    # asked for "sum" (raw), in one group or two, float32 and float64
    losses = [torch.tensor(0.37 * i) for i in range(11)]
    metrics = [torch.tensor(0.5), torch.tensor(0.25, dtype=torch.float64), torch.tensor(float("nan"))]
    backend = TorchBackend()
    for groups in ([(losses, ["sum"]), (metrics, ["sum"])], [(losses + metrics, ["sum"])],
                   [(losses, ["sum"]), (metrics, ["sum", "nonfinite_count", "abs_max"])]):
        for out, ref in zip(backend.reduce_groups(groups), _reference(backend, groups)):
            np.testing.assert_array_equal(out, ref)
            assert out.flags.c_contiguous and out.flags.writeable


def test_outputs_are_fresh_arrays_each_call() -> None:
    # callers may keep or write into an output: no call shares an array with another, nor with
    # the program's templates
    t = [torch.tensor(1.5), torch.tensor(2.5)]
    groups = [(t, ["sum"]), (t[:1], ["mean", "numel"]), ([], ["sum"])]
    backend = TorchBackend()
    first = backend.reduce_groups(groups)
    for out in first:
        out[...] = -7.0
    second = backend.reduce_groups(groups)
    np.testing.assert_array_equal(second[0], [[1.5], [2.5]])
    np.testing.assert_array_equal(second[1], [[1.5, 1.0]])
    assert second[2].shape == (0, 1)


def test_large_integers_round_as_torch_converts_them() -> None:
    values = [2**63 - 1, -(2**63), 2**53 + 1, 2**53 + 3, -(2**53) - 1]
    tensors = [torch.tensor(v, dtype=torch.int64) for v in values] + [torch.tensor(-(2**31), dtype=torch.int32)]
    groups = [(tensors, ["sum", "fraction_gt:0.5", "fraction_abs_gt:1.3", "l1"])]
    got = TorchBackend().reduce_groups(groups)[0]
    np.testing.assert_array_equal(got[:, 0], torch.tensor(values + [-(2**31)]).to(torch.float64).numpy())
    np.testing.assert_array_equal(got, _stacked(groups)[0])


def test_groups_mixing_scalars_with_larger_or_sparse_tensors_keep_their_paths() -> None:
    big = torch.tensor([1.0, float("nan"), -2.0])
    sparse = torch.tensor([[0.0, 2.0], [0.0, 0.0]]).to_sparse()
    one_sparse = torch.tensor([3.0]).to_sparse()
    scalars = [torch.tensor(0.5), torch.tensor([2], dtype=torch.int32), torch.tensor(-1.0, dtype=torch.bfloat16)]
    backend = TorchBackend()
    cases = [
        ([(scalars + [big], ALL_REDUCTIONS)], False),
        ([(scalars, ["sum"]), ([big], ["mean", "nonfinite_count"])], False),
        ([(scalars + [sparse, one_sparse], ALL_REDUCTIONS), (scalars, ["sum"])], True),
        ([(scalars + [torch.empty(0)], ALL_REDUCTIONS)], True),
        ([(scalars, ["numel", "nonfinite_count", "sum"]), ([big], ["numel"])], True),
    ]
    for groups, scalar_only in cases:
        backend._scratch.programs.clear()
        got = backend.reduce_groups(groups)
        (program,) = backend._scratch.programs.values()
        assert program.scalar_only is scalar_only
        for out, ref in zip(got, _reference(backend, groups)):
            np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0, equal_nan=True)


def test_scalars_of_other_dtypes_take_the_stacked_path() -> None:
    # complex values (the session offers their magnitude; a direct call gets the stacked path's
    # real part) are not read with .item()
    tensors = [torch.tensor(1.5 + 2j), torch.tensor(0.5)]
    backend = TorchBackend()
    with pytest.warns(UserWarning):  # (torch: casting complex values to real discards the imaginary part)
        got = backend.reduce_groups([(tensors, ["sum"])])[0]
    (program,) = backend._scratch.programs.values()
    assert program.scalar_only and not program.scalar_items
    np.testing.assert_array_equal(got, [[1.5], [0.5]])
