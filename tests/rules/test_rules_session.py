"""Rules inside a Session: failures never stop training, custom rules, checkpoints, stored runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.rules import Rule, register_rule


class Boom(Rule):
    name = "boom"

    def check(self, history, step, mode):
        if step == 2:
            raise ZeroDivisionError("bad rule")
        return None


def test_a_raising_rule_is_recorded_and_disabled_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), rules=[Boom(), "loss_not_decreasing"], save_interval=1) as s:
        for i in range(300):
            s.step("train", i, {"loss": (1.0, "losses")})
    errors = [f for f in s.findings if f.kind == "error"]
    assert len(errors) == 1 and errors[0].rule == "boom" and errors[0].step == 2
    assert "ZeroDivisionError" in errors[0].message and "traceback" in errors[0].details
    assert [f.rule for f in s.findings if f.kind == "finding"] == ["loss_not_decreasing"]  # others keep running
    stored = tripwire.open_run(out).findings
    assert {f.rule for f in stored} == {"boom", "loss_not_decreasing"}


def test_strict_reraises_rule_errors() -> None:
    s = tripwire.Session(write=False, rules=[Boom()], strict=True, save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    with pytest.raises(tripwire.RuleError, match="rule 'boom' raised at step 2"):
        for i in range(1, 3):
            s.step("train", i, {"loss": (1.0, "losses")})


def test_custom_rule_subclass_function_and_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = tmp_path / "my_rules.py"
    mod.write_text(textwrap.dedent("""
        import tripwire
        from tripwire.rules import Rule, Requirement

        class HighLoss(Rule):
            name = "high_loss"
            def __init__(self, limit=5.0, **common):
                super().__init__(**common)
                self.limit = limit
            def requirements(self):
                return [Requirement("losses", reductions=("raw",))]
            def check(self, history, step, mode):
                latest = history.latest("loss", "raw", mode)
                if latest and latest[1] > self.limit:
                    return self.finding(step, mode, f"loss {latest[1]} above {self.limit}")

        def negative_loss(history, step, mode):
            latest = history.latest("loss", "raw", mode)
            if latest and latest[1] < 0:
                return "the loss is negative"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules:\n  - name: my_rules:HighLoss\n    limit: 3.0\n  - my_rules:negative_loss\n")
    s = tripwire.Session(str(cfg), write=False, save_interval=1)
    for i, v in enumerate([1.0, 4.0, -1.0]):
        s.step("train", i, {"loss": (v, "losses")})
    assert [(f.rule, f.step) for f in s.findings] == [("high_loss", 1), ("negative_loss", 2)]


def test_a_custom_rules_bad_config_is_refused_naming_its_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 16b: a class that is not a Rule passed every check and failed at step 0 (disabled, the
    # training went on); a plain ValueError from a rule's __init__ crashed `tripwire validate` with a
    # traceback; a rule's own ConfigError had no rules[i]; a misspelled attribute had no did-you-mean
    (tmp_path / "my_checked_rules.py").write_text(textwrap.dedent("""
        from tripwire import ConfigError
        from tripwire.rules import Rule

        class NotARule:
            pass

        class Checked(Rule):
            name = "checked"
            def __init__(self, k=1, limit=1.0, **common):
                super().__init__(**common)
                if k < 0:
                    raise ValueError(f"k must be >= 0, got {k}")
                if limit < 0:
                    raise ConfigError(f"checked.limit: got {limit}; accepted: a number >= 0")
            def check(self, history, step, mode):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\]: 'my_checked_rules:NotARule' is the class "
                                                   r"my_checked_rules.NotARule, which is not a Rule subclass"):
        tripwire.Session(write=False, rules=["my_checked_rules:NotARule"])
    with pytest.raises(tripwire.ConfigError, match=r"rules\[1\]: bad parameters for rule 'my_checked_rules:Checked': "
                                                   r"k must be >= 0, got -1"):
        tripwire.Session(write=False, rules=["loss_not_decreasing", {"name": "my_checked_rules:Checked", "k": -1}])
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[0\]: checked.limit: got -2"):
        tripwire.Session(write=False, rules=[{"name": "my_checked_rules:Checked", "limit": -2}])
    with pytest.raises(tripwire.ConfigError, match="has no attribute 'Chekced'; did you mean 'Checked'"):
        tripwire.Session(write=False, rules=["my_checked_rules:Chekced"])
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("rules:\n  - my_checked_rules:NotARule\n  - {name: my_checked_rules:Checked, k: -1}\n")
    from tripwire._cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(cfg)]) == 2  # (was a traceback, exit 1)


def test_register_rule_makes_a_yaml_name() -> None:
    @register_rule
    class AlwaysFires(Rule):
        name = "test_always_fires"

        def check(self, history, step, mode):
            return self.finding(step, mode, "always")

    s = tripwire.Session(write=False, rules=["test_always_fires"], save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    assert [f.rule for f in s.findings] == ["test_always_fires"]


def test_rule_state_survives_a_checkpoint() -> None:
    def make() -> tripwire.Session:
        return tripwire.Session(write=False, rules=[{"name": "vanishing_gradient"}], save_interval=1)

    def grads(step: int) -> dict:
        return {"gradients/a.weight": (np.full((2, 2), 1e-9), "gradients"), "gradients/b.weight": (np.ones((2, 2)), "gradients")}

    first = make()
    for i in range(2):
        first.step("train", i, grads(i))
    assert first.findings == []  # patience 3: two bad saves so far
    state = first.state_dict()
    resumed = make()
    # the history does not travel with a checkpoint, the streak does
    resumed.load_state_dict(state)
    resumed.step("train", 2, grads(2))
    assert [f.rule for f in resumed.findings] == ["vanishing_gradient"]


def test_rules_give_the_same_findings_over_a_stored_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rng = np.random.default_rng(1)
    rules = ["default", "overfit", "dead_relu"]
    with tripwire.Session(out_dir=str(out), rules=rules, save_interval=1) as s:
        for i in range(300):
            p = s.begin_step("train", i)
            p.add("loss", 2.3 + 0.01 * rng.standard_normal(), "losses")
            p.add("gradients/a.weight", np.full((3, 3), 1e-9), "gradients")
            p.add("gradients/b.weight", rng.normal(size=(3, 3)), "gradients")
            p.add("relu/output", np.zeros((4, 4)), "relu_outputs")
            s.end_step()
    live = sorted((f.rule, f.step) for f in s.findings)
    assert {r for r, _ in live} == {"loss_not_decreasing", "vanishing_gradient", "dead_relu"}
    # over the stored run (out of process), records are replayed as of their writing
    from tripwire._watch import Watcher

    import shutil

    shutil.rmtree(out / "findings")  # (watch never makes again a finding the run holds)
    watcher = Watcher(out, {"rules": rules}, echo=lambda f: None)
    replayed = watcher.watch(once=True)
    assert sorted((f.rule, f.step) for f in replayed) == live
    assert all(f.source == "watch" for f in replayed)


def test_the_architecture_doc_custom_rule_runs_as_written() -> None:
    """docs/architecture.md's custom rule: its imports (check_float included) and its shape."""
    doc = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    code = doc.split("## Rules (``tripwire.rules``)\n```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('name = "my_rule"', 'name = "test_doc_rule"').replace("...\n", "x = 1.0\n")
    namespace: dict = {}
    exec(compile(code, "architecture.md", "exec"), namespace)  # noqa: S102 - our own documentation
    rule = tripwire.rules.build_rules([{"name": "test_doc_rule", "threshold": 2.0}])[0]
    assert rule.threshold == 2.0
    with pytest.raises(tripwire.ConfigError, match=r"my_rule\.threshold"):
        tripwire.rules.build_rules([{"name": "test_doc_rule", "threshold": -1.0}])


def test_loss_rules_leave_out_a_better_high_metric_they_are_pointed_at(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 17e: loss_not_decreasing with loss='train-auc' stopped a healthy boosting run whose
    train-auc rose 0.935 -> 1.0 ("has fallen only 0% in 50 steps")."""
    s = tripwire.Session({"save": {"interval": 1}, "collections": ["metrics"],
                          "rules": [{"name": "loss_not_decreasing", "loss": "train-auc", "num_steps": 20},
                                    {"name": "oscillating_loss", "loss": "train-auc"}], "strict": True}, write=False)
    auc = 1.0 - 0.07 * np.exp(-np.arange(200) / 10)  # rises, then saturates at 1.0
    with caplog.at_level("WARNING", logger="tripwire"):
        for step, value in enumerate(auc):
            s.step("train", step, {"train-auc": (float(value), "metrics")})
    assert s.findings == []
    said = [r.getMessage() for r in caplog.records if "better high" in r.getMessage()]
    assert len(said) == 1 and "'train-auc'" in said[0]
    s.close()
    # a loss falls and is judged as before
    flat = tripwire.Session({"save": {"interval": 1}, "rules": [{"name": "loss_not_decreasing", "num_steps": 20}]},
                            write=False)
    for step in range(60):
        flat.step("train", step, {"loss": (1.0, "losses")})
    assert [f.rule for f in flat.findings] == ["loss_not_decreasing"]


def test_a_rule_listed_twice_is_refused_naming_both_entries() -> None:
    # trial 18a: the first of two loss_not_decreasing entries (one on loss, one on aux_loss) was dropped
    # without a word, and `tripwire validate` said "valid"
    rules = [{"name": "loss_not_decreasing", "loss": "loss"}, "overfit", {"name": "loss_not_decreasing", "loss": "aux_loss"}]
    with pytest.raises(tripwire.ConfigError, match=r"rules\[2\]: 'loss_not_decreasing' is listed already \(rules\[0\]\); "
                                                   r"a rule runs once per config .* give a regex \(loss: 'loss\|aux_loss'\)"):
        tripwire.Session(write=False, rules=rules)
    # an entry after a rule set replaces the set's rule, as before
    s = tripwire.Session(write=False, rules=["default", {"name": "loss_not_decreasing", "patience": 3}])
    assert [r.patience for r in s.rules if r.name == "loss_not_decreasing"] == [3]



def test_a_registered_name_before_the_module_entry_that_registers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 18d: validate accepted [module:Counting, registered_name] and refused the same rules the
    # other way round ("unknown rule")
    (tmp_path / "my_registering_rules.py").write_text(textwrap.dedent("""
        import tripwire
        from tripwire.rules import Rule

        @tripwire.register_rule
        class GradAbove(Rule):
            name = "test_grad_l2_above_18d"
            def check(self, history, step, mode):
                return None

        class Counting(Rule):
            name = "test_counting_18d"
            def check(self, history, step, mode):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    s = tripwire.Session(write=False, rules=["test_grad_l2_above_18d", "my_registering_rules:Counting"])
    assert [r.name for r in s.rules] == ["test_grad_l2_above_18d", "test_counting_18d"]
    with pytest.raises(tripwire.ConfigError, match=r"unknown rule 'no_such_rule_18d'.* a rule class registered with "
                                                   r"@tripwire.register_rule is known once its module is imported"):
        tripwire.Session(write=False, rules=["no_such_rule_18d"])


class _Explode(tripwire.rules.ExplodingTensor):
    name = "exploding_tensor"  # a user's subclass of the built-in under its name (a rule of another class
    # named like a built-in is refused: tests/rules/test_trial29j_rules.py)

    def check(self, history, step, mode):
        return None


class _Spike(tripwire.rules.Rule):
    name = "spike_21b"

    def __init__(self, factor: float = 2.0, **common) -> None:
        super().__init__(**common)
        self.factor = factor

    def check(self, history, step, mode):
        return None


def test_a_rule_runs_once_by_the_name_it_runs_under(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 21b: two objects of one rule class ran side by side under one name: the actions of the
    second replaced the first's (a stop_training listed first was lost); so did 'module:attribute'
    beside the name it registers, and a rule object named like a built-in beside the built-in."""
    with pytest.raises(tripwire.ConfigError, match=r"rules\[1\]: rule 'spike_21b' \(_Spike\) is listed already "
                                                   r"\(rules\[0\]: _Spike\); a rule runs once per config, by its name"):
        tripwire.Session(write=False, rules=[_Spike(2.0, actions=["stop_training"]), _Spike(5.0, actions=["record"])])
    with pytest.raises(tripwire.ConfigError, match=r"rules\[1\]: rule 'exploding_tensor' \(_Explode\) is listed "
                                                   r"already \(rules\[0\]: ExplodingTensor\)"):
        tripwire.Session(write=False, rules=["exploding_tensor", _Explode()])
    # trial 23d: an object before a named entry (objects are built last) was said the one listed already
    with pytest.raises(tripwire.ConfigError, match=r"rules\[1\]: rule 'exploding_tensor' \(ExplodingTensor\) is "
                                                   r"listed already \(rules\[0\]: _Explode\)"):
        tripwire.Session(write=False, rules=[_Explode(), "exploding_tensor"])
    (tmp_path / "myrules21b.py").write_text(textwrap.dedent("""
        import tripwire
        from tripwire.rules import Rule

        @tripwire.register_rule
        class LossSpike(Rule):
            name = "loss_spike_21b"
            def __init__(self, factor=2.0, **common):
                super().__init__(**common)
                self.factor = factor
            def check(self, history, step, mode):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"rules\[1\]: rule 'loss_spike_21b' \(LossSpike\) is listed already "
                                                   r"\(rules\[0\]: LossSpike\).*class AuxLossSpike\(LossSpike\): name = "
                                                   r"'aux_loss_spike_21b'"):
        tripwire.Session(write=False, rules=[{"name": "myrules21b:LossSpike", "factor": 2},
                                             {"name": "loss_spike_21b", "factor": 5}])
    # an entry of its own replaces a rule set's rule of its name, where the set had it
    mine = _Explode()
    s = tripwire.Session(write=False, rules=["default", mine])
    names = [r.name for r in s.rules]
    assert names.count("exploding_tensor") == 1 and s.rules[names.index("exploding_tensor")] is mine
    assert names == [r.name for r in tripwire.Session(write=False, rules=["default"]).rules]


def test_a_module_attribute_that_is_no_rule_is_named_with_what_it_is(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 23d: "rules[0]: got [], which is neither ..." did not name the entry written (myrules:CALLS)
    (tmp_path / "myrules23d.py").write_text("CALLS = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[0\]: 'myrules23d:CALLS' is \[\], which is neither a Rule "
                                                   r"subclass, a Rule instance nor a function; accepted: "):
        tripwire.Session(write=False, rules=["myrules23d:CALLS"])


def test_an_action_of_a_rule_that_cannot_load_is_named_by_the_rules_place() -> None:
    # trial 23d: "rules[loss_not_decreasing].actions[0]" where every other error says rules[1]
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[1\]\.actions\[0\]: cannot load action 'no_such_mod_23d:nope'"):
        tripwire.Session(write=False, rules=["overfit", {"name": "loss_not_decreasing",
                                                         "actions": ["no_such_mod_23d:nope"]}])
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[default\]\.actions\[0\]: cannot load action"):
        tripwire.Session(write=False, rules=[{"name": "default", "actions": ["no_such_mod_23d:nope"]}])


def test_a_rule_object_named_module_attribute_starts_afresh_in_each_session(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 23l: the module's one rule object carried its state from one session into the next (two
    # trainings or tuning trials in one process): every other session skipped the first save step
    (tmp_path / "rules23l.py").write_text(textwrap.dedent("""
        import tripwire
        CALLS = []
        def boom(history, step, mode):
            CALLS.append(step)
            raise ValueError("boom")
        Boom = tripwire.FunctionRule(boom, requirements=[tripwire.Requirement("losses", ("raw",))])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import rules23l  # type: ignore[import-not-found]

    for _ in range(3):
        rules23l.CALLS.clear()
        s = tripwire.Session(write=False, rules=["rules23l:Boom"], save_interval=5)
        for step in range(12):
            s.step("train", step, {"loss": (1.0, "losses")})
        s.close()
        assert rules23l.CALLS == [0] and [(f.rule, f.step, f.kind) for f in s.findings] == [("boom", 0, "error")]
    assert rules23l.Boom.state_dict() == tripwire.FunctionRule(rules23l.boom).state_dict()  # (never used itself)
