"""Trial 31h: a hand-written PyTorch loop with a ``tripwire.Session``.

- F2: ``capture_activations`` did not point ``saturated_activation`` at the model's own
  ``nn.Sigmoid`` layers as the Lightning callback does: a sigmoid inside an ``nn.Sequential``
  (``1/input``) was judged with the tanh threshold, a spurious finding.
- F3: under ``torch.compile`` the documented loop stored ``gradients/_orig_mod.fc1.weight`` beside
  ``update_ratio/fc1.weight`` and ``fc1/output``: ``offer_gradients`` offers them with the same names.
- F5: the README's loop says when a NaN loss at a step that saves nothing is acted on, and how to have
  it judged at its own step (checked here).
- F6: ``capture_activations`` around every micro-batch, and ``capture_update_ratios`` after
  ``end_step()``, gave advice written for ``plan.add`` callers, at the first save step only: each now
  names its own call and the fix, at the first step whatever it saves.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError, StepEndedError  # noqa: E402
from tripwire.integrations.torch import capture_activations, capture_update_ratios, offer_gradients  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")
ROOT = Path(__file__).resolve().parents[2]


def _data(n: int = 512, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return x, (x @ torch.randn(16, 4, generator=g)).argmax(1)


# ---------------------------------------------------------------------------------------------- F2
def _saturation_loop(act: nn.Module, out: Path, **rule: Any) -> tripwire.Session:
    """The trial's t16: ``Sequential(Linear, act, Linear)`` whose activation inputs sit at +-7 (lr 0
    keeps them there): ``sigmoid'(7)`` is 9e-4, not saturated by the sigmoid threshold (10), and
    beyond the tanh one (5)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), act, nn.Linear(32, 4))
    with torch.no_grad():
        model[0].weight.mul_(0)
        model[0].bias.copy_(torch.where(torch.rand(32) < 0.5, -7.0, 7.0))
    opt = torch.optim.SGD(model.parameters(), 0.0)
    s = tripwire.Session(rules=[{"name": "saturated_activation", "actions": ["log"], **rule}], out_dir=str(out),
                         save_interval=5)
    x, y = _data(512)
    for step in range(16):
        plan = s.begin_step("train", step)
        with capture_activations(model, plan):
            logits = model(x[step * 32:(step + 1) * 32])
        loss = nn.functional.cross_entropy(logits, y[step * 32:(step + 1) * 32])
        opt.zero_grad()
        loss.backward()
        plan.add("loss", loss.detach(), "losses")
        s.end_step()
        opt.step()
    s.close()
    return s


def test_a_sigmoid_in_a_sequential_gets_the_sigmoid_threshold_as_in_lightning(tmp_path: Path) -> None:
    s = _saturation_loop(nn.Sigmoid(), tmp_path / "sigmoid")
    assert s.history.tensor_names("activation_inputs") == ["1/input"]
    assert s.findings == []  # (was: "100% of the inputs of the tanh/sigmoid layer 1/input lie beyond +-5")
    rule = s.rules[0]
    assert rule.sigmoid_regex == r"(?i)(sigmoid|logistic)|^(?:1)/input$" and rule.tanh_regex == "(?i)tanh"
    assert tripwire.open_run(tmp_path / "sigmoid").rule_inputs == {
        "saturated_activation": {"sigmoid_regex": r"(?i)(sigmoid|logistic)|^(?:1)/input$"}}


def test_a_tanh_in_a_sequential_is_still_found_saturated_and_a_regex_set_by_hand_is_kept(tmp_path: Path) -> None:
    s = _saturation_loop(nn.Tanh(), tmp_path / "tanh")
    assert [(f.rule, f.step) for f in s.findings] == [("saturated_activation", 10)]
    assert "the inputs of the tanh layer 1/input lie beyond +-5" in str(s.findings[0])  # (bound as a tanh too)
    s = _saturation_loop(nn.Sigmoid(), tmp_path / "mine", sigmoid_regex="nothing")
    assert s.rules[0].sigmoid_regex == "nothing"  # (the user's: left alone; layer 1 then reads as a tanh)
    assert [(f.rule, f.step) for f in s.findings] == [("saturated_activation", 10)]


# ---------------------------------------------------------------------------------------------- F3
class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act1, self.out = nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act1(self.fc1(x)))


def test_offer_gradients_names_a_compiled_models_gradients_as_its_ratios_and_activations() -> None:
    torch._dynamo.reset()
    model = torch.compile(MLP(), backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = tripwire.Session(write=False, rules=["weight_update_ratio"], include_collections=["activations", "gradients"],
                         save_interval=2)
    x, y = _data(64)
    offered = []
    for step in range(3):
        plan = s.begin_step("train", step)
        with capture_activations(model, plan):
            logits = model(x[step * 16:(step + 1) * 16])
        loss = nn.functional.cross_entropy(logits, y[step * 16:(step + 1) * 16])
        opt.zero_grad()
        loss.backward()
        plan.add("loss", loss.detach(), "losses")
        offered.append(offer_gradients(model, plan))
        with capture_update_ratios(model, plan, opt):
            opt.step()
        s.end_step()
    s.close()
    torch._dynamo.reset()
    h = s.history
    params = ["fc1.bias", "fc1.weight", "out.bias", "out.weight"]
    assert sorted(h.tensor_names("gradients")) == [f"gradients/{p}" for p in params]  # (was gradients/_orig_mod.fc1.weight)
    assert sorted(h.tensor_names("optimizer")) == [f"update_ratio/{p}" for p in params]
    assert "fc1/output" in h.tensor_names("activations")
    assert offered == [4, 0, 4]  # (at save steps only: nothing looked at in between)
    g = model._orig_mod.fc1.weight.grad  # (the last save step's, step 2)
    assert h.value("gradients/fc1.weight", "l2", 2) == pytest.approx(float(g.norm()), rel=1e-5)


def test_offer_gradients_unwraps_data_parallel_skips_frozen_parameters_and_checks_its_arguments() -> None:
    inner = MLP()
    inner.fc1.weight.requires_grad_(False)
    model = nn.DataParallel(inner)  # (on CPU: a wrapper that runs the module itself, named module.*)
    s = tripwire.Session(write=False, include_collections=["gradients"])
    plan = s.begin_step("train", 0)
    nn.functional.cross_entropy(model(_data(8)[0]), _data(8)[1]).backward()
    assert offer_gradients(model, plan) == 3
    assert offer_gradients(model, None) == 0
    s.end_step()
    assert sorted(s.history.tensor_names("gradients")) == ["gradients/fc1.bias", "gradients/out.bias",
                                                           "gradients/out.weight"]
    with pytest.raises(ConfigError, match=r"^offer_gradients: model=.*\(dict\); accepted: a torch.nn.Module"):
        offer_gradients({"fc": 1}, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^offer_gradients: plan=.*\(Session\); accepted: the StepPlan of this step"):
        offer_gradients(inner, s)  # type: ignore[arg-type]
    s.close()


def test_the_public_module_lists_offer_gradients() -> None:
    import tripwire.integrations.torch as public

    assert public.__all__ == sorted(public.__all__) and "offer_gradients" in public.__all__
    assert public.offer_gradients is offer_gradients and "offer_gradients" in dir(public)


def _readme_loop() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("**Your own PyTorch loop**"):text.index("**Your own rule**")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the README's loop section holds one python block"
    return blocks[0]


def test_the_readmes_loop_as_written_names_a_compiled_models_gradients_cleanly(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    x, y = _data(256)
    model = torch.compile(MLP(), backend="eager")
    namespace: dict[str, Any] = dict(
        model=model, loader=torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32),
        loss_fn=nn.CrossEntropyLoss(), optimizer=torch.optim.SGD(model.parameters(), lr=0.05), epochs=2,
        validate=lambda m: float(nn.functional.cross_entropy(m(x[:64]), y[:64]).detach()))
    exec(compile(_readme_loop(), "README.md", "exec"), namespace)  # noqa: S102
    torch._dynamo.reset()
    run = tripwire.open_run(tmp_path / "runs" / "loop1")
    assert sorted(run.tensor_names(collection="gradients")) == [
        "gradients/fc1.bias", "gradients/fc1.weight", "gradients/out.bias", "gradients/out.weight"]
    assert run.tensor("gradients/fc1.weight").steps() == [0, 10]
    assert len(run.series("loss")[0]) == 16 and run.status == "complete"


# ---------------------------------------------------------------------------------------------- F5
def _nan_loop(out: Path, **session: Any) -> tuple[int, list[tuple[str, int]]]:
    """The README's loop with a NaN loss at step 23: the step whose decision first says stop."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    s = tripwire.Session(rules=["default"], actions=["log", "stop_training"], out_dir=str(out), **session)
    x, y = _data(640)
    for step in range(40):
        loss = nn.functional.cross_entropy(model(x[step * 16:(step + 1) * 16]), y[step * 16:(step + 1) * 16])
        if step == 23:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        plan = s.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        offer_gradients(model, plan)
        if s.end_step().stop:
            break
        opt.step()
    s.close()
    return step, [(f.rule, f.step) for f in s.findings]


def test_a_nan_loss_stops_at_the_next_save_step_or_at_its_own_with_the_readmes_setting(tmp_path: Path) -> None:
    assert _nan_loop(tmp_path / "default") == (30, [("exploding_tensor", 23)])
    # the README's setting: the losses saved at every step, the gradients at their interval still
    assert _nan_loop(tmp_path / "every", collections={"losses": {"save": {"interval": 1}}, "metrics": None}) == (
        23, [("exploding_tensor", 23)])
    run = tripwire.open_run(tmp_path / "every")
    assert run.tensor("gradients/0.weight").steps() == [0, 10, 20]
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert ('collections={"losses": {"save": {"interval": 1}}, "metrics": None}' in text
            and "a NaN loss at a step that saves nothing is kept and judged at the next save step" in text)


# ---------------------------------------------------------------------------------------------- F6
def test_capture_activations_on_every_micro_batch_is_refused_by_name_at_the_first_step(tmp_path: Path) -> None:
    x, y = _data(64)
    model = MLP()
    # the activations are due from step 3 on: the loop still fails at step 0, not at its first save step
    s = tripwire.Session(write=False, collections={"activations": {"save": {"start_step": 3, "interval": 1}}})
    plan = s.begin_step("train", 0)
    assert not plan.wants("activations")
    with capture_activations(model, plan):
        model(x[:16])
    with pytest.raises(ConfigError, match=r"^capture_activations: a second block for this model \(MLP\) at train step 0 "
                                          r"\(the plan of session.begin_step\('train', 0\) had one already\).*accepted: "
                                          r"one capture_activations block per step and model.*with gradient accumulation, "
                                          r"the first micro-batch's: with capture_activations\(model, plan if i == 0 "
                                          r"else None\)"):
        with capture_activations(model, plan):
            model(x[16:32])
    s.end_step()
    # the documented way: the first micro-batch's activations, at a save step
    for step in (1, 2, 3):
        plan = s.begin_step("train", step)
        for i in range(4):
            with capture_activations(model, plan if i == 0 else None):
                nn.functional.cross_entropy(model(x[i * 16:(i + 1) * 16]), y[i * 16:(i + 1) * 16]).backward()
        s.end_step()
    s.close()
    steps, means = s.history.series("fc1/output", "mean", "train")
    assert steps.tolist() == [3] and means[0] == pytest.approx(float(model.fc1(x[:16]).mean()), rel=1e-5)


def test_two_models_in_one_step_and_a_block_that_raised_are_no_second_block() -> None:
    s = tripwire.Session(write=False, include_collections=["activations"])
    gen, disc = MLP(), nn.Sequential(nn.Linear(4, 2))
    plan = s.begin_step("train", 0)
    with pytest.raises(RuntimeError, match="boom"), capture_activations(gen, plan):
        raise RuntimeError("boom")
    with capture_activations(gen, plan):  # (the one that raised offered nothing: this is the step's block)
        fake = gen(torch.randn(2, 16))
    with capture_activations(disc, plan):
        disc(fake)
    s.end_step()
    s.close()
    assert {"fc1/output", "0/output"} <= set(s.history.tensor_names("activations"))


def test_capture_update_ratios_after_end_step_is_refused_before_the_optimizer_step_at_any_step() -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = tripwire.Session(write=False, rules=["weight_update_ratio"], save_interval=10, start_step=5)
    x, y = _data(16)
    nn.functional.cross_entropy(model(x), y).backward()
    plan = s.begin_step("train", 0)  # (saves nothing: the update ratios are due from step 5)
    s.end_step()
    before = model.fc1.weight.detach().clone()
    with pytest.raises(StepEndedError, match=r"^capture_update_ratios: the train step 0 of this plan has ended "
                                             r"\(session.end_step\(\) ran, or the next begin_step\) before the block "
                                             r"began.*accepted: the block around optimizer.step\(\) before "
                                             r"session.end_step\(\)"):
        with capture_update_ratios(model, plan, opt):
            opt.step()
    assert torch.equal(model.fc1.weight, before)  # (refused as the block starts: no step was taken)
    with capture_update_ratios(model, None, opt):  # (None: nothing taken, the step runs)
        opt.step()
    assert not torch.equal(model.fc1.weight, before)
    s.close()
