"""Trial 28g F1: sparse torch tensors (the gradients of ``nn.Embedding``/``nn.EmbeddingBag(sparse=True)``,
CSR tensors) ended the training at its first save step (``RuntimeError: reshape is not implemented for
sparse tensors``, in the torch backend's packer), in Lightning and in a Session loop. Contract: the
torch backend gives a sparse tensor the reductions of its dense tensor (implicit zeros counted),
its histogram and raw array are those of the dense tensor, and a Lightning fit or a Session loop
with sparse gradients stores them (checked against the dense gradient, computed with torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import tripwire  # noqa: E402
from tripwire import BASIC_REDUCTIONS, NumpyBackend  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations._torch import TorchBackend  # noqa: E402

# thresholds that 0 passes (fraction_gt:-1, fraction_lt:0.25) and that it does not
PARAMETRIC = ["fraction_gt:0.5", "fraction_gt:-1", "fraction_lt:-0.25", "fraction_lt:0.25", "fraction_abs_gt:1.3",
              "fraction_abs_gt:0"]
REDUCTIONS = list(BASIC_REDUCTIONS) + PARAMETRIC

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # numpy's reference on NaN/Inf/empty
              pytest.mark.filterwarnings("ignore::UserWarning")]  # torch: sparse CSR "in beta", invariant checks


def _embedding_grad(seed: int, dtype: Any = torch.float32) -> Any:
    """A real sparse gradient: uncoalesced COO (an index once per use), most rows not stored."""
    torch.manual_seed(seed)
    emb = nn.EmbeddingBag(50, 6, sparse=True).to(dtype)
    ids = torch.randint(0, 50, (4, 5))
    ids[0, :3] = 7  # the same row three times in one bag: duplicate entries to coalesce
    (emb(ids) * torch.randn(4, 6, dtype=dtype)).sum().backward()
    assert emb.weight.grad.is_sparse and not emb.weight.grad.is_coalesced()
    return emb.weight.grad


def _coo(idx: list[list[int]], values: list[float], shape: tuple[int, ...], dtype: Any = torch.float32) -> Any:
    return torch.sparse_coo_tensor(torch.tensor(idx, dtype=torch.int64).reshape(len(shape), -1),
                                   torch.tensor(values, dtype=dtype), shape)


def _sparse_tensors() -> list[Any]:
    g = torch.Generator().manual_seed(3)
    hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 3, 3]]), torch.randn(3, 4, generator=g), (5, 4))  # dup row 3
    full = torch.randn(2, 3, generator=g)
    full[0, 1] = 0.0  # an explicit zero, stored
    csr_src = torch.randn(6, 7, generator=g) * (torch.rand(6, 7, generator=g) > 0.6)
    return [
        _embedding_grad(0),
        _embedding_grad(1, torch.float64),
        hybrid,
        _coo([[0, 1], [1, 2]], [-2.0, -3.0], (3, 4)),  # all stored values negative: max is an implicit 0
        _coo([[0, 1], [1, 2]], [2.0, 3.0], (3, 4)),  # all positive: min is an implicit 0
        _coo([[], []], [], (3, 4)),  # no stored value: all implicit zeros
        full.to_sparse(),  # every element stored: no implicit zero
        _coo([[0, 1, 2], [1, 2, 0]], [float("nan"), 1.0, -1.0], (3, 4)),
        _coo([[0, 1], [1, 2]], [float("inf"), -5.0], (3, 4)),
        _coo([[0, 2], [1, 2]], [1.5, -0.5], (3, 4), torch.float16),
        _coo([[0, 2], [1, 2]], [1.5, -0.5], (3, 4), torch.bfloat16),
        _coo([[0, 2], [1, 2]], [3, -2], (3, 4), torch.int64),
        _coo([[0, 2], [1, 2]], [True, False], (3, 4), torch.bool),
        _coo([[], []], [], (0, 4)),  # empty
        (torch.randn(4, 4, generator=g) * 1e6 + 1e7).to_sparse(),  # a large mean: the variance two-pass
        csr_src.to_sparse_csr(),
        csr_src.to_sparse_csc(),
        csr_src.to_sparse_bsr((2, 7)),
    ]


def _reference(t: Any) -> np.ndarray:
    """The dense tensor on the host, as numpy's reference reads it (bf16 -> float32)."""
    d = t.detach().to_dense()
    return (d.float() if d.dtype == torch.bfloat16 else d).numpy()


def _tolerance(t: Any) -> tuple[float, float]:
    if t.dtype == torch.float64 or not t.is_floating_point():
        return 1e-12, 0.0
    return 1e-6, 1e-7 * float(np.sqrt(np.sum(_reference(t).astype(np.float64) ** 2)))


def test_sparse_reductions_are_those_of_the_dense_tensor() -> None:
    tensors = _sparse_tensors()
    got = TorchBackend().reduce(tensors, REDUCTIONS)
    want = NumpyBackend().reduce([_reference(t) for t in tensors], REDUCTIONS)
    problems = []
    for i, t in enumerate(tensors):
        rtol, atol = _tolerance(t)
        for j, r in enumerate(REDUCTIONS):
            if not np.isclose(got[i, j], want[i, j], rtol=rtol, atol=atol, equal_nan=True):
                problems.append((i, str(t.layout), str(t.dtype), r, got[i, j], want[i, j]))
    assert not problems


def test_sparse_beside_dense_tensors_in_one_call() -> None:
    """Sparse tensors among dense ones and one-element ones, in several groups (one reduced in two):
    every row as numpy's on its dense tensor, the dense rows untouched by the sparse ones."""
    g = torch.Generator().manual_seed(5)
    sp, sp2 = _embedding_grad(2), _coo([[0, 1], [1, 2]], [-2.0, 4.0], (3, 4))
    groups = [
        ([torch.randn(300, generator=g), sp, torch.tensor(2.5), sp2], ["l2", "mean", "min", "zero_fraction"]),
        ([sp, torch.randn(7, generator=g)], ["max", "std", "fraction_gt:-1", "numel"]),
        ([torch.tensor(1.0), sp2], ["sum"]),
    ]
    out = TorchBackend().reduce_groups(groups)
    for (tensors, reductions), got in zip(groups, out):
        want = NumpyBackend().reduce([_reference(t) if t.layout != torch.strided else t.numpy() for t in tensors],
                                     reductions)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("live", [False, True])
def test_sparse_in_a_step_reduced_in_the_background(monkeypatch: pytest.MonkeyPatch, live: bool) -> None:
    """A step large enough for the background thread (a big dense tensor) that holds a sparse one too:
    the sparse tensor is reduced on the calling thread, the rest in the background, both right."""
    monkeypatch.setattr(torch_module, "background_allowed", lambda: True)
    big = torch.randn(torch_module.BACKGROUND_MIN + 10, generator=torch.Generator().manual_seed(1))
    sp = _embedding_grad(4)
    groups = [([big, sp], ["l2", "mean", "abs_max", "zero_fraction", "nonfinite_count"])]
    backend = TorchBackend()
    try:
        later = backend.reduce_groups_async(groups, live=live)
        assert later is not None  # (the background path is the one tested)
        if live:
            assert backend.fence() == []
        got = later()[0]
    finally:
        backend.close()
    want = NumpyBackend().reduce([big.numpy(), _reference(sp)], groups[0][1])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_sparse_histogram_and_raw_array_are_the_dense_ones() -> None:
    backend = TorchBackend()
    for t in (_embedding_grad(6), _coo([[0, 1], [1, 2]], [-2.0, 4.0], (3, 4)), _sparse_tensors()[-3]):
        dense = _reference(t)
        np.testing.assert_array_equal(backend.to_numpy(t), dense)
        for value_range in (None, (-1.0, 1.0)):
            counts, edges = backend.histogram(t, 12, value_range)
            want_counts, want_edges = NumpyBackend().histogram(dense, 12, value_range)
            np.testing.assert_array_equal(counts, want_counts)
            np.testing.assert_array_equal(edges, want_edges)
            assert counts.sum() == (dense.size if value_range is None else np.sum(np.abs(dense) <= 1.0))


# ------------------------------------------------------------------------- real trainings
GRAD_REDUCTIONS = ["l2", "mean", "std", "min", "max", "abs_mean", "abs_max", "zero_fraction", "nonfinite_count",
                   "fraction_abs_gt:0.001", "histogram", "raw"]


def _torch_reductions(d: Any) -> dict[str, float]:
    """The dense gradient's reductions, computed with torch (float64)."""
    d = d.double()
    return {"l2": float(d.norm()), "mean": float(d.mean()), "std": float(d.std(unbiased=False)),
            "min": float(d.min()), "max": float(d.max()), "abs_mean": float(d.abs().mean()),
            "abs_max": float(d.abs().max()), "zero_fraction": float((d == 0).double().mean()),
            "nonfinite_count": float((~torch.isfinite(d)).sum()),
            "fraction_abs_gt:0.001": float((d.abs() > 0.001).double().mean())}


def _check_stored(run: Any, name: str, dense_by_step: dict[int, Any], steps: list[int]) -> None:
    assert steps
    for step in steps:
        d = dense_by_step[step]
        assert float((d == 0).double().mean()) > 0.5  # (most rows of the table are implicit zeros)
        for reduction, want in _torch_reductions(d).items():
            got = run.value(name, reduction, step, "train")
            assert got == pytest.approx(want, rel=1e-5, abs=1e-9), (step, reduction)
        np.testing.assert_array_equal(run.tensor(name).value(step), d.numpy())
        counts, edges = run.tensor(name).histogram(step)
        want_counts, want_edges = np.histogram(d.numpy(), bins=len(counts), range=(edges[0], edges[-1]))
        np.testing.assert_array_equal(counts, want_counts)
        assert counts.sum() == d.numel()


def _bags(n: int = 256) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 400, (n, 5), generator=g)
    return ids, (ids.sum(1) % 2)


def test_session_loop_with_sparse_embedding_gradients(tmp_path: Path) -> None:
    """The README's hand loop (trial 28g's repro_sparse.py session), every gradient offered: the
    sparse one is stored with its dense tensor's reductions, histogram and raw array."""
    torch.manual_seed(0)
    emb, head = nn.EmbeddingBag(400, 16, sparse=True), nn.Linear(16, 2)
    params = {"emb.weight": emb.weight, "head.weight": head.weight, "head.bias": head.bias}
    opt = torch.optim.SGD(list(params.values()), lr=0.1)
    ids, y = _bags()
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"],
                               save_interval=3, collections={"losses": None, "gradients": {"reductions": GRAD_REDUCTIONS}})
    session.set_planned_steps(16)
    dense: dict[int, Any] = {}
    for step in range(16):
        x, t = ids[step * 16:(step + 1) * 16], y[step * 16:(step + 1) * 16]
        loss = F.cross_entropy(head(emb(x)), t)
        opt.zero_grad()
        loss.backward()
        assert emb.weight.grad.is_sparse
        plan = session.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        if plan.wants("gradients"):
            dense[step] = emb.weight.grad.to_dense().clone()
            for name, p in params.items():
                plan.add(f"gradients/{name}", p.grad, "gradients")
        session.end_step()
        opt.step()
    session.close()
    assert session.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    steps = run.steps("train")
    assert sorted(dense) == [s for s in steps if s % 3 == 0] == [0, 3, 6, 9, 12, 15]
    _check_stored(run, "gradients/emb.weight", dense, sorted(dense))


class _SparseBag(L.LightningModule):
    """trial 28g's repro: EmbeddingBag(sparse=True) + a head, plain SGD (which takes sparse gradients).
    Notes the dense gradient and the weights around each optimizer step, for the reference."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.head = nn.EmbeddingBag(400, 16, sparse=True), nn.Linear(16, 2)
        self.dense: dict[int, Any] = {}
        self.before: dict[int, Any] = {}
        self.after: dict[int, Any] = {}

    def training_step(self, batch: Any, i: int) -> Any:
        x, t = batch
        return F.cross_entropy(self.head(self.emb(x)), t)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def _note(self) -> None:
        self.dense[self.global_step] = self.emb.weight.grad.to_dense().clone()
        self.before[self.global_step] = self.emb.weight.detach().clone()

    def on_train_batch_end(self, outputs: Any, batch: Any, i: int) -> None:
        self.after[self.global_step - 1] = self.emb.weight.detach().clone()


class _NotesAfterBackward(_SparseBag):
    def on_after_backward(self) -> None:  # (the callback offers the gradient itself: no copy)
        self._note()


class _NotesBeforeStep(_SparseBag):
    def on_before_optimizer_step(self, optimizer: Any) -> None:  # (the callback copies the gradients)
        self._note()


@pytest.mark.parametrize("module", [_NotesAfterBackward, _NotesBeforeStep])
def test_lightning_fit_with_sparse_embedding_gradients(tmp_path: Path, module: type) -> None:
    """A tiny real fit (trial 28g's repro_sparse.py lightning) with the default rules and stop_training:
    it trains to the end; the sparse gradient is stored with its dense tensor's reductions, histogram
    and raw array (offered as it is, and copied where the gradients may change before the batch end),
    and the embedding's update ratio (its weights are dense) is the weights' own."""
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    torch.manual_seed(0)
    ids, y = _bags()
    model = module()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["log", "stop_training"],
                          save_interval=2, collections={"losses": None, "optimizer": None,
                                                        "gradients": {"reductions": GRAD_REDUCTIONS}})
    trainer = L.Trainer(max_epochs=2, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, DataLoader(TensorDataset(ids, y), batch_size=32))
    assert trainer.global_step == 16 and cb.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    steps = [s for s in run.steps("train") if s % 2 == 0]
    assert steps == list(range(0, 16, 2))
    _check_stored(run, "gradients/emb.weight", model.dense, steps)
    ratio_steps, ratios = run.series("update_ratio/emb.weight", "raw", "train")
    assert ratio_steps.tolist() == steps
    for step, ratio in zip(steps, ratios):
        before, after = model.before[step].double(), model.after[step].double()
        assert 0 < ratio == pytest.approx(float((after - before).norm() / before.norm()), rel=1e-4)
