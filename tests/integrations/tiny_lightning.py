"""A tiny LightningModule that Lightning tests share (not a test module): one linear layer, 4 inputs
to 2 classes, cross-entropy, SGD at learning rate 0.1. Import it after
``pytest.importorskip("lightning")``."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn


class TinyNet(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)
