"""DDP fit on 2 CPU processes (gloo) with TripwireCallback; run as a script (``strategy="ddp"``
re-launches this command line for rank 1).

    python lightning_ddp.py OUT_DIR RESULT_DIR [--writers all|0] [--nan-rank R --nan-at STEP]
                            [--epochs N] [--collections losses,gradients] [--max-steps N]
                            [--actions record] [--save-ckpt PATH] [--resume PATH]
                            [--fault batch|value|val]

Each rank writes RESULT_DIR/rank-<r>.json: its last global step, should_stop, the stop finding.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning as L
from tripwire.integrations.lightning import TripwireCallback

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self, nan_rank: int | None, nan_at: int | None, fault: str = "batch") -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.nan_rank, self.nan_at, self.fault = nan_rank, nan_at, fault

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        faulty = self.nan_at is not None and self.global_rank == self.nan_rank and self.global_step >= self.nan_at
        if faulty and self.fault == "batch":
            x = x * float("nan")  # a fault in this rank's batch only
        loss = nn.functional.cross_entropy(self.net(x), y)
        if faulty and self.fault == "value":  # this rank's loss value NaN, its gradient finite: no other rank sees it
            loss = loss.detach() * float("nan") + (loss - loss.detach())
        self.log("train_loss", loss)
        return loss

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        if self.global_rank == self.nan_rank and self.nan_at is not None:  # this rank's test loss NaN too
            x = x * float("nan")
        self.log("test_loss", nn.functional.cross_entropy(self.net(x), y))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.fault == "val":  # this rank's validation loss NaN from nan_at on (not synced: the others' stay finite)
            if self.global_rank == self.nan_rank and self.nan_at is not None and self.global_step >= self.nan_at:
                loss = loss * float("nan")
            self.log("val_loss", loss)
            return
        self.log("val_loss", loss, sync_dist=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("result_dir")
    p.add_argument("--writers", default="all")
    p.add_argument("--nan-rank", type=int, default=None)
    p.add_argument("--nan-at", type=int, default=None)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--collections", default="losses,gradients,weights")
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--actions", default="stop_training")
    p.add_argument("--save-ckpt", default=None)
    p.add_argument("--resume", default=None)
    p.add_argument("--fault", choices=("batch", "value", "val"), default="batch")
    p.add_argument("--rank1-interval", type=int, default=None)  # rank 1 saves at another interval
    p.add_argument("--test", action="store_true")  # a trainer.test after the fit
    a = p.parse_args()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    writer = {"ranks": "all"} if a.writers == "all" else {"ranks": [int(a.writers)]}
    interval = a.rank1_interval if a.rank1_interval and os.environ.get("LOCAL_RANK") == "1" else 2
    cb = TripwireCallback(out_dir=a.out_dir, save_interval=interval, writer=writer,
                          collections=a.collections.split(","),
                          rules=[{"name": "exploding_tensor", "actions": [a.actions],
                                  **({"modes": ["train", "eval", "test"]} if a.test else {})}])
    trainer = L.Trainer(max_epochs=a.epochs, max_steps=a.max_steps, accelerator="cpu", devices=2, strategy="ddp",
                        enable_progress_bar=False, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb])
    trainer.fit(Net(a.nan_rank, a.nan_at, a.fault), DataLoader(data, batch_size=8), DataLoader(data, batch_size=16),
                ckpt_path=a.resume)
    if a.test:
        trainer.test(trainer.lightning_module, DataLoader(data, batch_size=16))
    if a.save_ckpt:
        trainer.save_checkpoint(a.save_ckpt)  # (every rank calls it; rank 0 writes it)
    stop = cb.stopped_by
    result = {"rank": trainer.global_rank, "global_step": trainer.global_step, "should_stop": trainer.should_stop,
              "stopped_by": None if stop is None else {"rule": stop.rule, "step": stop.step, "worker": stop.worker},
              "pid": os.getpid()}
    Path(a.result_dir).mkdir(parents=True, exist_ok=True)
    (Path(a.result_dir) / f"rank-{trainer.global_rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
