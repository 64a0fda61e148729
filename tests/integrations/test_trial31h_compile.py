"""Trial 31h F1: in a hand-written loop, ``capture_activations`` on a ``torch.compile``d model captured
the layer outputs at the first save step only (TorchDynamo's default
``skip_nnmodule_hook_guards = True``: the graph compiled without hooks at the first step that saves
nothing ran at every later save step), without a word: ``dead_relu`` never fired on a ReLU layer
dead from step 0. The Lightning callback has handled this since trial 22c; the hand-written path
now does too: the option is False while a ``capture_activations`` block runs (at every step), and a
save step whose hooks caught nothing says so once, with the fix."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch._dynamo  # noqa: E402
import torch._dynamo.config as dynamo_config  # noqa: E402
from torch import nn  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.torch import capture_activations  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()  # (graphs of another test's modules: none here)
    assert dynamo_config.skip_nnmodule_hook_guards is True
    yield
    torch._dynamo.reset()
    assert dynamo_config.skip_nnmodule_hook_guards is True  # (put back after every block)


class MLP(nn.Module):
    """The trial's MLP; ``dead``: the first Linear's bias is -100, so ``act1`` outputs only zeros."""

    def __init__(self, dead: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act1 = nn.Linear(8, 16), nn.ReLU()
        self.fc2, self.act2 = nn.Linear(16, 16), nn.Tanh()
        self.out = nn.Linear(16, 2)
        if dead:
            with torch.no_grad():
                self.fc1.bias.fill_(-100.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act2(self.fc2(self.act1(self.fc1(x)))))


def _loop(model: nn.Module, out: Path | None, steps: int = 24, warm_up: bool = False,
          **session: Any) -> tripwire.Session:
    """The documented loop: one ``capture_activations`` block around the forward pass at every step."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(steps, 16, 8, generator=g), torch.randint(0, 2, (steps, 16), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw: dict[str, Any] = dict(rules=["dead_relu"], actions=["log", "stop_training"], save_interval=5)
    kw.update(session)
    s = tripwire.Session(**kw, **({"out_dir": str(out)} if out is not None else {"write": False}))
    if warm_up:
        model(x[0])  # (compiled outside any block, with torch's default guards)
    for step in range(steps):
        plan = s.begin_step("train", step)
        with capture_activations(model, plan):
            logits = model(x[step])
        loss = nn.functional.cross_entropy(logits, y[step])
        opt.zero_grad()
        loss.backward()
        plan.add("loss", loss.detach(), "losses")
        opt.step()
        if s.end_step().stop:
            break
    s.close()
    return s


@pytest.mark.parametrize("how", ["wrapper", "in_place"])
def test_a_compiled_model_is_captured_at_every_save_step_and_dead_relu_fires_as_uncompiled(
        tmp_path: Path, how: str) -> None:
    plain = _loop(MLP(dead=True), tmp_path / "plain")
    model = MLP(dead=True)
    if how == "wrapper":
        model = torch.compile(model, backend="aot_eager")  # type: ignore[assignment]
    else:
        model.compile(backend="aot_eager")
    compiled = _loop(model, tmp_path / "compiled")
    run = tripwire.open_run(tmp_path / "compiled")
    assert run.tensor("act1/output").steps() == [0, 5, 10, 15, 20]  # (was [0])
    assert [(f.rule, f.step) for f in compiled.findings] == [(f.rule, f.step) for f in plain.findings] == [
        ("dead_relu", 20)]
    assert run.status == "stopped"
    assert dynamo_config.skip_nnmodule_hook_guards is True


def test_the_option_is_false_only_while_a_block_runs_and_a_users_false_stays(tmp_path: Path) -> None:
    model = torch.compile(MLP(), backend="aot_eager")
    s = tripwire.Session(write=False, include_collections=["activations"], save_interval=2)
    seen = []
    for step in range(2):  # (a save step, then one that saves nothing: both blocks set it)
        plan = s.begin_step("train", step)
        with capture_activations(model, plan):
            seen.append(dynamo_config.skip_nnmodule_hook_guards)
            model(torch.randn(4, 8))
        s.end_step()
        assert dynamo_config.skip_nnmodule_hook_guards is True
    assert seen == [False, False]
    plan = s.begin_step("train", 2)
    with pytest.raises(RuntimeError, match="boom"), capture_activations(model, plan):
        raise RuntimeError("boom")
    assert dynamo_config.skip_nnmodule_hook_guards is True  # (back after an exception too)
    s.end_step()
    dynamo_config.skip_nnmodule_hook_guards = False
    try:
        with capture_activations(model, s.begin_step("train", 3)):
            pass
        assert dynamo_config.skip_nnmodule_hook_guards is False  # (the user's value: left alone)
    finally:
        dynamo_config.skip_nnmodule_hook_guards = True
    s.end_step()
    s.close()


def test_the_graphs_with_and_without_hooks_are_compiled_once_each() -> None:
    counters.clear()
    s = _loop(torch.compile(MLP(), backend="aot_eager"), None, steps=41, rules=[],
              include_collections=["activations"])
    h = s.history
    assert h.series("act1/output", "mean", "train")[0].tolist() == list(range(0, 41, 5))
    assert counters["stats"]["unique_graphs"] == 2  # (one with the hooks, one without: no recompile per save)


def test_a_graph_compiled_before_the_first_block_is_named_once_with_the_fix(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = torch.compile(MLP(dead=True), backend="aot_eager")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _loop(model, tmp_path / "warm", warm_up=True)
    said = [r.getMessage() for r in caplog.records if "capture_activations: train step" in r.getMessage()]
    assert len(said) == 1, said  # (once a session, not once a save step)
    assert said[0].startswith("tripwire: capture_activations: train step 0 saves ")
    assert "caught nothing" in said[0] and "dead_relu" in said[0]
    assert "torch._dynamo.config.skip_nnmodule_hook_guards = False before the model first runs" in said[0]
    assert "torch._dynamo.reset()" in said[0] and "Run every forward pass of the model inside" in said[0]
    assert s.findings == []
    # the advice holds: after torch._dynamo.reset() every save step has them
    torch._dynamo.reset()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _loop(torch.compile(MLP(dead=True), backend="aot_eager"), tmp_path / "reset")
    assert not any("capture_activations: train step" in r.getMessage() for r in caplog.records)
    assert [(f.rule, f.step) for f in s.findings] == [("dead_relu", 20)]


def test_an_uncompiled_model_hears_nothing_of_torch_compile(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        s = _loop(MLP(dead=True), None)
    assert [(f.rule, f.step) for f in s.findings] == [("dead_relu", 20)]
    assert not any("skip_nnmodule_hook_guards" in r.getMessage() for r in caplog.records)
