"""Trial 30g F4: the README's hand-written loop (``plan.add(f"gradients/{name}", p.grad,
"gradients")`` over ``model.named_parameters()``) failed at step 0 for a model with a complex
parameter (an FFT filter): ``plan.add`` refused a complex tensor, while the Lightning callback and
``capture_activations`` store its magnitude ``|z|``. Now ``plan.add`` does the same."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire

torch = pytest.importorskip("torch")
nn = torch.nn


class _Spec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, dtype=torch.complex64))

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return torch.fft.ifft(torch.fft.fft(x) * self.w).real


def test_the_readme_loop_takes_a_complex_gradient_as_its_magnitude(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(_Spec(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    s = tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, collections=["gradients", "losses"])
    grads = []
    for step in range(3):
        plan = s.begin_step("train", step)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        plan.add("loss", loss.detach(), "losses")
        if plan.wants("gradients"):
            for name, p in model.named_parameters():
                plan.add(f"gradients/{name}", p.grad, "gradients")
        grads.append(model[0].w.grad.detach().clone())
        s.end_step()
        opt.step()
    s.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    t = run.tensor("gradients/0.w")
    assert t.steps() == [0, 1, 2]
    for step, g in enumerate(grads):
        assert t.value("l2", step) == pytest.approx(torch.linalg.vector_norm(g).item(), rel=1e-5)
        assert t.value("mean", step) == pytest.approx(g.abs().mean().item(), rel=1e-5)


def test_a_complex_value_kept_between_save_steps_is_its_magnitude(tmp_path: Path) -> None:
    # an every_step collection's value offered at a step that saves nothing is kept for the next
    # save step: kept as its magnitude, too
    s = tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=2, collections=["losses"])
    for step in range(3):
        plan = s.begin_step("train", step)
        plan.add("loss", torch.tensor(3 + 4j, dtype=torch.complex64) * (step + 1), "losses")
        s.end_step()
    s.close()
    steps, values = tripwire.open_run(tmp_path / "run").series("loss")
    assert steps.tolist() == [0, 1, 2]
    assert values.tolist() == pytest.approx([5.0, 10.0, 15.0])
