"""Trial 31b (Lightning DDP on two CPU processes, gloo), the callback's side; each fit runs as a
script (under pytest, ``strategy="ddp"`` would re-launch the pytest command line for rank 1, and
``ddp_spawn`` needs a ``__main__`` guard).

- F4: with ``strategy="ddp_spawn"`` and no ``out_dir`` the launching process got
  ``callback.out_dir`` None, and nothing said where the run went.
- F5 and F6 through a real fit (the session's tests: tests/core/test_trial31b_session.py): rank 0,
  whose gradients turned NaN through the all-reduce of rank 1's NaN batch, is pointed at the other
  ranks; the warnings said after the first epoch name each rank.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import tripwire  # noqa: E402

SPAWN_SCRIPT = '''
import sys
import warnings

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tripwire.integrations.lightning import TripwireCallback

warnings.filterwarnings("ignore")


class Net(L.LightningModule):  # (at module level: ddp_spawn pickles it)
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, batch, batch_idx):
        return nn.functional.cross_entropy(self.net(batch[0]), batch[1])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    kw = {"out_dir": sys.argv[1]} if len(sys.argv) > 1 else {}
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    cb = TripwireCallback(save_interval=2, **kw)
    trainer = L.Trainer(strategy="ddp_spawn", accelerator="cpu", devices=2, max_epochs=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[cb])
    trainer.fit(Net(), DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8))
    print(f"LAUNCHER out_dir={cb.out_dir}", flush=True)
'''

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _run(tmp_path: Path, script: str, *args: str) -> str:
    path = tmp_path / "fit.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path), *args], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    return said


@pytest.mark.slow
def test_a_ddp_spawn_fit_without_out_dir_says_where_its_run_is(tmp_path: Path) -> None:
    said = _run(tmp_path, SPAWN_SCRIPT)
    assert "LAUNCHER out_dir=None" in said  # (what Lightning's spawn gives back: nothing of the callback)
    lines = [line for line in said.splitlines() if "runs this trainer.fit() in processes of its own" in line]
    assert len(lines) == 1, said[-3000:]  # (rank 0 says it, once)
    m = re.fullmatch(r"tripwire: strategy 'ddp_spawn' runs this trainer\.fit\(\) in processes of its own, each with "
                     r"a copy of the TripwireCallback, and nothing of them comes back: in the process that called "
                     r"trainer\.fit\(\), callback\.out_dir stays None and callback\.findings empty\. This run is "
                     r"stored in (\S+) \(read it with tripwire\.open_run\('(\S+)'\)\); to know where in that "
                     r"process, give TripwireCallback\(out_dir=\.\.\.\)", lines[0])
    assert m is not None and m.group(1) == m.group(2), lines[0]
    assert m.group(1).startswith("tripwire-runs/run-")
    run = tripwire.open_run(tmp_path / m.group(1))  # (the directory it names holds the run, both ranks)
    assert run.workers == [0, 1] and run.status == "complete"


@pytest.mark.slow
def test_a_ddp_spawn_fit_given_out_dir_says_nothing_of_it(tmp_path: Path) -> None:
    said = _run(tmp_path, SPAWN_SCRIPT, str(tmp_path / "run"))
    assert f"LAUNCHER out_dir={tmp_path / 'run'}" in said
    assert "processes of its own" not in said, said[-3000:]
    assert tripwire.open_run(tmp_path / "run").workers == [0, 1]


DDP_SCRIPT = '''
import sys
import warnings

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tripwire.integrations.lightning import TripwireCallback

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.global_rank == 1 and self.global_step == 6:
            x = x * float("nan")  # a NaN batch on rank 1 alone: the all-reduce spreads its gradients
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    cb = TripwireCallback(out_dir=sys.argv[1], save_interval=1, collections=["losses", "gradients"],
                          rules=[{"name": "exploding_tensor", "actions": ["log", "stop_training"]},
                                 {"name": "oscillating_loss", "loss": "nope"}])
    trainer = L.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_epochs=3, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[cb])
    trainer.fit(Net(), DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8))
'''


@pytest.mark.slow
def test_a_ddp_fit_points_the_rank_with_a_finite_loss_at_the_others_and_names_ranks(tmp_path: Path) -> None:
    said = _run(tmp_path, DDP_SCRIPT, str(tmp_path / "run"))
    run = tripwire.open_run(tmp_path / "run")
    found = {f.worker: f for f in run.findings if f.rule == "exploding_tensor"}
    assert sorted(found) == [0, 1], run.findings
    assert found[1].step == found[0].step == 6
    assert found[1].tensors == ("loss",) and "all-reduced" not in found[1].message
    assert found[0].tensors[0].startswith("gradients/"), found[0]
    assert re.search(r"check the inputs and labels\. This rank's loss was finite at that step \(loss [0-9.]+\), and "
                     r"its gradients are all-reduced with those of the other ranks \(world size 2\)",
                     found[0].message), found[0].message
    # F6: the warning said after the first epoch names each rank, once each
    unread = sorted(line for line in said.splitlines() if "loss='nope'" in line)
    assert len(unread) == 2, said[-3000:]
    assert unread[0].startswith("tripwire: rank 0: rule 'oscillating_loss': loss='nope' matches no"), unread[0]
    assert unread[1].startswith("tripwire: rank 1: rule 'oscillating_loss': loss='nope' matches no"), unread[1]
