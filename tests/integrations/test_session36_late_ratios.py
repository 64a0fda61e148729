"""Session 36: a Lightning save step whose weights are copied at its end has its update ratios
computed by the thread that reduces the step (the background thread on the CPU), from its two
private copies (the weights before the optimizer step, the weights after it), not on the training
thread. The stored ratios must equal a hand computation at every step, also when the next
training_step writes the weights through ``.data`` before the background thread gets to them, and
when a late value is read by a path that did not expect one (a program of one-element tensors
only, a histogram of the optimizer collection)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations import _torch as torch_module  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


@pytest.fixture(params=[0.0, 0.02], ids=["prompt", "slow"])
def produced_on(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every step with a tensor of more than one element goes to the background thread, which is
    prompt, or slow to start on the late values (a busy machine: the training thread then produces
    them itself before it writes their buffers again); the names of the threads that produced late
    values."""
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    threads: list[str] = []
    init, wait = torch_module.LateValues.__init__, torch_module.LateValues.wait
    delay = request.param

    def noting_init(self: Any, count: int, dtype: Any, producer: Any) -> None:
        def noted(out: Any) -> None:
            threads.append(threading.current_thread().name)
            producer(out)

        init(self, count, dtype, noted)

    def slow_wait(self: Any) -> None:
        if delay and threading.current_thread().name.startswith("tripwire-reduce"):
            time.sleep(delay)
        wait(self)

    monkeypatch.setattr(torch_module.LateValues, "__init__", noting_init)
    monkeypatch.setattr(torch_module.LateValues, "wait", slow_wait)
    return threads


class Halving(L.LightningModule):
    """Its training_step halves the first weight through ``.data`` (no version counter moves)."""

    def __init__(self, halve: bool) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        self.halve = halve

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.halve:
            self.net[0].weight.data.mul_(0.5)
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.5, momentum=0.9)


class ByHand(L.Callback):
    """``||after - before|| / ||before||`` of every parameter in float64, per global step."""

    def __init__(self) -> None:
        self.before: dict[str, torch.Tensor] = {}
        self.ratios: dict[str, dict[int, float]] = {}

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.before = {n: p.detach().double().clone() for n, p in pl_module.named_parameters()}

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        for n, p in pl_module.named_parameters():
            b = self.before[n]
            ratio = float((p.detach().double() - b).norm() / b.norm())
            self.ratios.setdefault(n, {})[trainer.global_step - 1] = ratio


def _fit(out: Path, *, halve: bool, collections: Any, steps: int = 6) -> ByHand:
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    by_hand = ByHand()
    callback = TripwireCallback(out_dir=str(out), save_interval=1, collections=collections)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[by_hand, callback])
    trainer.fit(Halving(halve), DataLoader(TensorDataset(x, y), batch_size=8))
    return by_hand


def _check(out: Path, by_hand: ByHand) -> None:
    run = tripwire.open_run(out)
    names = [n for n in run.tensor_names() if n.startswith("update_ratio/")]
    assert sorted(names) == sorted(f"update_ratio/{n}" for n in by_hand.ratios)
    for name, expected in by_hand.ratios.items():
        steps, values = run.series(f"update_ratio/{name}")
        assert list(steps) == sorted(expected)
        np.testing.assert_allclose(values, [expected[s] for s in steps], rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("halve", [False, True], ids=["plain", "data-write"])
def test_late_update_ratios_equal_a_hand_computation(tmp_path: Path, produced_on: list[str], halve: bool) -> None:
    by_hand = _fit(tmp_path / "run", halve=halve, collections=["weights", "biases", "optimizer", "losses"])
    _check(tmp_path / "run", by_hand)
    assert len(produced_on) == 6, produced_on  # (each save step's values produced once)


def test_ratios_of_weights_not_copied_are_computed_at_once(tmp_path: Path, produced_on: list[str]) -> None:
    # no weights saved: the live parameters would be read after the next step changed them
    by_hand = _fit(tmp_path / "run", halve=True, collections=["gradients", "optimizer", "losses"])
    _check(tmp_path / "run", by_hand)
    assert produced_on == []


def test_a_histogram_of_the_ratios_reads_them_computed(tmp_path: Path, produced_on: list[str]) -> None:
    by_hand = _fit(tmp_path / "run", halve=False, collections={
        "weights": {}, "biases": {}, "losses": {}, "optimizer": {"reductions": ["raw", "histogram"]}})
    _check(tmp_path / "run", by_hand)
    run = tripwire.open_run(tmp_path / "run")
    for name, expected in by_hand.ratios.items():
        view = run.tensor(f"update_ratio/{name}")
        for step, ratio in expected.items():
            counts, edges = view.histogram(step)
            k = int(np.argmax(counts))
            assert counts.sum() == 1 and edges[k] <= ratio * (1 + 1e-5) and ratio <= edges[k + 1] * (1 + 1e-5), (name, step)
    assert produced_on == []


def test_late_values_in_a_program_of_one_element_tensors_only(tmp_path: Path) -> None:
    # (the weights of this model are one-element tensors: the step's program stacks scalars only)
    backend = torch_module.TorchBackend()
    before, after = [torch.tensor([2.0]), torch.tensor([4.0])], [torch.tensor([3.0]), torch.tensor([1.0])]

    def produce(out: torch.Tensor) -> None:
        out.copy_(torch_module.update_ratios(before, after, inplace=True))

    late = torch_module.LateValues(2, torch.float32, produce)
    views = late.views()
    for program_input in ([(views, ["sum"])], [(views, ["sum"]), ([torch.ones(3)], ["l2"])]):
        (out, *_) = backend.reduce_groups(program_input)
        np.testing.assert_allclose(out[:, 0], [0.5, 0.75])
    late.wait()  # (produced once: the inputs were overwritten by the first production)
    np.testing.assert_allclose(late.values.numpy(), [0.5, 0.75])


def test_a_producer_that_raises_raises_for_every_reader() -> None:
    def produce(out: torch.Tensor) -> None:
        raise RuntimeError("no norms")

    late = torch_module.LateValues(1, torch.float32, produce)
    (view,) = late.views()
    with pytest.raises(RuntimeError, match="no norms"):
        late.wait()
    for read in (late.wait, lambda: torch_module.TorchBackend().reduce_groups([([view], ["sum"])])):
        with pytest.raises(RuntimeError, match="no norms"):  # (never the unfilled values)
            read()
