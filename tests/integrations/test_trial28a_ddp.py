"""Trial 28a (Lightning DDP on two CPU processes, gloo; the fit runs as a script: under pytest,
``strategy="ddp"`` would re-launch the pytest command line for rank 1).

- F1: after a crash and a resume, a finding first made on rank 1 after the checkpoint (the crashed
  attempt's stop never took effect: ``min_steps`` held it) was silenced: rank 1's resumed rules
  counted every earlier finding of that rank as "fired before". It is found again and its stop acts.
- F6: rank 0's ``distributed_stop`` for that stop was written again by the resumed fit.
- F3: a save step reduced in the background (large tensors on the CPU) has its findings at the next
  step, where no collective ran: the stop waited for the next save step (a whole ``save_interval``).
  The step after every save step now combines the stop decision too.
- F4: the stop lines of the ranks did not say which rank they came from, and a rank stopped by
  another rank's rule said "rule 'distributed_stop'" (a check, not a rule), whose own finding line
  was never logged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import tripwire  # noqa: E402

SCRIPT = '''
import argparse, json, os, sys, warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from tripwire.integrations import _torch
from tripwire.integrations.lightning import TripwireCallback

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

p = argparse.ArgumentParser()
p.add_argument("out_dir")
p.add_argument("result_dir")
p.add_argument("--nan-at", type=int, default=None)   # rank 1's loss value NaN (its gradient finite) at this step
p.add_argument("--nan-from", action="store_true")    # ... and at every later step
p.add_argument("--crash-at", type=int, default=None)  # every rank raises at this step
p.add_argument("--save-interval", type=int, default=2)
p.add_argument("--ckpt-dir", default=None)
p.add_argument("--ckpt-every", type=int, default=4)
p.add_argument("--resume", default=None)
p.add_argument("--min-steps", type=int, default=None)
p.add_argument("--max-steps", type=int, default=16)
p.add_argument("--background", action="store_true")  # every save step reduced on the background thread
a = p.parse_args()

calls = {"background": 0}
if a.background:
    _torch.BACKGROUND_MIN = 2
    _torch.background_allowed = lambda: True
    original = _torch.TorchBackend.reduce_groups_async

    def counted(self, *args, **kw):
        got = original(self, *args, **kw)
        calls["background"] += got is not None
        return got

    _torch.TorchBackend.reduce_groups_async = counted


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        step = int(self.global_step)
        if a.crash_at is not None and step == a.crash_at:
            raise RuntimeError(f"planted crash at step {step}")
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.global_rank == 1 and a.nan_at is not None and (step == a.nan_at or (a.nan_from and step > a.nan_at)):
            loss = loss.detach() * float("nan") + (loss - loss.detach())  # the value NaN; rank 0 sees nothing
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", nn.functional.cross_entropy(self.net(batch[0]), batch[1]), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


g = torch.Generator().manual_seed(0)
x = torch.randn(256, 4, generator=g)
data = TensorDataset(x, (x[:, 0] > 0).long())  # 16 train steps an epoch per rank
cb = TripwireCallback(out_dir=a.out_dir, save_interval=a.save_interval, collections=["losses", "gradients", "weights"],
                      rules=[{"name": "exploding_tensor", "actions": ["log", "stop_training"]}])
callbacks = [cb]
if a.ckpt_dir:
    callbacks.append(ModelCheckpoint(dirpath=a.ckpt_dir, every_n_train_steps=a.ckpt_every, save_top_k=-1,
                                     filename="{step}"))
trainer = L.Trainer(max_epochs=10, max_steps=a.max_steps, min_steps=a.min_steps, accelerator="cpu", devices=2,
                    strategy="ddp", enable_progress_bar=False, logger=False, enable_checkpointing=bool(a.ckpt_dir),
                    enable_model_summary=False, num_sanity_val_steps=0, callbacks=callbacks)
try:
    trainer.fit(Net(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=64), ckpt_path=a.resume)
finally:
    stop = cb.stopped_by
    result = {"rank": trainer.global_rank, "global_step": trainer.global_step, "background": calls["background"],
              "stopped_by": None if stop is None else {"rule": stop.rule, "step": stop.step, "worker": stop.worker},
              "stop_reason": cb.stop_reason}
    Path(a.result_dir).mkdir(parents=True, exist_ok=True)
    (Path(a.result_dir) / f"rank-{trainer.global_rank}.json").write_text(json.dumps(result))
'''


def _run(tmp_path: Path, results: str, *args: str, ok: bool = True) -> tuple[dict[int, dict[str, Any]], str]:
    script = tmp_path / "ddp_fit.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "run"), str(tmp_path / results), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
    said = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, said[-4000:]
    res = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in (tmp_path / results).glob("rank-*.json")}
    return res, said


@pytest.mark.slow
def test_a_finding_on_rank_1_after_the_checkpoint_is_found_again_after_the_resume_and_stops(tmp_path: Path) -> None:
    # attempt 1: rank 1's loss NaN from step 6 on (a save step), the stop held by min_steps=12, a crash at step 8
    # (after the step-4 and step-8 checkpoints)
    _, first = _run(tmp_path, "res1", "--nan-at", "6", "--nan-from", "--crash-at", "8", "--min-steps", "12",
                    "--ckpt-dir", str(tmp_path / "ckpt"), ok=False)
    assert "planted crash at step 8" in first, first[-3000:]
    held = [(f.rule, f.step, f.worker) for f in tripwire.open_run(tmp_path / "run").findings]
    assert ("exploding_tensor", 6, 1) in held and ("distributed_stop", 6, 0) in held, held
    # F4: each stop line names its rank; rank 0's names rank 1's rule, and its distributed_stop is logged once
    assert "tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 6 (train)" in first, first[-3000:]
    assert "tripwire: rank 0: stopping training: rank 1's rule 'exploding_tensor' at step 6 (train)" in first
    assert "rule 'distributed_stop'" not in first
    assert first.count("tripwire: [warning] distributed_stop at step 6 (train, rank 0): rank 1's rule "
                       "'exploding_tensor' (train step 6: ") == 1, first[-3000:]
    # attempt 2: resumed from the step-4 checkpoint, no min_steps: the fault at step 6 again
    res, second = _run(tmp_path, "res2", "--nan-at", "6", "--nan-from", "--resume", str(tmp_path / "ckpt" / "step=4.ckpt"))
    assert res[1]["stopped_by"] == {"rule": "exploding_tensor", "step": 6, "worker": 1}, (res, second[-3000:])
    assert res[0]["stopped_by"] == {"rule": "distributed_stop", "step": 6, "worker": 0}
    assert res[0]["global_step"] == res[1]["global_step"] == 7  # (it ran to step 16, complete)
    assert "found again after the resume: [critical] exploding_tensor at step 6 (train, rank 1)" in second
    assert "tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 6 (train)" in second
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped"
    found = [(f.rule, f.step, f.worker) for f in run.findings]
    # each once: the rule's finding found again is not written again, nor is rank 0's check (F6)
    assert sorted(found) == [("distributed_stop", 6, 0), ("exploding_tensor", 6, 1)], found


@pytest.mark.slow
def test_a_save_step_reduced_in_the_background_stops_every_rank_one_step_later(tmp_path: Path) -> None:
    # rank 1's loss NaN at save step 4 (save_interval 4): its rules run when step 5 ends, a step that saves nothing
    res, said = _run(tmp_path, "res", "--nan-at", "4", "--save-interval", "4", "--background")
    assert res[0]["background"] > 0 and res[1]["background"] > 0, res  # (the save steps went to the background)
    assert res[1]["stopped_by"] == {"rule": "exploding_tensor", "step": 4, "worker": 1}, (res, said[-3000:])
    assert res[0]["stopped_by"] is not None and res[0]["stopped_by"]["rule"] == "distributed_stop"
    # both stop after train step 5 (it waited for save step 8 or the epoch's validation: global step 9 or 16)
    assert res[0]["global_step"] == res[1]["global_step"] == 6, res
    assert "tripwire: rank 1: stopping training at train step 5: rule 'exploding_tensor' at step 4 (train)" in said
    assert ("tripwire: rank 0: stopping training at train step 5: rank 1's rule 'exploding_tensor' at step 4 (train)"
            in said), said[-3000:]
    assert "rank 1's rule 'exploding_tensor' (train step 4: " in res[0]["stop_reason"]
