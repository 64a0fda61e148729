"""tripwire with PyTorch Lightning: catch a network that stopped learning, then read the run.

    python examples/lightning_quickstart.py [--healthy]

Needs: pip install -e ".[lightning]"   (in a clone: Lightning, torch, scikit-learn for the data)

A small MLP on scikit-learn's digits (offline). Without ``--healthy`` the learning rate is far too
high: the ReLU units die, gradients vanish and the ``default`` rule set stops training.
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import tripwire
from tripwire.integrations.lightning import TripwireCallback


class DigitsMLP(L.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--healthy", action="store_true")
    parser.add_argument("--out-dir", default=None,
                        help="default: a new directory tripwire-runs/run-<date>-<time> for each run")
    args = parser.parse_args()
    L.seed_everything(0, verbose=False)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    train = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1400:], y[1400:]), batch_size=256)

    callback = TripwireCallback(
        out_dir=args.out_dir,
        save_interval=5,
        save={"modes": {"eval": {"interval": 1}}},           # keep every validation's metrics
        collections=["losses", "metrics", "gradients", "weights", "activations"],
        rules=[{"name": "default", "actions": ["log", "record", "stop_training"]}, "dead_relu"],
    )
    trainer = L.Trainer(max_epochs=6, logger=False, enable_checkpointing=False, callbacks=[callback])
    trainer.fit(DigitsMLP(0.3 if args.healthy else 4.0), train, val)

    print("stopped by:", callback.stopped_by)
    run = tripwire.open_run(callback.out_dir)
    print(run, run.status)
    steps, loss = run.series("loss", "raw", "train")
    print("train loss:", dict(zip(steps.tolist(), loss.round(3).tolist())))
    for finding in run.findings:
        print(finding)


if __name__ == "__main__":
    main()
