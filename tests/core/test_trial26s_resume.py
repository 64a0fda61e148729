"""Trial 26a, finding 1: resuming with a changed rule list (a rule added or removed) was a
``ConfigError: state_dict: saved rules [...] differ from this session's rules [...]``, even with a
new out_dir, and nothing said how to get past it. Each rule still configured now gets its saved
state (matched by name, not position), new rules start fresh, the states of rules no longer
configured are dropped, one line says which; a rule whose class changed under its name starts fresh."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import FunctionRule, Requirement, Rule, Session


class Counting(Rule):
    """Counts its evaluations (its state); fires at ``at``."""

    name = "counting"

    def __init__(self, at: int = 1_000_000, **common: Any) -> None:
        super().__init__(**common)
        self.at, self.seen = at, 0

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",))]

    def check(self, history, step, mode):
        self.seen += 1
        return self.finding(step, mode, f"step {step}") if step == self.at else None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "seen": self.seen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.seen = int(state["seen"])


def _once(history, step, mode):
    return "seen" if step == 2 else None


def _rule(name: str) -> Rule:
    if name == "counting":
        return Counting()
    if name == "once":
        return FunctionRule(_once, name="once", requirements=[Requirement("losses", ("raw",))])
    return tripwire.rules.build_rules([name])[0]


def _train(rules: list[Rule], out: Path, steps: range, state: dict | None = None) -> Session:
    s = Session({"save": {"interval": 1}, "rules": rules, "actions": ["record"]}, out_dir=str(out))
    if state is not None:
        s.load_state_dict(state)
    for step in steps:
        s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    return s


def test_a_rule_added_starts_fresh_and_the_others_resume(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = _train([_rule("once"), _rule("counting")], tmp_path / "a", range(5))
    state = first.state_dict()
    first.close()
    assert state["rule_classes"] == ["FunctionRule(_once)", "Counting"]
    with caplog.at_level(logging.INFO, logger="tripwire"):
        # a rule added in front of the others: their places moved, their states follow their names
        second = _train([_rule("loss_not_decreasing"), _rule("counting"), _rule("once")], tmp_path / "b",
                        range(5, 8), state)
    counting = second.rules[1]
    assert isinstance(counting, Counting) and counting.seen == 5 + 3  # its count went on
    assert second._fired == {2}  # 'once' fired before the checkpoint (at its old place 0): it fires no more
    assert [f.rule for f in second.findings] == []
    said = [r for r in caplog.records if "differ from the checkpoint's" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO, [r.getMessage() for r in caplog.records]
    assert said[0].getMessage() == ("tripwire: this session's rules differ from the checkpoint's: 'loss_not_decreasing' "
                                    "starts fresh (not in the checkpoint); the other rules resume with their saved state")
    second.close()


def test_a_rule_removed_has_its_state_dropped_and_the_same_rules_in_another_order_resume(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = _train([_rule("counting"), _rule("once"), _rule("oscillating_loss")], tmp_path / "a", range(5))
    state = first.state_dict()
    first.close()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        second = _train([_rule("once"), _rule("counting")], tmp_path / "a", range(5, 7), state)
    assert isinstance(second.rules[1], Counting) and second.rules[1].seen == 7 and second._fired == {0}
    [said] = [r.getMessage() for r in caplog.records if "differ from the checkpoint's" in r.getMessage()]
    assert "the saved state of 'oscillating_loss' is dropped (no longer configured)" in said
    second.close()
    # the same rules in another order: nothing to say
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        third = _train([_rule("oscillating_loss"), _rule("once"), _rule("counting")], tmp_path / "c", range(5, 6), state)
    assert third.rules[2].seen == 6 and third._fired == {1}
    assert not [r for r in caplog.records if "differ from the checkpoint's" in r.getMessage()]
    third.close()


def test_a_rule_whose_class_changed_under_its_name_gets_no_foreign_state(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    first = _train([_rule("counting")], tmp_path / "a", range(4))
    state = first.state_dict()
    first.close()
    impostor = FunctionRule(lambda h, step, mode: None, name="counting", requirements=[Requirement("losses", ("raw",))])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        second = _train([impostor], tmp_path / "b", range(4, 6), state)
    [said] = [r for r in caplog.records if "differ from the checkpoint's" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert ("'counting' (now FunctionRule(test_a_rule_whose_class_changed_under_its_name_gets_no_foreign_state."
            "<locals>.<lambda>), the checkpoint's Counting) starts fresh: its class changed") in said.getMessage()
    assert second.rules[0].state_dict()["tripwire"]["last_eval"] == {"train": 5}  # its own, not the Counting's
    second.close()


def test_a_state_without_rule_names_loads_by_position() -> None:
    s = Session({"rules": [Counting()]}, write=False)
    s.load_state_dict({"mode_steps": {"train": 3}, "rules": [{"streak": {}, "last_eval": {"train": 2}, "seen": 3}],
                       "fired": [0]})
    assert s.rules[0].seen == 3 and s._fired == {0}
    s.close()


def test_lightning_resumes_from_a_checkpoint_after_a_rule_was_added(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The trial's case: fit, checkpoint, then ``fit(ckpt_path=...)`` with a callback whose rules
    list one more (in the run's out_dir, and in a new one)."""
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)

    def trainer(cb: Any, epochs: int) -> Any:
        return L.Trainer(callbacks=[cb], max_epochs=epochs, accelerator="cpu", devices=1, logger=False,
                         enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)

    torch.set_num_threads(1)
    out = tmp_path / "run"
    first = trainer(TripwireCallback(out_dir=out, save_interval=1, rules=[Counting(), _rule("once")]), 1)
    first.fit(Net(), data)
    first.save_checkpoint(tmp_path / "last.ckpt")
    for where in (out, tmp_path / "new"):
        counting = Counting()
        cb = TripwireCallback(out_dir=where, save_interval=1, rules=[counting, _rule("once"), "weight_update_ratio"])
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tripwire"):
            trainer(cb, 2).fit(Net(), data, ckpt_path=str(tmp_path / "last.ckpt"))
        assert counting.seen == 8  # 4 steps before the checkpoint, 4 after
        said = [r.getMessage() for r in caplog.records if "differ from the checkpoint's" in r.getMessage()]
        assert said == ["tripwire: this session's rules differ from the checkpoint's: 'weight_update_ratio' starts "
                        "fresh (not in the checkpoint); the other rules resume with their saved state"], said
        run = tripwire.open_run(where)
        assert run.status == "complete"
        assert run.steps("train") == (list(range(8)) if where == out else list(range(4, 8)))
        assert [f.step for f in run.findings if f.rule == "once"] == ([2] if where == out else [])
