"""Trial 42a F2: a ``predict_step`` that returned a dict (``{"logits": ...}``, a key the callback reads
in validation and test) or a tuple (``(logits, y)``) stored no predictions, and the WARNING said the
training offered none. Predict now reads them as validation and test do, and falls back to the
module's ``forward`` output as they do."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import lightning as L  # noqa: E402
import torch  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from tiny_lightning import TinyNet  # noqa: E402

RETURNS = {
    "tensor": lambda logits, y: logits,
    "dict": lambda logits, y: {"logits": logits, "y": y},
    "tuple": lambda logits, y: (logits, y),
    "other_dict": lambda logits, y: {"out": logits.argmax(1), "y": y},  # (no known key: forward's output)
    # (trial 42g: a list of per-sample outputs is no batch's predictions, and a 0-d tensor is none either)
    "per_sample_list": lambda logits, y: [row[:1] for row in logits],
    "scalar": lambda logits, y: logits.sum(),
}


@pytest.mark.parametrize("kind", sorted(RETURNS))
def test_predictions_of_a_predict_step_are_stored(tmp_path: Path, kind: str) -> None:
    class Net(TinyNet):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def predict_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return RETURNS[kind](self(x), y)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["predictions"],
                          collections={"predictions": {"reductions": ["raw"]}})
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[cb])
    net = Net()
    out = trainer.predict(net, torch.utils.data.DataLoader(data, batch_size=8))
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("predictions").steps(mode="predict") == [1, 2]
    with torch.no_grad():
        expected = net(data.tensors[0][:8]).numpy()
    got = run.tensor("predictions").value(1, mode="predict")
    assert got.shape == (8, 2) and abs(got - expected).max() < 1e-6, (got, expected, out[0])
