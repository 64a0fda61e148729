"""The loss rules' causes name the MXNet forms of accumulated gradients and of an update scaled by
the batch size, not only PyTorch's (trial 28c: ``grad_req='add'`` never zeroed was told as "PyTorch: a
missing optimizer.zero_grad()", and ``trainer.step(1)`` was named nowhere)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tripwire


def test_oscillating_loss_names_the_mxnet_forms(tmp_path: Path) -> None:
    session = tripwire.Session(rules=["oscillating_loss"], actions=["record"], out_dir=tmp_path / "run", save_interval=1)
    session.set_planned_steps(200)
    for step in range(200):
        value = 2.0 if step < 10 else (2.0 + (40.0 if step % 2 else 0.0))
        session.step("train", step, {"loss": (np.float32(value), "losses")})
    session.close()
    found = [f for f in session.findings if f.rule == "oscillating_loss"]
    assert found, [f.rule for f in session.findings]
    message = found[0].message
    assert "grad_req='add'" in message and "trainer.step(1)" in message and "optimizer.zero_grad()" in message
