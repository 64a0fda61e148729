"""The reduction process (``integrations/_torch.py``'s ``ReduceProcess``, ``_reduce_worker.py``):
the background reduction's statistics computed by a child process over shared memory give the
figures of the in-process path, for every statistic and the values that need care; the process
ends with its backend, and any failure of it (killed, an error, no start) costs one WARNING and
nothing else: the step and the rest of the training are reduced in process."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations import _reduce_worker as worker  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations._torch import TorchBackend  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.skipif(not torch_module.ReduceProcess.supported(), reason="Linux only (memfd, SOCK_SEQPACKET)")]

ALL = ["l2", "mean", "std", "variance", "min", "max", "abs_mean", "abs_max", "abs_min", "abs_std", "l1",
       "zero_fraction", "positive_fraction", "nonfinite_count", "fraction_gt:0.5", "fraction_lt:-0.25",
       "fraction_abs_gt:1.5", "numel", "sum"]


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    monkeypatch.setattr(torch_module, "REDUCE_PROCESS", True)


def _ready(backend: TorchBackend, groups: list) -> torch_module.ReduceProcess:
    """The backend's reduction process, started by a first step and waited for."""
    backend.reduce_groups_async(groups)()
    proc = backend._scratch.process
    assert proc is not None and proc.wait_ready(60), None if proc is None else proc.state
    return proc


def _groups(seed: int) -> list[tuple[list, list[str]]]:
    g = torch.Generator().manual_seed(seed)
    special = torch.randn(700, generator=g)
    special[[3, 400]] = float("inf")
    special[5] = -float("inf")
    special[9] = float("nan")
    tiny = torch.randn(300, generator=g) * 1e-22  # squares under float32's normal range: recomputed
    huge = torch.randn(300, generator=g) * 1e20  # squares overflow float32: recomputed
    offset = 1e4 + torch.randn(513, generator=g) * 1e-2  # one-pass variance inaccurate: two passes
    signed_zero = torch.zeros(257)
    signed_zero[::2] = -0.0
    return [
        ([torch.randn(33, 65, generator=g), special, tiny, huge, offset, signed_zero, torch.zeros(256),
          torch.randn(1000, generator=g).to(torch.bfloat16), torch.randint(-3, 4, (70,), generator=g),
          torch.randn(90, generator=g).double(), torch.tensor(0.25)], ALL),
        ([torch.relu(torch.randn(300, generator=g)), torch.tensor(2.0)], ["mean", "zero_fraction", "l2"]),
    ]


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for a, b in zip(got, want):
        assert a.shape == b.shape
        assert np.array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_the_process_gives_the_in_process_figures_for_every_statistic(background: None, seed: int) -> None:
    want = TorchBackend().reduce_groups(_groups(seed))
    backend = TorchBackend()
    proc = _ready(backend, _groups(seed))
    calls: list[int] = []
    original = proc.reduce

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(*args)

    proc.reduce = counted  # type: ignore[method-assign]
    for _ in range(2):  # (the second step reuses the shared buffers)
        _close(backend.reduce_groups_async(_groups(seed))(), want)
    assert len(calls) >= 2 and proc.state == "ready"
    backend.close()


def test_reduce_tensors_gives_each_statistic_per_tensor_as_float64_numpy_does() -> None:
    rng = np.random.default_rng(0)
    sizes = (300, 256, 1, 700)
    flat = np.zeros(sum(-(-n // 256) * 256 for n in sizes), dtype=np.float32)
    starts = np.concatenate(([0], np.cumsum([-(-n // 256) * 256 for n in sizes])[:-1]))
    for start, n in zip(starts, sizes):
        flat[start:start + n] = rng.standard_normal(n)
    flat[starts[3] + 10] = np.nan
    x = flat.reshape(-1, 256)
    chunk_of = np.concatenate(([0], np.cumsum([-(-n // 256) for n in sizes])))
    end = int(chunk_of[-1])  # (7 chunks)
    ops = [("sum", 0, end, 0.0, 0, 4), ("sq", 0, end, 0.0, 0, 4), ("abs", 0, end, 0.0, 0, 4),
           ("nonzero", 0, end, 0.0, 0, 4), ("positive", 0, end, 0.0, 0, 4), ("gt", 2, end, 0.5, 1, 4),
           ("lt", 0, end, -0.25, 0, 4), ("abs_gt", 0, end, 1.5, 0, 4), ("min", 0, end, 0.0, 0, 4),
           ("max", 0, end, 0.0, 0, 4), ("abs_min", 0, end, 0.0, 0, 4)]
    out = np.full(len(ops) * len(sizes), -1.0)
    worker.reduce_tensors(x.copy(), sizes, ops, out)
    got = out.reshape(len(ops), len(sizes))
    for k, (start, n) in enumerate(zip(starts, sizes)):
        v = flat[start:start + n].astype(np.float64)
        expect = {"sum": v.sum(), "sq": (v * v).sum(), "abs": np.abs(v).sum(), "nonzero": np.count_nonzero(v),
                  "positive": (v > 0).sum(), "gt": (v > 0.5).sum(), "lt": (v < -0.25).sum(),
                  "abs_gt": (np.abs(v) > 1.5).sum(), "min": v.min(), "max": v.max(), "abs_min": np.abs(v).min()}
        for j, (name, *_, k0, k1) in enumerate(ops):
            if not k0 <= k < k1:
                assert got[j, k] == 0.0, (name, k)  # outside the statistic's tensors
                continue
            # (the zero padding of a chunk is counted among the zeros, by the caller's columns: a count
            # of elements at or below a positive threshold is not read from here)
            np.testing.assert_allclose(got[j, k], expect[name], rtol=1e-6, atol=1e-5, err_msg=f"{name} of tensor {k}")


def test_the_process_ends_with_its_backend_in_a_session_of_its_own(background: None) -> None:
    backend = TorchBackend()
    proc = _ready(backend, _groups(0))
    pid = proc._proc.pid
    assert os.getsid(pid) == pid != os.getsid(0)  # a Ctrl-C at the terminal is the training's, not its
    backend.close()
    assert proc.state == "dead" and proc._proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # a later step starts another one
    _close(backend.reduce_groups_async(_groups(0))(), TorchBackend().reduce_groups(_groups(0)))
    assert backend._scratch.process is not None and backend._scratch.process is not proc
    backend.close()


def test_a_killed_process_costs_one_warning_and_no_figure(background: None, caplog: pytest.LogCaptureFixture) -> None:
    want = TorchBackend().reduce_groups(_groups(1))
    backend = TorchBackend()
    proc = _ready(backend, _groups(1))
    _close(backend.reduce_groups_async(_groups(1))(), want)  # (its buffers shared)
    os.kill(proc._proc.pid, signal.SIGKILL)
    proc._proc.wait(timeout=10)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for _ in range(3):
            _close(backend.reduce_groups_async(_groups(1))(), want)
    said = [r.getMessage() for r in caplog.records if "reduction process" in r.getMessage()]
    assert len(said) == 1 and "ended (exit code -9)" in said[0] and "computed in the training process from now on" in said[0], said
    assert proc.state == "dead" and backend._scratch.process is proc  # (not started again for this training)
    backend.close()


def test_an_error_in_the_process_is_named_and_the_step_reduced_in_process(background: None,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    want = TorchBackend().reduce_groups(_groups(2))
    backend = TorchBackend()
    proc = _ready(backend, _groups(2))
    original = proc.reduce

    def unknown_buffer(buf_key, *args):  # type: ignore[no-untyped-def]
        return original(buf_key + 1000, *args)  # a key the process never mapped: a KeyError there

    proc.reduce = unknown_buffer  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _close(backend.reduce_groups_async(_groups(2))(), want)
    said = [r.getMessage() for r in caplog.records if "reduction process" in r.getMessage()]
    assert len(said) == 1 and "failed: KeyError" in said[0], said
    assert proc.state == "dead" and proc._proc.returncode is not None  # killed, reaped
    backend.close()


def test_a_process_that_cannot_start_is_named_and_the_thread_reduces(background: None, monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    want = TorchBackend().reduce_groups(_groups(0))
    backend = TorchBackend()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for _ in range(2):
            _close(backend.reduce_groups_async(_groups(0))(), want)
    said = [r.getMessage() for r in caplog.records if "reduction process" in r.getMessage()]
    assert len(said) == 1 and "could not start" in said[0] and "/nonexistent/python" in said[0], said
    assert backend._scratch.process.state == "dead"
    backend.close()


def test_a_forked_child_leaves_the_parents_process_alone(background: None) -> None:
    want = TorchBackend().reduce_groups(_groups(0))
    backend = TorchBackend()
    proc = _ready(backend, _groups(0))
    pid = os.fork()
    if pid == 0:  # the child: the parent's process is not its own (nothing sent, nothing killed)
        code = 0
        try:
            code = 0 if proc.state == "dead" and proc._proc is None else 3
            child = TorchBackend()  # its own steps go to a process of its own, or to its thread
            got = child.reduce_groups_async(_groups(0))()
            code = code or (0 if all(np.allclose(a, b, rtol=2e-6, atol=1e-6, equal_nan=True) for a, b in zip(got, want)) else 4)
            child.close()
        except BaseException:
            code = 5
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    time.sleep(0.1)
    assert proc.state == "ready" and proc._proc.poll() is None
    _close(backend.reduce_groups_async(_groups(0))(), want)  # still answering the parent
    backend.close()


@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_blocks_of_chunks_give_the_statistics_of_the_whole_buffer(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    # the process reduces a bucket a few chunks at a time (each block stays in the cache while every
    # statistic reads it): tensors and padding across block boundaries, min/max padding and abs_min's
    rng = np.random.default_rng(1)
    sizes = (300, 1, 513, 256, 1000, 7)
    chunks = [-(-n // 256) for n in sizes]
    flat = np.zeros(sum(chunks) * 256, dtype=np.float32)
    starts = np.concatenate(([0], np.cumsum(chunks)[:-1])) * 256
    for start, n in zip(starts, sizes):
        flat[start:start + n] = rng.standard_normal(n) - 3.0  # (all negative-ish: padding must not be the max)
    flat[starts[4] + 999] = np.nan
    chunk_of = np.concatenate(([0], np.cumsum(chunks)))
    ops = [(name, int(chunk_of[k0]), int(chunk_of[k1]), thr, k0, k1) for name, thr, k0, k1 in [
        ("sum", 0.0, 0, 6), ("sq", 0.0, 1, 6), ("abs", 0.0, 0, 6), ("nonzero", 0.0, 0, 6), ("abs_gt", 3.5, 0, 4),
        ("lt", -3.0, 2, 6), ("min", 0.0, 0, 6), ("max", 0.0, 0, 6), ("abs_min", 0.0, 0, 6)]]
    whole = np.empty(len(ops) * len(sizes))
    worker.reduce_tensors(flat.reshape(-1, 256).copy(), sizes, ops, whole)
    monkeypatch.setattr(worker, "BLOCK", block)
    blocked = np.empty(len(ops) * len(sizes))
    worker.reduce_tensors(flat.reshape(-1, 256).copy(), sizes, ops, blocked)
    np.testing.assert_array_equal(blocked, whole)
    got = whole.reshape(len(ops), len(sizes))
    for k, (start, n) in enumerate(zip(starts, sizes)):
        v = flat[start:start + n].astype(np.float64)
        np.testing.assert_allclose(got[6, k], v.min())  # (not a padding zero)
        np.testing.assert_allclose(got[7, k], v.max())
        np.testing.assert_allclose(got[8, k], np.abs(v).min())
        assert got[3, k] == np.count_nonzero(v)


def test_the_child_imports_nothing_from_the_working_directory(background: None, tmp_path,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # (trial 39a: BOOT imported socket before it took the working directory off sys.path: a socket.py
    # there ran in the child)
    for name in ("socket", "numpy", "mmap", "pickle"):
        (tmp_path / f"{name}.py").write_text(f"open({str(tmp_path / ('RAN_' + name))!r}, 'w').close()\n"
                                             f"raise ImportError('the user\\'s {name}.py')\n")
    monkeypatch.chdir(tmp_path)
    backend = TorchBackend()
    proc = _ready(backend, _groups(0))
    _close(backend.reduce_groups_async(_groups(0))(), TorchBackend().reduce_groups(_groups(0)))
    assert proc.state == "ready"
    backend.close()
    assert not list(tmp_path.glob("RAN_*"))


def test_warm_up_starts_the_process_only_where_large_cpu_steps_will_come(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    big = [torch.zeros(torch_module.BACKGROUND_MIN // 2)]

    def collections(*names: str) -> list:
        return list(tripwire.load_config({"collections": list(names)}).collections.values())

    custom = list(tripwire.load_config({"collections": {"mine": {"include": ["fc.*"], "kinds": None, "reductions": ["l2"]}}})
                  .collections.values())  # (kinds: null: any kind)
    for tensors, cols, started in [(big, collections("weights", "losses"), True), (big, collections("activations"), True),
                                   (big, custom, True),
                                   (big, collections("losses", "metrics", "optimizer"), False),  # (scalars only)
                                   ([torch.zeros(100)], collections("weights"), False)]:  # (too few elements to pay)
        backend = TorchBackend()
        assert backend.warm_up(tensors, cols) is started
        assert (backend._scratch.process is not None) is started
        if started:  # not waited for: the first steps go on meanwhile; ready soon after
            assert backend._scratch.process.wait_ready(60)
            assert backend.warm_up(tensors, cols) is False  # (one process a backend)
        backend.close()
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", 1 << 20)  # no CPU free: no background at all
    assert TorchBackend().warm_up(big, collections("weights")) is False


def test_a_lightning_fit_that_saves_tensors_starts_its_process_before_the_first_batch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    L = pytest.importorskip("lightning")
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    seen: list[object] = []

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(400, 200), nn.ReLU(), nn.Linear(200, 2))

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if batch_idx == 0:
                seen.append(cb._session.backend._scratch.process)
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.01)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (a CPU free for the background, on a machine of two or more)
    try:
        if not torch_module.background_allowed():
            pytest.skip("this machine has a single CPU: no background reduction")
        data = TensorDataset(torch.randn(32, 400), torch.randint(0, 2, (32,)))
        cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["weights", "gradients", "losses"])
        L.Trainer(max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, callbacks=[cb]).fit(Net(), DataLoader(data, batch_size=16))
    finally:
        torch.set_num_threads(threads)
    assert len(seen) == 1 and isinstance(seen[0], torch_module.ReduceProcess)  # (80k parameters: started at the fit's start)
    assert seen[0].state == "dead" and seen[0]._proc.returncode is not None  # ended with the fit's session
