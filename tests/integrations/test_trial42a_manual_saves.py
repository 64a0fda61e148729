"""Trial 42a F1: under manual optimization with several optimizer steps a batch (a WGAN's critic
stepped 5 times and its generator once: ``global_step`` +6 a batch), ``save_interval=10`` saved only
the steps that are multiples of both (0, 30, 60, 90 over 120 steps): the rules judged three times
less often than asked, without a word. A save due at a step no batch starts at now comes at the
first batch after it. Also the hand-loop Session: a train step that skips over a due step saves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tripwire


def test_a_session_whose_train_steps_skip_saves_at_the_first_step_after_a_due_one(tmp_path: Path) -> None:
    s = tripwire.Session(out_dir=tmp_path / "run", save_interval=10, rules=[], collections=["losses", "metrics"])
    saved = []
    for step in range(0, 60, 6):
        plan = s.begin_step("train", step)
        if plan.wants("metrics"):
            saved.append(step)
            plan.add("m", float(step), "metrics")
        s.end_step()
    s.close()
    assert saved == [0, 12, 24, 30, 42, 54]
    # (contiguous steps: the multiples of the interval only, as before; a loop going back: as the step says)
    s = tripwire.Session(write=False, save_interval=10, rules=[], collections=["losses", "metrics"])
    got = []
    for step in [*range(25), 3, 5, 10]:
        if s.begin_step("train", step):
            got.append(step)
        s.end_step()
    assert got == [0, 10, 20, 10]


def _saved(taken: range, **save: object) -> list[int]:
    """The steps of ``taken`` (in order, as train steps) at which a session with ``save`` saves."""
    saved = []
    s = tripwire.Session(write=False, save=save, rules=[], collections=["losses", "metrics"])
    for step in taken:
        if s.begin_step("train", step):
            saved.append(step)
        s.end_step()
    return saved


def test_a_catch_up_save_keeps_inside_end_step() -> None:
    """Trial 42g F6: ``save: {interval: 4, end_step: 9}`` with steps 0, 3, 6, 9 saved step 9, past
    the range; a listed step skipped over is caught up wherever it is."""
    # (4 caught up at 6; 8 would be at 9, past end_step; the listed 10 at 12)
    assert _saved(range(0, 15, 3), interval=4, end_step=9, steps=[10]) == [0, 6, 12]
    # (a listed step skipped over behind an interval step that comes too late: the listed one is caught up)
    assert _saved(range(0, 15, 3), interval=4, end_step=9, steps=[8]) == [0, 6, 9]


def test_a_manual_optimization_fit_saves_once_per_interval(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    import lightning as L
    import torch
    from torch import nn

    from tripwire.integrations.lightning import TripwireCallback

    class Critic5(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.g, self.d = nn.Linear(4, 4), nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> None:
            opt_g, opt_d = self.optimizers()
            (x,) = batch
            for _ in range(5):
                loss_d = self.d(self.g(x).detach()).mean() - self.d(x).mean()
                opt_d.zero_grad()
                self.manual_backward(loss_d)
                opt_d.step()
            loss_g = -self.d(self.g(x)).mean()
            opt_g.zero_grad()
            self.manual_backward(loss_g)
            opt_g.step()
            self.log("d_loss", loss_d)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.g.parameters(), lr=0.01), torch.optim.SGD(self.d.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(160, 4))
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["gradients"])
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    trainer.fit(Critic5(), torch.utils.data.DataLoader(data, batch_size=8))
    assert trainer.global_step == 120
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("train") == [0, 12, 24, 30, 42, 54, 60, 72, 84, 90, 102, 114]
    assert run.tensor("gradients/d.weight").steps("train") == run.steps("train")
