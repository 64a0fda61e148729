"""Trial 36c: a Keras mixed_float16 run whose LossScaleOptimizer skipped every step was told, at its
end, of "fp16 AMP's GradScaler", torch ops and docs/architecture.md's AMP recipe: torch's words."""

from __future__ import annotations

from pathlib import Path

import tripwire
from tripwire._session import scaler_skipped_note


def _history(out: Path) -> tripwire.Run:
    s = tripwire.Session(out_dir=str(out), save_interval=10, collections=["losses", "optimizer"])
    for step in range(21):
        plan = s.begin_step("train", step)
        plan.add("loss", 2.3, "losses")
        if plan.wants("optimizer"):
            plan.add("loss_scale", 65536 / 2 ** step, "optimizer")
        s.end_step()
    s.close()
    return tripwire.open_run(out)


def test_the_note_names_the_keras_loss_scale_optimizer_on_a_keras_run(tmp_path: Path) -> None:
    run = _history(tmp_path / "run")
    keras = scaler_skipped_note(run, framework="keras")
    assert keras is not None and keras.startswith("Keras's LossScaleOptimizer (mixed_float16) skipped optimizer steps")
    assert "keras.ops.sqrt" in keras and 'docs/keras.md, "Gradients are the unscaled ones"' in keras
    assert "GradScaler" not in keras and "torch." not in keras and "architecture.md" not in keras
    torch_note = scaler_skipped_note(run)
    assert torch_note is not None and torch_note.startswith("fp16 AMP's GradScaler skipped") and "torch.sqrt" in torch_note
