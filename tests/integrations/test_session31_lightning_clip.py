"""Trial 31a F3, the Lightning side: ``exploding_gradient`` advised "gradient clipping" to a fit whose
Trainer clips (``gradient_clip_val``). The callback records the Trainer's clipping as ``clip/global_norm``
(the ``norm`` algorithm, Lightning's default) or ``clip/value`` (kind optimizer, save steps), as the
Keras callback records its optimizer's, and the finding says the applied update is clipped already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402


class _Regression(L.LightningModule):
    """Targets in the thousands: the unclipped gradients are above max_norm from the first step."""

    def __init__(self, manual: bool = False) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.automatic_optimization = not manual

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if not self.automatic_optimization:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=1e-3)


def _fit(tmp_path: Path, manual: bool = False, **trainer: Any) -> tuple[TripwireCallback, Any]:
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1) * 1000 + 3000
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["exploding_gradient"], save_interval=2,
                          actions=["log", "stop_training"])
    t = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, callbacks=[cb], **trainer)
    t.fit(_Regression(manual), torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32))
    return cb, tripwire.open_run(tmp_path / "run")


@pytest.mark.parametrize(("trainer", "name", "said"), [
    ({"gradient_clip_val": 1.0}, "clip/global_norm", "to a global norm 1)"),
    ({"gradient_clip_val": 0.5, "gradient_clip_algorithm": "value"}, "clip/value", "to a value 0.5)"),
])
def test_a_trainer_that_clips_is_not_told_to_clip(tmp_path: Path, trainer: dict[str, Any], name: str,
                                                   said: str) -> None:
    cb, run = _fit(tmp_path, **trainer)
    found = cb.stopped_by
    assert found is not None and found.rule == "exploding_gradient", cb.findings
    steps, values = run.series(name)
    assert len(steps) and values.tolist() == [trainer["gradient_clip_val"]] * len(steps)
    assert "gradient clipping" not in found.message, found.message
    assert f"The optimizer clips the gradients it applies already ({said}" in found.message, found.message


def test_no_clipping_records_nothing_and_keeps_the_usual_fixes(tmp_path: Path) -> None:
    cb, run = _fit(tmp_path)
    found = cb.stopped_by
    assert found is not None and "Usual fixes: gradient clipping" in found.message, found.message
    assert not [n for n in run.tensor_names() if n.startswith("clip/")]
