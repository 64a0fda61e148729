"""Trial 29j with Lightning: a gradient rule was judged at the fit's last step, where only the kept
losses were written (F1: ``grad_norm_ceiling`` ran at steps 0, 10, 20, 30, 40 and 44, gradients saved
at 0-40), and a stop a finding made at the fit's end asked for marked the run ``stopped`` and set
``callback.stopped_by`` although ``Trainer.fit`` reached ``max_epochs`` (F2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

CALLS: list[tuple[str, int]] = []


def grad_probe(history: Any, step: int, mode: str) -> None:
    CALLS.append(("grad", step))


def late_loss(history: Any, step: int, mode: str) -> str | None:
    CALLS.append(("loss", step))
    return "the fit's last loss" if step == 29 else None


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _fit(out: Path) -> tuple[TripwireCallback, Any]:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(120, 4, generator=g), torch.randint(0, 3, (120,), generator=g)
    train = DataLoader(TensorDataset(x, y), batch_size=8)  # 15 steps an epoch
    val = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=16)
    rules = [tripwire.FunctionRule(grad_probe, requirements=[tripwire.Requirement("gradients", ("l2",))]),
             tripwire.FunctionRule(late_loss, requirements=[tripwire.Requirement("losses", ("raw",))],
                                   actions=["log", "stop_training"])]
    cb = TripwireCallback(rules=rules, out_dir=str(out), save_interval=10)
    trainer = L.Trainer(max_epochs=2, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(out.parent))
    trainer.fit(Net(), train, val)
    return cb, trainer


def test_a_fit_judges_its_rules_where_they_read_and_a_finding_at_its_end_stops_nothing(tmp_path: Path) -> None:
    CALLS.clear()
    cb, trainer = _fit(tmp_path / "run")
    assert trainer.global_step == 30
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("gradients/net.0.weight").steps() == [0, 10, 20]
    assert [step for what, step in CALLS if what == "grad"] == [0, 10, 20]  # (F1: 29 too)
    assert [step for what, step in CALLS if what == "loss"][-1] == 29  # the kept losses are judged
    assert [(f.rule, f.step) for f in cb.findings] == [("late_loss", 29)]
    assert cb.stopped_by is None  # (F2: set, and the run 'stopped', after max_epochs was reached)
    assert run.status == "complete" and run.stop_reasons == {}
