"""Trial 26g, finding 1: sparse NDArrays (``row_sparse`` gradients of ``Embedding(sparse_grad=True)``,
``csr`` arrays a user adds) crashed the hook at the first save step (``RowSparseNDArray.size`` raises
NotImplementedError). They reduce as their dense equivalent, the elements not stored being zeros,
checked against numpy on the dense array; the hook and the estimator's handler capture them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import BASIC_REDUCTIONS, NumpyBackend
from tripwire.integrations.mxnet import MXNetBackend, TripwireHandler, TripwireHook
from tripwire.integrations.mxnet import _backend as backend_module

from mxnet_testlib import mx, nd

gluon = mx.gluon
REDUCTIONS = list(BASIC_REDUCTIONS) + [
    "fraction_gt:0.1", "fraction_lt:-0.3", "fraction_abs_gt:0.5", "fraction_gt:0", "fraction_abs_gt:1e-3",
    "fraction_lt:0.5", "fraction_gt:-0.2", "fraction_abs_gt:-1",  # thresholds that 0 satisfies
]
BACKEND = MXNetBackend()
REFERENCE = NumpyBackend()


def _rows_zeroed(arr: np.ndarray, keep: list[int]) -> np.ndarray:
    out = np.zeros_like(arr)
    out[keep] = arr[keep]
    return out


def _dense_cases() -> list[tuple[str, np.ndarray]]:
    """Dense arrays whose zero rows a row_sparse array leaves out."""
    rng = np.random.default_rng(0)
    normal = rng.normal(size=(50, 8)).astype(np.float32)
    special = rng.normal(size=(6, 4)).astype(np.float32)
    special[1] = [np.nan, np.inf, -1.0, 0.0]
    special[4] = [-np.inf, 2.0, 3.0, 0.5]
    return [
        ("a few rows of an embedding", _rows_zeroed(normal, [3, 17, 40])),
        ("every row stored", normal),
        ("no row stored", np.zeros((20, 5), np.float32)),
        ("one row, all negative", _rows_zeroed(-np.abs(normal) - 1.0, [7])),
        ("one row, all positive", _rows_zeroed(np.abs(normal) + 1.0, [49])),
        ("NaN and infinities", _rows_zeroed(special, [1, 4])),
        ("a large mean, a small spread", _rows_zeroed(np.full((30, 4), 9950.0, np.float32) + rng.normal(
            size=(30, 4)).astype(np.float32) * 1e-3, list(range(29)))),
        ("float64", _rows_zeroed(rng.normal(size=(12, 3)), [0, 11])),
        ("float16", _rows_zeroed(rng.normal(size=(10, 6)).astype(np.float16), [2, 5])),
        ("3-d rows", _rows_zeroed(rng.normal(size=(9, 2, 3)).astype(np.float32), [4])),
    ]


def _close(got: np.ndarray, want: np.ndarray) -> list[tuple[str, float, float]]:
    return [(r, g, w) for r, g, w in zip(REDUCTIONS, got, want)
            if not np.allclose(g, w, rtol=1e-9, atol=1e-9 * max(1.0, abs(w) if np.isfinite(w) else 1.0),
                               equal_nan=True)]


def _sparse(arr: np.ndarray, stype: str) -> Any:
    return nd.array(arr, dtype=arr.dtype).tostype(stype)


CASES = _dense_cases()


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_a_sparse_array_reduces_as_its_dense_equivalent(case: int, stype: str) -> None:
    name, arr = CASES[case]
    if stype == "csr" and arr.ndim != 2:
        pytest.skip("csr arrays are 2-d")
    x = _sparse(arr, stype)
    assert x.stype == stype
    got = BACKEND.reduce([x], REDUCTIONS)[0]
    want = REFERENCE.reduce([arr], REDUCTIONS)[0]
    assert _close(got, want) == []
    assert BACKEND.numel(x) == arr.size
    np.testing.assert_array_equal(BACKEND.to_numpy(x), arr)


@pytest.mark.parametrize("value_range", [None, (-1.0, 1.0), (0.5, 2.0), (-3.0, 0.0)])
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_a_sparse_arrays_histogram_counts_the_zeros_left_out(case: int, value_range: Any) -> None:
    _, arr = CASES[case]
    counts, edges = BACKEND.histogram(_sparse(arr, "row_sparse"), 7, value_range)
    want_counts, want_edges = REFERENCE.histogram(arr, 7, value_range)
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(counts, want_counts)


def test_sparse_and_dense_tensors_in_several_groups_of_one_call() -> None:
    """A sparse tensor in two groups, next to dense ones of its context and dtype (one packed matrix)."""
    arrs = [arr for _, arr in CASES[:6]]
    sparse = [_sparse(a, "row_sparse") for a in arrs]
    dense = [nd.array(a, dtype=a.dtype) for a in arrs]
    groups = [([sparse[0], dense[1], sparse[2]], ["mean", "zero_fraction", "numel"]),
              ([sparse[0], sparse[3], dense[4], sparse[5]], REDUCTIONS)]
    got = BACKEND.reduce_groups(groups)
    np.testing.assert_allclose(got[0], REFERENCE.reduce([arrs[0], arrs[1], arrs[2]], ["mean", "zero_fraction", "numel"]),
                               rtol=1e-9, atol=1e-12)
    want = REFERENCE.reduce([arrs[0], arrs[3], arrs[4], arrs[5]], REDUCTIONS)
    for g, w in zip(got[1], want):
        assert _close(g, w) == []


def _embedding_net() -> Any:
    mx.random.seed(0)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Embedding(50, 8, sparse_grad=True), gluon.nn.Flatten(), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    return net


def _tokens(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    tok = rng.randint(0, 50, size=(n, 6)).astype(np.float32)
    return tok, (tok[:, 0] < 25).astype(np.float32)


STATS = ["mean", "l2", "zero_fraction", "numel", "min", "max", "std", "nonfinite_count"]


def test_the_hook_captures_a_row_sparse_gradient_only_at_save_steps(tmp_path: Path, monkeypatch: Any) -> None:
    """The default rules and the stored statistics and histogram of the Embedding's row_sparse
    gradient equal numpy's on the dense gradient; a sparse array is read only at save steps."""
    reads: list[int] = []
    stored = backend_module._stored

    def spy(x: Any) -> Any:
        if isinstance(x, nd.sparse.BaseSparseNDArray):
            reads.append(hook.session.mode_steps["train"] - 1)
        return stored(x)

    monkeypatch.setattr(backend_module, "_stored", spy)
    tok, y = _tokens(256)
    net = _embedding_net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=3,
                        collections={"gradients": {"reductions": [*STATS, "histogram"], "histogram_bins": 9}})
    hook.register_block(net)
    mine: dict[int, np.ndarray] = {}
    with hook:
        for step in range(8):
            xb, yb = nd.array(tok[step * 32:(step + 1) * 32]), nd.array(y[step * 32:(step + 1) * 32])
            hook.begin_step("train")
            with autograd_record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            grad = net[0].weight.grad()
            assert grad.stype == "row_sparse"
            mine[step] = grad.asnumpy().copy()
            hook.end_step(loss=loss)
            trainer.step(32)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert sorted(set(reads)) == [0, 3, 6]
    name = "gradients/0.weight"
    for step in (0, 3, 6):
        dense = mine[step] / 32  # (trial 27h: the gradient of the mean loss over the batch's 32 samples)
        assert 0 < np.count_nonzero(dense.any(axis=1)) < 50  # a few rows stored, the others left out
        want = REFERENCE.reduce([dense], STATS)[0]
        got = [run.value(name, r, step) for r in STATS]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
        counts, edges = run.histogram(name, step)
        want_counts, want_edges = np.histogram(dense, bins=9, range=(float(dense.min()), float(dense.max())))
        np.testing.assert_array_equal(counts, want_counts)
        np.testing.assert_allclose(edges, want_edges)


def autograd_record() -> Any:
    return mx.autograd.record()


def test_the_estimator_handler_fits_a_net_with_a_sparse_embedding_gradient(tmp_path: Path) -> None:
    from mxnet.gluon.contrib.estimator import Estimator

    tok, y = _tokens(160)
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(tok, y), batch_size=32)
    net = _embedding_net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    handler = TripwireHandler(out_dir=str(tmp_path / "est"), rules=["default"], save_interval=2,
                              collections={"gradients": {"reductions": ["l2", "zero_fraction"]}})
    est.fit(data, epochs=2, event_handlers=[handler])
    run = tripwire.open_run(tmp_path / "est")
    assert run.status == "complete"
    assert "gradients/0.weight" in run.tensor_names()
    zero_fraction = run.value("gradients/0.weight", "zero_fraction", 0)
    assert 0.0 < zero_fraction < 1.0  # the rows the batch did not touch count as zeros
