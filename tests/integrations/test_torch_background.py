"""Save steps reduced on a background thread (``TorchBackend.reduce_groups_async``): the same
figures as the synchronous path, taken from a copy made before training goes on; the session
writes such a step and runs its rules when the next step ends, and loses nothing at flush, close,
state_dict or a crash of the background work."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire import FunctionRule, Session  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations._torch import TorchBackend  # noqa: E402

REDUCTIONS = ["l2", "mean", "std", "min", "max", "abs_mean", "abs_max", "abs_min", "zero_fraction",
              "nonfinite_count", "variance", "abs_std", "fraction_gt:0.5", "fraction_abs_gt:1.5", "numel"]

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(params=["thread", "process"])
def background(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every step with a tensor of more than one element goes to the background thread; its
    statistics computed there with torch (``thread``) or by the reduction process (``process``,
    started and waited for at the first such step, so that every step uses it)."""
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))  # whatever this machine's CPUs
    use_process(monkeypatch, request.param == "process")
    return str(request.param)


def use_process(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """The background reduction's statistics by the reduction process, ready from the first step
    (``on``), or on the background thread."""
    monkeypatch.setattr(torch_module, "REDUCE_PROCESS", on)
    if on:
        assert torch_module.ReduceProcess.supported()  # (Linux: where the tests run)

        class Ready(torch_module.ReduceProcess):
            def __init__(self) -> None:
                super().__init__()
                assert self.wait_ready(60), self.state

        monkeypatch.setattr(torch_module, "ReduceProcess", Ready)


def assert_same(got: list[np.ndarray], want: list[np.ndarray], background: str) -> None:
    """Equal to the synchronous path's results: exactly on the thread (the same torch calls); by
    the process to float32's resolution (numpy's per-chunk sums round differently from torch's:
    a mean within 1e-6 of the tensor's norm, anything else within 2e-6 relative)."""
    for a, b in zip(got, want):
        if background == "thread":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def _groups(seed: int) -> list[tuple[list, list[str]]]:
    g = torch.Generator().manual_seed(seed)
    nan = torch.randn(300, generator=g)
    nan[7] = float("nan")  # a non-finite count needs an exact recount (a repair)
    shared = torch.randn(40, 50, generator=g)
    return [
        ([shared, torch.randn(1000, generator=g).to(torch.bfloat16), 1000 + torch.randn(500, generator=g) * 1e-3,
          nan, torch.randint(-3, 4, (70,), generator=g), torch.tensor(0.25)], REDUCTIONS),
        ([shared, torch.relu(torch.randn(257, generator=g)), torch.tensor(2.0)], ["mean", "zero_fraction", "l2"]),
    ]


def test_small_steps_and_default_thresholds_stay_on_the_calling_thread() -> None:
    backend = TorchBackend()
    assert backend.reduce_groups_async(_groups(0)) is None  # a few thousand elements: not worth a thread
    assert backend.reduce_groups_async([([torch.tensor(1.0)], ["mean"])]) is None
    assert torch_module.BACKGROUND_MIN <= 1 << 20 <= torch_module.BACKGROUND_MAX


def test_no_background_thread_where_torch_takes_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "_usable_cpus", lambda: 4)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(4)  # every CPU: a thread of ours would stall torch's parallel regions
        assert not torch_module.background_allowed()
        assert TorchBackend().reduce_groups_async(_groups(0)) is None
        torch.set_num_threads(3)  # one CPU free (BACKGROUND_FREE_CPUS = 1)
        assert torch_module.background_allowed()
        backend = TorchBackend()
        result = backend.reduce_groups_async(_groups(0))
        assert result is not None
        result()
        backend.close()
    finally:
        torch.set_num_threads(threads)


def test_a_step_left_to_the_calling_thread_works_out_its_program_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    original = torch_module._Program.__init__
    monkeypatch.setattr(torch_module._Program, "__init__", lambda self, g: built.append(1) or original(self, g))
    backend = TorchBackend()
    groups = _groups(0)
    assert backend.reduce_groups_async(groups) is None  # too small for a thread: the session reduces it now
    got = backend.reduce_groups(groups)
    assert len(built) == 1
    other = _groups(1)  # another list of the same arrangement: the cached program, its own values
    for a, b in zip(backend.reduce_groups(other), TorchBackend().reduce_groups(_groups(1))):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[0], backend.reduce_groups(other)[0])


@pytest.mark.parametrize("seed", range(3))
def test_background_results_equal_the_synchronous_ones_and_ignore_later_changes(background: str, seed: int) -> None:
    groups = _groups(seed)
    want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
    backend = TorchBackend()
    threads = torch.get_num_threads()
    result = backend.reduce_groups_async(groups)
    assert result is not None
    for tensors, _ in groups:  # training goes on: an optimizer step changes the tensors in place
        for t in tensors:
            t.mul_(-3) if t.dtype != torch.bool else None
    got = result()
    assert_same(got, want, background)
    again = backend.reduce_groups_async([([t.clone() for t in ts], rs) for ts, rs in _groups(seed)])
    assert_same(again(), want, background)  # (the next step reuses the same buffers)
    proc = backend._scratch.process
    assert (proc is not None and proc.state == "ready") == (background == "process")
    backend.close()
    if proc is not None:  # the process ended with the backend
        assert proc.state == "dead" and proc._proc.poll() is not None
    assert torch.get_num_threads() == threads  # the background thread's own setting stays its own


def _weights_session(tmp_path: Path, fired: list[int], **kw) -> Session:
    def big_mean(history, step, mode):
        got = history.latest("fc.weight", "mean", mode)
        if got is not None and got[0] == step and got[1] > 1.0:
            fired.append(step)
            return f"mean {got[1]:.3g} > 1"
        return None

    session = Session(out_dir=tmp_path / "run", backend=TorchBackend(), save_interval=1,
                      collections=["weights", "losses"],
                      rules=[FunctionRule(big_mean, name="big_mean", actions=["stop_training"])], **kw)
    session.background_reduction = True  # (a hand-written loop's opt-in; the framework callbacks' default)
    return session


def _step(session: Session, step: int, w: torch.Tensor, value: float) -> tripwire.Decision:
    plan = session.begin_step("train", step)
    w.fill_(value)  # (the same tensor every step, changed in place, as a weight is)
    plan.add("fc.weight", w, "weights")
    plan.add("loss", torch.tensor(float(step)), "losses")
    return session.end_step()


def test_session_runs_a_background_steps_rules_when_the_next_step_ends(background: str, tmp_path: Path) -> None:
    fired: list[int] = []
    s = _weights_session(tmp_path, fired)
    w = torch.empty(64, 64)
    decisions = [_step(s, step, w, value) for step, value in enumerate([0.0, 0.5, 2.0, 3.0, 0.0])]
    # step 2's figures are ready when step 3 ends: its finding (step 2) stops training then
    assert [bool(d) for d in decisions] == [False, False, False, True, True]  # (held after it: trial 26c)
    assert decisions[3].stop and decisions[3].stopped_by is not None and decisions[3].stopped_by.step == 2
    assert fired == [2]
    s.close()
    run = tripwire.open_run(tmp_path / "run")
    steps, means = run.tensor("fc.weight").series("mean")
    assert list(steps) == [0, 1, 2, 3, 4]  # every step written, each with its own values
    np.testing.assert_allclose(means, [0.0, 0.5, 2.0, 3.0, 0.0])
    assert [f.step for f in run.findings] == [2] and run.status == "stopped"


def test_close_flush_and_state_dict_settle_the_step_in_flight(background: str, tmp_path: Path) -> None:
    fired: list[int] = []
    s = _weights_session(tmp_path, fired)
    w = torch.empty(64, 64)
    _step(s, 0, w, 0.0)
    s.flush()
    assert s.history.latest("fc.weight", "mean", "train", 0) is not None
    _step(s, 1, w, 5.0)
    state = s.state_dict()  # the checkpoint holds the rule state after step 1
    assert fired == [1] and state["fired"] == [0]
    _step(s, 2, w, 0.0)
    s.close()  # the last step's record and rules
    assert list(tripwire.open_run(tmp_path / "run").tensor("fc.weight").series("mean")[0]) == [0, 1, 2]
    assert [f.step for f in s.findings] == [1]


def test_last_step_finding_is_recorded_at_close(background: str, tmp_path: Path) -> None:
    fired: list[int] = []
    s = _weights_session(tmp_path, fired)
    w = torch.empty(64, 64)
    for step, value in enumerate([0.0, 0.0, 4.0]):
        assert not _step(s, step, w, value)
    s.close()
    # (judged at close(), the training over: recorded and acted on, and no stop, trial 29j F2)
    assert fired == [2] and s.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    assert [f.step for f in run.findings] == [2] and run.status == "complete"


def test_a_failure_in_the_background_surfaces_at_the_next_step(background: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    s = _weights_session(tmp_path, [])
    w = torch.empty(64, 64)
    _step(s, 0, w, 0.0)

    def broken(self, scratch):  # type: ignore[no-untyped-def]
        raise RuntimeError("reduction failed")

    monkeypatch.setattr(torch_module._Bucket, "compute", broken)
    _step(s, 1, w, 0.0)  # handed to the background thread
    with pytest.raises(RuntimeError, match="reduction failed"):
        _step(s, 2, w, 0.0)
    monkeypatch.undo()
    s.close("failed")
    run = tripwire.open_run(tmp_path / "run")
    assert list(run.tensor("fc.weight").series("mean")[0]) == [0]  # what was written stays readable
    assert run.status == "failed"


@pytest.mark.parametrize("process", [False, True])
@pytest.mark.parametrize("automatic", [True, False])
def test_lightning_fit_with_background_steps_matches_the_synchronous_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        automatic: bool, process: bool) -> None:
    L = pytest.importorskip("lightning")
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
            self.automatic_optimization = automatic

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            if not automatic:
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(96, 8, generator=g), torch.randint(0, 2, (96,), generator=g))

    def fit(out: Path) -> tripwire.Run:
        torch.manual_seed(0)
        cb = TripwireCallback(out_dir=out, save_interval=1, collections=["weights", "gradients", "activations", "losses"])
        trainer = L.Trainer(max_steps=12, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, callbacks=[cb], accelerator="cpu")
        trainer.fit(Module(), DataLoader(data, batch_size=8))
        return tripwire.open_run(out)

    sync = fit(tmp_path / "sync")
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    use_process(monkeypatch, process)
    started: list[int] = []
    original = torch_module._Program.start

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started.append(kwargs.get("live", False))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch_module._Program, "start", counted)
    fenced_in: list[str] = []
    fence = torch_module.TorchBackend.fence

    def traced(self):  # type: ignore[no-untyped-def]
        if self._fence is not None:  # the callback's hook that fenced
            frame = sys._getframe(1)
            while not frame.f_code.co_name.startswith("on_"):
                frame = frame.f_back
            fenced_in.append(frame.f_code.co_name)
        return fence(self)

    monkeypatch.setattr(torch_module.TorchBackend, "fence", traced)
    background_run = fit(tmp_path / "background")
    assert len(started) >= 12 and all(started)  # the callback fences: the thread reads the tensors themselves
    # the copy overlaps the next step's forward pass: the fence waits until zero_grad, except under
    # manual optimization, where the module may change anything once the batch starts
    hooks = ["on_before_zero_grad"] if automatic else ["on_train_batch_start"]
    assert len(fenced_in) >= 10 and set(fenced_in[:-1]) == set(hooks), fenced_in
    assert sync.tensor_names() == background_run.tensor_names()
    for name, reductions in [("net.0.weight", ["l2", "std"]), ("gradients/net.0.weight", ["l2", "abs_mean"]),
                             ("net.0/output", ["mean", "zero_fraction"])]:
        for reduction in reductions:
            a_steps, a = sync.tensor(name).series(reduction)
            b_steps, b = background_run.tensor(name).series(reduction)
            assert list(a_steps) == list(b_steps) == list(range(12))
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)  # (a mean near 0: float32's resolution)


@pytest.mark.parametrize("seed", [0, 1])
def test_live_reads_wait_for_the_fence_and_equal_the_synchronous_results(background: str, seed: int) -> None:
    groups = _groups(seed)
    want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
    backend = TorchBackend()
    result = backend.reduce_groups_async(groups, live=True)
    assert result is not None and backend._fence is not None
    backend.fence()  # the copy is made: training may change the tensors now
    assert backend._fence is None
    for tensors, _ in groups:
        for t in tensors:
            t.mul_(-3)
    assert_same(result(), want, background)
    assert backend._live  # nothing changed before the fence: live reads go on
    again = backend.reduce_groups_async([([t.clone() for t in ts], rs) for ts, rs in _groups(seed)], live=True)
    assert_same(again(), want, background)  # (taking the result fences when the caller did not)
    backend.close()


def test_a_tensor_changed_before_the_fence_is_reduced_again_as_it_is_then(background: str) -> None:
    groups = _groups(0)
    backend = TorchBackend()
    result = backend.reduce_groups_async(groups, live=True)
    assert result is not None
    groups[0][0][0].mul_(-3)  # in place before the fence (the copy may be torn): its version moves
    changed = [([t.clone() for t in ts], rs) for ts, rs in groups]
    assert backend.fence() == [(0, 0)]  # (group, row) of the tensor seen changed
    groups[0][0][1].add_(1)  # training goes on after the fence: the step keeps its values as at the fence
    got = result()
    for a, b in zip(got, TorchBackend().reduce_groups(changed)):
        np.testing.assert_array_equal(a, b)
    assert not backend._live  # from now on the calling thread copies
    later = backend.reduce_groups_async(groups, live=True)
    assert later is not None and backend._fence is None
    want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
    for tensors, _ in groups:
        for t in tensors:
            t.mul_(-3)
    assert_same(later(), want, background)
    backend.close()


def test_inference_tensors_are_copied_on_the_calling_thread(background: str) -> None:
    with torch.inference_mode():
        groups = _groups(0)  # (no version counter: a live read could not tell a change)
        want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
        backend = TorchBackend()
        result = backend.reduce_groups_async(groups, live=True)
        assert result is not None and backend._fence is None
        for tensors, _ in groups:
            for t in tensors:
                t.mul_(-3)
    assert_same(result(), want, background)
    backend.close()


def test_a_step_under_inference_mode_leaves_buffers_that_later_steps_can_write(background: str) -> None:
    # Lightning validates under torch.inference_mode: the buffers its save steps make are kept and
    # written again by the training steps after it, and by the background thread (never in inference mode)
    backend = TorchBackend()
    with torch.inference_mode():
        groups = _groups(0)
        want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
        result = backend.reduce_groups_async(groups)
        assert result is not None
    assert_same(result(), want, background)
    for live in (False, True):
        groups = _groups(1)
        want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
        result = backend.reduce_groups_async(groups, live=live)
        assert result is not None
        assert_same(result(), want, background)
    backend.close()


@pytest.mark.parametrize("process", [False, True])
def test_lightning_validation_steps_in_the_background_match_the_synchronous_run(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch,
                                                                               process: bool) -> None:
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    Module = _small_module(L, validate=True)

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g))
    # validation batches larger than training's: their save steps make the kept buffers first
    val = TensorDataset(torch.randn(96, 8, generator=g), torch.randint(0, 2, (96,), generator=g))

    def fit(out: Path) -> tripwire.Run:
        torch.manual_seed(0)
        cb = TripwireCallback(out_dir=out, collections=["weights", "activations", "losses"],
                              save={"interval": 1, "modes": {"eval": {"interval": 1}}})
        trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, callbacks=[cb], accelerator="cpu", num_sanity_val_steps=0)
        trainer.fit(Module(), DataLoader(data, batch_size=16), DataLoader(val, batch_size=48))
        return tripwire.open_run(out)

    sync = fit(tmp_path / "sync")
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    use_process(monkeypatch, process)
    background_run = fit(tmp_path / "background")
    for mode in ("train", "eval"):
        a_steps, a = sync.tensor("net.0/output").series("mean", mode=mode)
        b_steps, b = background_run.tensor("net.0/output").series("mean", mode=mode)
        assert len(a_steps) > 0 and list(a_steps) == list(b_steps)
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)  # (the process's sums: see assert_same)


def test_a_failure_of_a_live_copy_is_raised_when_the_result_is_taken_never_a_hang(
        background: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("copy failed")

    monkeypatch.setattr(torch_module._Bucket, "own_views", broken)
    backend = TorchBackend()
    result = backend.reduce_groups_async(_groups(0), live=True)
    assert result is not None
    backend.fence()  # returns: the copy's end is signalled whatever happened
    with pytest.raises(RuntimeError, match="copy failed"):
        result()
    backend.close()


def test_the_fence_makes_the_copy_itself_when_the_background_thread_has_not_started(background: str) -> None:
    # a busy machine: the thread has no CPU yet (here: busy with other work); training does not wait for it
    import threading
    from concurrent.futures import ThreadPoolExecutor

    groups = _groups(0)
    want = TorchBackend().reduce_groups([([t.clone() for t in ts], rs) for ts, rs in groups])
    backend = TorchBackend()
    backend._pool = ThreadPoolExecutor(1)
    release = threading.Event()
    backend._pool.submit(release.wait)  # the one background thread is busy
    result = backend.reduce_groups_async(groups, live=True)
    assert result is not None
    backend.fence()  # returns without the background thread: the copy is made here
    for tensors, _ in groups:
        for t in tensors:
            t.mul_(-3)
    release.set()
    assert_same(result(), want, background)
    assert backend._live  # nothing changed before the copy
    backend.close()


@pytest.mark.parametrize("through_data", [False, True])
def test_lightning_a_module_that_changes_weights_after_the_callback_gets_the_steps_own_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, through_data: bool) -> None:
    # WGAN-style clipping in the LightningModule's own on_train_batch_end (it runs after the
    # callbacks'): the step's weights are those the model holds at the step's true end, clipped,
    # every step alike (trial 21a: they were copied at the callback's batch end, before the module
    # clipped them: weights the model never held). A clip through .data (no version counter moves)
    # raced the background thread's copy: each run stored a different mix of clipped and unclipped steps.
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    Module = _small_module(L, clip=0.05, through_data=through_data)

    started = _background_starts(monkeypatch)
    at_end: dict[int, float] = {}  # net.0.weight's max at each step's end, after the module clipped it
    before: dict[int, float] = {}  # ... and before, at the callbacks' batch end

    class Reference(L.Callback):  # listed before tripwire's: its hooks run first
        def on_train_batch_end(self, trainer, pl_module, *args):  # type: ignore[no-untyped-def]
            before[trainer.global_step - 1] = float(pl_module.net[0].weight.detach().max())

        def on_train_batch_start(self, trainer, pl_module, *args):  # type: ignore[no-untyped-def]
            if trainer.global_step:
                at_end[trainer.global_step - 1] = float(pl_module.net[0].weight.detach().max())

        def on_train_end(self, trainer, pl_module):  # type: ignore[no-untyped-def]
            at_end[trainer.global_step - 1] = float(pl_module.net[0].weight.detach().max())

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["weights", "losses"])
    trainer = L.Trainer(max_steps=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[Reference(), cb], accelerator="cpu")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(Module(), DataLoader(data, batch_size=8))
    assert len(started) == 6 and not any(started)  # in the background, from a copy made at the step's end
    run = tripwire.open_run(tmp_path / "run")
    steps, top = run.series("net.0.weight", "max")
    assert list(steps) == list(range(6)) and before[0] > 0.05 and max(at_end.values()) <= 0.05 + 1e-7
    np.testing.assert_allclose(top, [at_end[s] for s in range(6)], rtol=1e-6)
    assert not [r for r in caplog.records if "changed in place" in r.getMessage()]


def test_lightning_a_nan_planted_at_a_batch_start_is_found_at_its_own_step(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the LightningModule's on_train_batch_start (after the callbacks') writes a weight: the step in
    # flight was copied by then (the fence waits at the callback's batch start, not at zero_grad),
    # so step 6 holds its own finite weights and the NaN is step 7's (it was reported at step 6)
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    Module = _small_module(L)

    def on_train_batch_start(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        if self.trainer.global_step == 7:
            with torch.no_grad():
                self.net[0].weight[0, 0] = float("nan")

    Module.on_train_batch_start = on_train_batch_start  # type: ignore[attr-defined]
    started = _background_starts(monkeypatch)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(96, 8, generator=g), torch.randint(0, 2, (96,), generator=g))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["weights", "losses"],
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    trainer = L.Trainer(max_steps=12, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], accelerator="cpu")
    trainer.fit(Module(), DataLoader(data, batch_size=8))
    assert started and all(started)  # live reads: nothing of the user's runs after the callback's batch end
    assert cb.stopped_by is not None and cb.stopped_by.step == 7
    nonfinite = tripwire.open_run(tmp_path / "run").series("net.0.weight", "nonfinite_count")
    assert dict(zip(nonfinite[0].tolist(), nonfinite[1].tolist()))[6] == 0


def _background_starts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every step with a tensor goes to the background thread, whatever this machine's CPUs; the
    list returned gets, per step started there, whether it read the tensors themselves (live)."""
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    started: list[bool] = []
    original = torch_module._Program.start
    monkeypatch.setattr(torch_module._Program, "start",
                        lambda self, *a, **kw: started.append(kw.get("live", False)) or original(self, *a, **kw))
    return started


def _small_module(L, *, validate: bool = False, clip: float | None = None,  # type: ignore[no-untyped-def]
                  through_data: bool = False):
    """A small LightningModule (8-64-2 MLP, SGD): with a validation_step logging val_loss, and/or
    clipping its weights in place in its own on_train_batch_end (after the callbacks')."""
    from torch import nn

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.5 if clip is not None else 0.1)

    if validate:
        def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

        Module.validation_step = validation_step  # type: ignore[attr-defined]
    if clip is not None:
        def on_train_batch_end(self, outputs, batch, batch_idx):  # type: ignore[no-untyped-def]
            with torch.no_grad():
                for p in self.parameters():
                    (p.data if through_data else p).clamp_(-clip, clip)

        Module.on_train_batch_end = on_train_batch_end  # type: ignore[attr-defined]
    return Module


def test_lightning_user_code_after_the_callback_is_told_from_lightnings_own() -> None:
    L = pytest.importorskip("lightning")
    from lightning.pytorch.callbacks import LambdaCallback, ModelCheckpoint, TQDMProgressBar

    from tripwire.integrations.lightning import TripwireCallback
    from tripwire.integrations.lightning._callback import _user_hook_after

    class Clips(L.Callback):
        def on_train_batch_end(self, *args):  # type: ignore[no-untyped-def]
            pass

    module = _small_module(L)()
    cb = TripwireCallback()

    def after(*callbacks):  # type: ignore[no-untyped-def]
        trainer = type("T", (), {"callbacks": [cb, *callbacks]})()
        return _user_hook_after(trainer, module, cb, "on_train_batch_end", lightning_own=False)

    assert not after(ModelCheckpoint(), TQDMProgressBar())  # Lightning's own: they only read the weights
    assert after(Clips()) and after(LambdaCallback(on_train_batch_end=lambda *a: None))
    assert not after(LambdaCallback(on_train_epoch_end=lambda *a: None))
    before = type("T", (), {"callbacks": [Clips(), cb]})()
    assert not _user_hook_after(before, module, cb, "on_train_batch_end", lightning_own=False)
    assert _user_hook_after(before, _small_module(L, clip=0.1)(), cb, "on_train_batch_end")  # the module's own


def test_a_hand_written_loop_that_forgets_the_fence_is_told_to_call_it(background: str, tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # trial 15f: the warning spoke of callbacks and the model's hooks, not of session.fence()
    s = _weights_session(tmp_path, [])
    s.live_tensors = True
    w = torch.empty(64, 64)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            _step(s, step, w, float(step) / 10)  # fill_ (the optimizer step) with no fence before it
        s.close()
    warned = [r.getMessage() for r in caplog.records if "changed in place" in r.getMessage()]
    assert len(warned) == 1 and "before session.fence() (a hand-written loop with live_tensors calls it before the " \
                                "optimizer step" in warned[0], warned


def test_a_hand_written_loop_is_judged_at_its_own_step_by_default(tmp_path: Path) -> None:
    """Trial 42d F2: a hand loop's session reduced a large CPU step in the background and returned its
    stop one step late, after the loop's optimizer.step() had applied what it found (the README's loop
    reads ``end_step().stop`` before ``optimizer.step()``). Its session judges the step itself now."""
    s = Session(out_dir=tmp_path / "run", backend=TorchBackend(), save_interval=1, collections=["weights", "losses"],
                rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    assert s.background_reduction is False
    w = torch.zeros(150_000)
    stops = []
    for step in range(4):
        if step == 2:
            w[7] = float("nan")
        plan = s.begin_step("train", step)
        plan.add("fc.weight", w, "weights")
        plan.add("loss", torch.tensor(1.0), "losses")
        stops.append(s.end_step().stop)
        w.add_(1.0)  # (the optimizer step, in place)
    s.close()
    assert stops == [False, False, True, True] and s.stopped_by is not None and s.stopped_by.step == 2
