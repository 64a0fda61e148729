"""Trial 42k F1: Lightning DDP (two CPU processes, gloo) with manual optimization, where one rank takes
an optimizer step the other does not (a rank-local decision): each rank's ``global_step``, and so
its save steps, were its own, and the stop decision combined at each save step deadlocked the fit
(rank 1 in tripwire's ``all_reduce``, rank 0 in Lightning's broadcast); the fit ran to its end without
the callback. Under manual optimization the decisions are combined every ``save_interval`` batches
by the batch count every rank shares. A NaN on one rank still stops both at one step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

SCRIPT = '''
import argparse, faulthandler, json, sys
faulthandler.dump_traceback_later(240, exit=True)  # (a hang ends the process, with its stacks)
import torch
torch.set_num_threads(1)
import lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tripwire.integrations.lightning import TripwireCallback

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--diverge", action="store_true")
p.add_argument("--nan-step", type=int, default=-1)
a = p.parse_args()


class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 1)

    def training_step(self, batch, i):
        x, y = batch
        oa, ob = self.optimizers()
        if self.global_rank == 1 and self.global_step == a.nan_step:
            x = x * float("nan")
        la = nn.functional.mse_loss(self.b(torch.relu(self.a(x))), y)
        oa.zero_grad()
        self.manual_backward(la)
        oa.step()
        lb = nn.functional.mse_loss(self.b(torch.relu(self.a(x))).detach() + self.b(x * 0), y)
        ob.zero_grad()
        self.manual_backward(lb)
        step_b = i % 2 == 0
        if a.diverge and self.global_rank == 1 and i == 3:
            step_b = not step_b  # (rank 1 alone takes one more optimizer step)
        if step_b:
            ob.step()
        self.log("la", la)

    def configure_optimizers(self):
        return torch.optim.SGD(self.a.parameters(), lr=0.01), torch.optim.SGD(self.b.parameters(), lr=0.01)


L.seed_everything(0, verbose=False)
x = torch.randn(160, 8)
y = x.sum(1, keepdim=True)
cb = TripwireCallback(out_dir=a.out, save_interval=5, collections=["losses", "metrics", "gradients"],
                      rules=[{"name": "default", "actions": ["log", "record", "stop_training"]}])
trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp_find_unused_parameters_true", max_epochs=2,
                    logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    callbacks=[cb])
trainer.fit(M(), DataLoader(TensorDataset(x, y), batch_size=8))
# (one write, a line whole: the two ranks share stdout, and print's two writes interleaved, CI session 43)
sys.stdout.write("RESULT " + json.dumps({"rank": trainer.global_rank, "global_step": trainer.global_step,
                                         "stopped": cb.stopped_by is not None}) + "\\n")
sys.stdout.flush()
'''


def _fit(tmp_path: Path, *args: str) -> dict[int, dict]:
    script = tmp_path / "ddp_manual.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "run"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-4000:]
    results = [json.loads(found) for found in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)]
    return {r["rank"]: r for r in results}


@pytest.mark.slow
def test_ranks_whose_optimizer_steps_differ_do_not_hang(tmp_path: Path) -> None:
    got = _fit(tmp_path, "--diverge")
    assert {r: (v["global_step"], v["stopped"]) for r, v in got.items()} == {0: (30, False), 1: (32, False)}


@pytest.mark.slow
def test_a_nan_on_one_rank_stops_both_at_one_batch(tmp_path: Path) -> None:
    got = _fit(tmp_path, "--nan-step", "8")
    assert sorted(got) == [0, 1] and got[0]["global_step"] == got[1]["global_step"] < 30
    assert got[0]["stopped"] and got[1]["stopped"]
