from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Finding, FunctionRule, Requirement, Rule, RuleError, Session, StoreClosedError, TrainingStopped
from tripwire._validate import check_float


class LossAbove(Rule):
    """Fires when the training loss exceeds a threshold: ``loss > threshold`` (default 10)."""

    name = "test_loss_above"

    def __init__(self, threshold: float = 10.0, **common) -> None:
        super().__init__(**common)
        self.threshold = check_float(threshold, "test_loss_above.threshold", minimum=0)

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",))]

    def check(self, history, step, mode):
        latest = history.latest("loss", "raw", mode)
        if latest is not None and latest[1] > self.threshold:
            return self.finding(step, mode, f"loss {latest[1]:.3g} > {self.threshold}", ["loss"], value=latest[1])
        return None


def _feed(session: Session, losses, grads: bool = False) -> list[tripwire.Decision]:
    out = []
    for step, loss in enumerate(losses):
        plan = session.begin_step("train", step)
        if plan.wants("gradients"):
            plan.add("gradients/fc.weight", np.full(3, loss), "gradients")
        plan.add("loss", loss, "losses")
        out.append(session.end_step())
    return out


def test_plan_is_falsy_and_wants_nothing_between_save_steps(tmp_path: Path) -> None:
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 5}, "collections": ["gradients"]})
    plan = s.begin_step("train", 3)
    assert not plan and not plan.wants("gradients") and not plan.add("gradients/x", np.ones(2), "gradients")
    s.end_step()
    plan = s.begin_step("train", 5)
    assert plan and plan.wants("gradients") and not plan.wants("weights")
    assert plan.collections == ["gradients"]
    s.end_step()
    s.close()


def test_a_collection_whose_patterns_match_nothing_is_named_at_close(tmp_path: Path, caplog) -> None:
    s = Session({"out_dir": str(tmp_path / "a"), "save": {"interval": 1},
                 "collections": {"gradients": {"include": ["^conv"]}, "losses": None}})
    for step in range(2):
        plan = s.begin_step("train", step)
        plan.add("gradients/fc1.weight", np.ones(3), "gradients")
        plan.add("loss", 1.0, "losses")
        s.end_step()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    msgs = [r.getMessage() for r in caplog.records if "matched no tensor" in r.getMessage()]
    assert len(msgs) == 1 and "'gradients'" in msgs[0] and "^conv" in msgs[0] and "gradients/fc1.weight" in msgs[0]
    caplog.clear()
    s = Session({"out_dir": str(tmp_path / "b"), "save": {"interval": 1},
                 "collections": {"gradients": {"include": ["^fc1"]}, "late": {"include": ["^fc"], "reductions": ["l2"], "save": {"start_step": 5}}}})
    plan = s.begin_step("train", 0)
    plan.add("gradients/fc1.weight", np.ones(3), "gradients")  # taken (no prefix needed); 'late' not due yet
    s.end_step()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert not [r for r in caplog.records if "matched no tensor" in r.getMessage()]


def test_a_custom_collection_that_matched_nothing_is_named_once(tmp_path: Path, caplog) -> None:
    # an any-kind collection: the names offered listed act/output twice (an activation and a ReLU
    # output), and a second warning said nothing of it was captured in eval, where it captured nothing at all
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1, "modes": {"eval": {"interval": 5}}},
                 "collections": {"anyconv": {"include": ["^conv"], "reductions": ["mean"]}, "losses": None}})
    for step in range(2):
        plan = s.begin_step("train", step)
        plan.add("act/output", np.ones(3), "activations")
        plan.add("act/output", np.ones(3), "relu_outputs")
        plan.add("loss", 1.0, "losses")
        s.end_step()
    for step in (1, 2):
        s.begin_step("eval", step)
        s.end_step()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "anyconv" in r.getMessage() and "matched no tensor" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith("names offered look like: act/output, loss"), said


def test_rule_stop_decision_and_findings_written(tmp_path: Path) -> None:
    rule = {"name": "tests.core.test_session:LossAbove", "threshold": 5, "actions": ["stop_training"]}
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": [rule]}, write=True)
    decisions = _feed(s, [1.0, 2.0, 7.0, 9.0])
    # fires once (step 3's decision holds no finding), and the stop holds at the later steps (trial 26c)
    assert [bool(d) for d in decisions] == [False, False, True, True] and decisions[3].findings == ()
    assert decisions[3].stopped_by is decisions[2].stopped_by
    assert decisions[2].stopped_by is s.stopped_by and s.stopped_by.step == 2
    assert "loss 7 > 5" in decisions[2].reason
    s.close()
    run = tripwire.open_run(tmp_path)
    assert run.status == "stopped"
    assert [(f.rule, f.step) for f in run.findings] == [("test_loss_above", 2)]


def test_patience_every_and_start_step(tmp_path: Path) -> None:
    r = LossAbove(threshold=5, patience=2, start_step=1)
    s = Session({"save": {"interval": 1}, "rules": [r], "actions": ["record"]}, write=False)
    _feed(s, [9.0, 1.0, 9.0, 9.0, 9.0])
    # step 0 is warm-up, step 2 is the first hit, step 3 the second consecutive: fires at 3
    assert [f.step for f in s.findings] == [3]
    r2 = LossAbove(threshold=5, every=3, repeat=True)
    s2 = Session({"save": {"interval": 1}, "rules": [r2], "actions": ["record"]}, write=False)
    _feed(s2, [9.0] * 7)
    assert [f.step for f in s2.findings] == [0, 3, 6]


def test_rule_requirements_are_captured_automatically() -> None:
    s = Session({"save": {"interval": 50}, "rules": [LossAbove()]}, write=False)
    assert "losses" in s.collections and s.collections["losses"].reduction.raw


def test_unsatisfiable_requirement_is_an_error() -> None:
    class NeedsDenseGrads(LossAbove):
        name = "test_needs_dense"

        def requirements(self):
            return [Requirement("gradients", reductions=("l2",), max_interval=5)]

    with pytest.raises(ConfigError, match=r"collections\.gradients\.save\.interval: 100 is too sparse for rule 'test_needs_dense'"):
        Session({"collections": {"gradients": {"save": {"interval": 100}}}, "rules": [NeedsDenseGrads()]}, write=False)
    # a mode's own interval is named as the key written (it said save.interval: 3, a key not in the file)
    with pytest.raises(ConfigError, match=r"^collections\.gradients\.save\.modes\.train\.interval: 30 is too sparse for "
                                          r"rule 'test_needs_dense', .*; accepted: 5 or less$"):
        Session({"collections": {"gradients": {"save": {"modes": {"train": {"interval": 30}}}}},
                 "rules": [NeedsDenseGrads()]}, write=False)
    with pytest.raises(ConfigError, match=r"disabled, but rule 'test_needs_dense' needs 'gradients' in mode 'train'"):
        Session({"collections": {"gradients": {"save": {"modes": {"train": {"enabled": False}}}}}, "rules": [NeedsDenseGrads()]}, write=False)
    # a collection the rule adds is saved as the top-level save says: disabled there, refused too
    # (tree_depth with training saving off was accepted and never ran; a fresh user's report)
    with pytest.raises(ConfigError, match=r"^save\.modes\.train: disabled, but rule 'test_needs_dense' needs 'gradients'"):
        Session({"save": {"modes": {"train": {"enabled": False}}}, "rules": [NeedsDenseGrads()]}, write=False)
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval: disabled, but rule 'overfit' needs 'losses' in mode 'eval'"):
        Session({"save": {"modes": {"eval": {"enabled": False}}}, "rules": ["overfit"]}, write=False)
    # not configured by the user: added with a dense enough interval
    # (in the modes the rule reads, train here; the others as the run saves: trial 28h)
    s = Session({"save": {"interval": 100}, "rules": [NeedsDenseGrads()]}, write=False)
    assert s.collections["gradients"].save.for_mode("train").interval == 5
    assert s.collections["gradients"].save.for_mode("eval").interval == 100
    # named, with no save config of its own (a fresh user's include_collections=["labels"]): the same
    s = Session({"save": {"interval": 100}, "rules": [NeedsDenseGrads()]}, include_collections=["gradients"], write=False)
    assert s.collections["gradients"].save.for_mode("train").interval == 5
    s = Session({"save": {"interval": 3}, "rules": [NeedsDenseGrads()]}, include_collections=["gradients"], write=False)
    assert s.collections["gradients"].save is None  # the run's interval is dense enough: left as it is
    # a sparse train override under a dense top level: the added collection was saved every 100 steps
    s = Session({"save": {"interval": 1, "modes": {"train": {"interval": 100}}}, "rules": [NeedsDenseGrads()]}, write=False)
    assert s.collections["gradients"].save.for_mode("train").interval == 5


def test_a_raising_rule_is_recorded_and_disabled(tmp_path: Path, caplog) -> None:
    calls = []

    def broken(history, step, mode):
        calls.append(step)
        raise ZeroDivisionError("boom")

    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": [FunctionRule(broken)]})
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        decisions = _feed(s, [1.0, 1.0, 1.0])
    assert calls == [0] and not any(decisions)
    s.close()
    [err] = tripwire.open_run(tmp_path).findings
    assert err.kind == "error" and err.rule == "broken" and "ZeroDivisionError: boom" in err.message
    assert "Traceback" in err.details["traceback"]

    strict = Session({"save": {"interval": 1}, "rules": [FunctionRule(broken)], "strict": True}, write=False)
    with pytest.raises(RuleError, match=r"rule 'broken' raised at step 0") as raised:
        _feed(strict, [1.0])
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    # "strict=True re-raises": the rule's own exception type catches it too
    strict = Session({"save": {"interval": 1}, "rules": [FunctionRule(broken)], "strict": True}, write=False)
    with pytest.raises(ZeroDivisionError, match=r"rule 'broken' raised at step 0.*boom"):
        _feed(strict, [1.0])


def test_strict_reraises_a_rule_error_of_any_type_as_that_type_where_python_allows() -> None:
    class NeedsTwo(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(a, b)

    for exc in (KeyError("k"), NeedsTwo(1, 2), ValueError("v"), tripwire.ConfigError("c")):
        def rule(history, step, mode, exc=exc):  # noqa: ANN001
            raise exc

        s = Session({"save": {"interval": 1}, "rules": [FunctionRule(rule, name="r")], "strict": True}, write=False)
        with pytest.raises(type(exc)) as raised:
            _feed(s, [1.0])
        assert isinstance(raised.value, RuleError) and raised.value.__cause__ is exc
        assert str(raised.value).startswith("rule 'r' raised at step 0 (train): ")  # (not a KeyError's quoted repr)


def test_a_notify_that_cannot_publish_is_one_line_and_training_goes_on(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    pytest.importorskip("boto3")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    notify = {"name": "notify", "topic_arn": "arn:aws:sns:us-east-1:123456789012:t", "region": "us-east-1"}
    cfg = {"save": {"interval": 1}, "rules": [{"name": "tests.core.test_session:LossAbove", "threshold": 1}],
           "actions": [notify, "record"]}
    s = Session(cfg, write=False)
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        decisions = _feed(s, [0.5, 2.0, 3.0])
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None and not any(decisions)
    assert "action 'notify' failed" in errors[0].getMessage() and "NoCredentialsError" in errors[0].getMessage()
    assert [f.step for f in s.findings] == [1]  # recorded all the same
    strict = Session({**cfg, "strict": True}, write=False)
    with pytest.raises(tripwire.ActionError, match="notify: could not publish"):
        _feed(strict, [2.0])


def test_function_rule_returning_a_message() -> None:
    s = Session({"save": {"interval": 1}, "rules": [FunctionRule(lambda h, step, mode: "odd" if step % 2 else None, name="odd_steps")],
                 "actions": ["record"]}, write=False)
    _feed(s, [1.0, 1.0])
    assert [(f.rule, f.step, f.message) for f in s.findings] == [("odd_steps", 1, "odd")]


def test_a_finding_outside_training_names_the_train_step_before_it() -> None:
    # "overfit at step 1391 (eval)": eval steps count validation batches, which a user cannot map
    s = Session({"save": {"interval": 1}, "actions": ["record"],
                 "rules": [FunctionRule(lambda h, step, mode: "high" if mode == "eval" and step == 5 else None,
                                        name="val_high", modes=["eval"])]}, write=False)
    for step in range(3):
        s.step("train", step, {"loss": (1.0, "losses")})
        for k in range(2):
            s.step("eval", 2 * step + k, {"val_loss": (1.0, "losses")})
    [f] = s.findings
    assert (f.step, f.mode, f.details["train_step"]) == (5, "eval", 2)
    assert str(f).startswith("[warning] val_high at step 5 (eval, after train step 2): high")
    # a rank other than 0 says which (two ranks' lines on one console: trial 17f)
    assert str(Finding(**{**f.__dict__, "worker": 1})).startswith(
        "[warning] val_high at step 5 (eval, after train step 2, rank 1): high")
    assert str(Finding(**{**f.__dict__, "worker": 1, "mode": "train"})).startswith("[warning] val_high at step 5 (train, rank 1)")
    assert Finding.from_dict(f.to_dict()).details["train_step"] == 2


def test_actions_raise_log_callable(tmp_path: Path, caplog) -> None:
    seen: list[Finding] = []
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1},
                 "rules": [{"name": "tests.core.test_session:LossAbove", "threshold": 1, "actions": ["log", seen.append, "raise"]}]})
    with caplog.at_level(logging.WARNING, logger="tripwire"), pytest.raises(TrainingStopped) as info:
        _feed(s, [0.5, 2.0])
    assert isinstance(info.value, RuntimeError) and info.value.finding.step == 1
    assert [f.step for f in seen] == [1]
    assert "test_loss_above at step 1" in caplog.text
    s.close()
    assert tripwire.open_run(tmp_path).findings[0].step == 1  # written before raising


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (["stop"], r"unknown action 'stop'; did you mean 'stop_training'\?"),
        ([{"name": "log", "level": "loud"}], r"level: got 'loud'"),
        ([{"name": "notify"}], r"the notify action needs 'topic_arn'"),
        (["no.such.module:fn"], r"cannot load action 'no.such.module:fn'"),
        # trial 19a: a misspelled attribute got no "did you mean"
        (["logging:infoo"], r"actions\[0\]: cannot load action 'logging:infoo': 'logging' has no attribute 'infoo'; "
                            r"did you mean 'info'\?"),
    ],
)
def test_bad_actions(actions, match) -> None:
    with pytest.raises(ConfigError, match=match):
        Session({"actions": actions}, write=False)


def test_unknown_rule_and_parameters() -> None:
    with pytest.raises(ConfigError, match=r"unknown rule 'no_such_rule'"):
        Session({"rules": ["no_such_rule"]}, write=False)
    with pytest.raises(ConfigError, match=r"rules\[0\]\.treshold: unknown parameter of rule 'tests.core.test_session:LossAbove'; did you mean 'threshold'\?"):
        Session({"rules": [{"name": "tests.core.test_session:LossAbove", "treshold": 3}]}, write=False)
    with pytest.raises(ConfigError, match=r"test_loss_above\.threshold: got -1\.0"):
        Session({"rules": [{"name": "tests.core.test_session:LossAbove", "threshold": -1.0}]}, write=False)
    with pytest.raises(ConfigError, match=r"cannot import module 'nope'"):
        Session({"rules": ["nope:Rule"]}, write=False)


def test_state_dict_round_trip_continues_the_rules() -> None:
    cfg = {"save": {"interval": 1}, "actions": ["record"]}
    a = Session(cfg, rules=[LossAbove(threshold=5, patience=3)], write=False)
    _feed(a, [9.0, 9.0])
    state = a.state_dict()
    b = Session(cfg, rules=[LossAbove(threshold=5, patience=3)], write=False)
    b.load_state_dict(state)
    assert b.mode_steps["train"] == 2
    plan = b.begin_step("train", 2)
    plan.add("loss", 9.0, "losses")
    b.end_step()
    assert [f.step for f in b.findings] == [2]  # the streak survived: third consecutive hit
    # another rule list (trial 26a: a ConfigError "saved rules [...] differ"): the rule of the same name
    # resumes with its state, the new one starts fresh
    c = Session(cfg, rules=[FunctionRule(lambda h, s, m: None, name="other"), LossAbove(threshold=5, patience=3)],
                write=False)
    c.load_state_dict(state)
    assert c.rules[1].state_dict()["tripwire"]["streak"] == {"train": 2} and c.rules[0].state_dict()["tripwire"]["streak"] == {}


def test_external_stop_request_is_honoured(tmp_path: Path) -> None:
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}})
    assert not _feed(s, [1.0])[0]
    tripwire.request_stop(tmp_path, Finding("watch_rule", 0, "train", "seen by the watcher", source="watch"))
    s._stop_checked = 0.0
    plan = s.begin_step("train", 1)
    plan.add("loss", 1.0, "losses")
    d = s.end_step()
    assert d.stop and d.stopped_by.rule == "watch_rule" and s.stopped_by is d.stopped_by
    s.close()


def test_scalars_from_python_and_counted_steps() -> None:
    s = Session({"save": {"interval": 2}}, write=False)
    for _ in range(5):
        plan = s.begin_step("eval")
        plan.add("val_loss", 0.5, "losses")
        s.end_step()
    assert s.history.steps("eval") == [0, 2, 4]
    assert s.mode_steps["eval"] == 5 and s.global_step == 5
    with pytest.raises(ConfigError, match=r"mode: got 'valid'"):
        s.begin_step("valid")


def test_planned_steps_reach_readers_of_the_run(tmp_path) -> None:
    # tripwire watch evaluates rules over the stored run: it must scale windows as the session did
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1)
    assert tripwire.open_run(tmp_path / "run").planned_steps is None
    session.set_planned_steps(1500)
    session.step("train", 0, {"loss": (1.0, "losses")})
    run = tripwire.open_run(tmp_path / "run")
    assert run.planned_steps == 1500
    session.close()
    assert tripwire.open_run(tmp_path / "run").planned_steps == 1500


def test_reopen_continues_the_same_run_after_close(tmp_path: Path) -> None:
    session = tripwire.Session({"out_dir": str(tmp_path), "save": {"interval": 1}})
    session.set_planned_steps(40)
    session.step("train", 0, {"loss": (1.0, "losses")})
    session.reopen()  # open writer: nothing happens
    session.close()
    assert tripwire.open_run(tmp_path).is_complete
    session.reopen()
    assert session.writer is not None and not session.writer.closed
    session.step("train", 1, {"loss": (0.5, "losses")})
    session.close()
    run = tripwire.open_run(tmp_path)
    assert run.is_complete and run.steps() == [0, 1] and run.planned_steps == 40
    assert run.latest("loss", "raw") == (1, 0.5)
    quiet = tripwire.Session({"out_dir": str(tmp_path / "none")}, write=False)
    quiet.close()
    quiet.reopen()
    assert quiet.writer is None


def test_check_config_refuses_what_the_integration_cannot_feed() -> None:
    from tripwire._config import load_config
    from tripwire._session import check_config

    provides = ("weights", "gradients")
    with pytest.raises(ConfigError, match=r"rules\[0\]: tree_depth needs 'trees', which the fake integration does not "
                                          r"capture \(it captures: gradients, losses, metrics, weights\)"):
        check_config(load_config(rules=["tree_depth"]), framework="fake", provides=provides)
    with pytest.raises(ConfigError, match=r"collections\.inputs: the fake integration does not capture 'inputs'"):
        check_config(load_config(include_collections=["inputs"]), framework="fake", provides=provides)
    with pytest.raises(ConfigError, match=r"actions\[1\]: unknown action 'stop-training'; did you mean 'stop_training'"):
        check_config(load_config(actions=["log", "stop-training"]))
    # losses and metrics count as captured everywhere, but do not make a rule that needs more useful
    assert [r.name for r in check_config(load_config(rules=["overfit"]), framework="fake", provides=())] == ["overfit"]
    with pytest.raises(ConfigError, match=r"rules\[0\]: dead_relu needs 'relu_outputs'"):
        check_config(load_config(rules=["dead_relu"]), framework="fake", provides=())
    # a rule set keeps the members the integration can feed; the same rule named alone is refused
    kept = [r.name for r in check_config(load_config(rules=["default"]), framework="fake", provides=())]
    assert kept == ["exploding_tensor", "loss_not_decreasing", "oscillating_loss"]
    with pytest.raises(ConfigError, match=r"rules\[1\]: vanishing_gradient needs 'gradients'"):
        Session({"rules": ["default", "vanishing_gradient"]}, write=False, framework="fake", provides=())
    # without ``provides`` (a hand-written loop) anything may come
    assert len(check_config(load_config(rules=["tree_depth", "default"]))) == 7  # (tree_depth and the default set, loss_scale_collapse with it: session 30)


def _train_and_validate(s: Session, steps: int, train_name: str, train_kind: str) -> None:
    """``steps`` train steps offering ``train_name`` (1 / (step + 1)), each followed by an eval
    step offering ``val_loss`` 1.0."""
    for step in range(steps):
        plan = s.begin_step("train", step)
        plan.add(train_name, 1.0 / (step + 1), train_kind)
        s.end_step()
        plan = s.begin_step("eval", step)
        plan.add("val_loss", 1.0, "losses")
        s.end_step()


def test_a_missing_training_loss_is_not_offered_the_validation_loss(tmp_path: Path, caplog) -> None:
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": ["loss_not_decreasing"],
                 "collections": ["losses", "metrics"]})
    _train_and_validate(s, 2, "train_acc", "metrics")  # manual optimization returning nothing: no "loss"
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    warned = [r.getMessage() for r in caplog.records if "matches no loss" in r.getMessage()]
    assert len(warned) == 1 and "did you mean" not in warned[0] and "captured: train_acc, val_loss" in warned[0]


def test_a_validation_name_that_matches_nothing_is_likened_to_held_out_names(tmp_path: Path, caplog) -> None:
    # XGBoost's run: watch's bare overfit (val_loss) was told "did you mean 'train-logloss'?"
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": [{"name": "overfit"}],
                 "collections": ["losses", "metrics"]})
    for step in range(3):
        s.step("train", step, {"train-logloss": (0.5, "metrics")})
        s.step("eval", step, {"validation-logloss": (0.6, "metrics")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    [said] = [r.getMessage() for r in caplog.records if "validation='val_loss'" in r.getMessage()]
    assert "did you mean 'validation-logloss'?" in said


def test_close_warns_about_class_rules_naming_labels_or_predictions_never_captured(tmp_path: Path, caplog) -> None:
    # trial 16c: class_imbalance(labels="lbl") read nothing all run and said nothing; names are found
    # in the names (labels finds a multi-output model's labels/0), so only a name found nowhere is named
    rules = [{"name": "class_imbalance", "labels": "lbl"}, {"name": "confusion", "predictions": "y_pred"}]
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": rules,
                 "collections": ["losses", "labels", "predictions"]})
    for step in range(2):
        s.step("train", step, {"loss": (1.0, "losses")})
        s.step("eval", step, {"labels/0": (np.zeros(4), "labels"), "predictions/0": (np.zeros((4, 3)), "predictions")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    warned = [r.getMessage() for r in caplog.records if "matches no" in r.getMessage()]
    assert warned == [
        "tripwire: rule 'class_imbalance': labels='lbl' matches no labels or predictions tensor of this run; did you "
        "mean 'labels/0'? (captured: labels/0, predictions/0); the rule read nothing under that name",
        "tripwire: rule 'confusion': predictions='y_pred' matches no labels or predictions tensor of this run "
        "(captured: labels/0, predictions/0); the rule read nothing under that name",
    ]


def test_close_says_when_a_default_loss_has_nothing_lower_is_better_to_read(tmp_path: Path, caplog) -> None:
    # trial 16d: an XGBoost ranker logs ndcg only: "loss='loss' matches no loss or metric", a name the
    # user never wrote, without why
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": ["loss_not_decreasing"],
                 "collections": ["losses", "metrics"]})
    for step in range(3):
        s.step("train", step, {"train-ndcg@5": (0.5 + step / 10, "metrics"), "validation-ndcg@5": (0.4, "metrics")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    [said] = [r.getMessage() for r in caplog.records if "matches no" in r.getMessage()]
    assert said == ("tripwire: rule 'loss_not_decreasing': loss='loss' (its default) matches no loss or metric of this "
                    "run, and none of the training's metrics is lower-is-better (train-ndcg@5 is higher-is-better; "
                    "captured: train-ndcg@5, validation-ndcg@5): the rule read nothing; name a lower-is-better metric "
                    "with loss=..., or leave the rule out")


def test_close_warns_about_rule_parameters_naming_a_loss_or_metric_never_captured(tmp_path: Path, caplog) -> None:
    rules = [{"name": "overfit", "validation": "val_los"}, {"name": "loss_not_decreasing", "loss": "loss"},
             {"name": "oscillating_loss", "loss": "train-.*"}]
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": rules, "collections": ["losses", "metrics"]})
    _train_and_validate(s, 3, "loss", "losses")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "tripwire: rule 'overfit': validation='val_los' matches no loss or metric of this run; did you mean "
        "'val_loss'? (captured: loss, val_loss); the rule read nothing under that name",
        "tripwire: rule 'oscillating_loss': loss='train-.*' matches no loss or metric of this run "
        "(captured: loss, val_loss); the rule read nothing under that name",
    ]
    from tripwire._cli import main

    cfg = tmp_path / "watch.yaml"
    cfg.write_text("rules:\n  - name: overfit\n    validation: val_los\n")
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["watch", str(tmp_path), "--once", "--config", str(cfg)]) == 3  # not all judged
    assert "tripwire watch: rule 'overfit': validation='val_los' matches no loss or metric" in err.getvalue()


def test_a_save_range_without_steps_is_refused_when_a_rule_needs_it() -> None:
    with pytest.raises(ConfigError, match=r"save: start_step 0 and end_step 0 save no step of mode 'train', but rule "
                                          r"'exploding_tensor' needs 'losses' there"):
        Session({"save": {"end_step": 0}, "rules": ["default"]}, write=False)
    with pytest.raises(ConfigError, match=r"collections\.gradients\.save: start_step 5 and end_step 5"):
        Session({"collections": {"gradients": {"save": {"start_step": 5, "end_step": 5}}}, "rules": ["vanishing_gradient"]},
                write=False)
    Session({"save": {"end_step": 0}}, write=False).close()  # no rule: nothing starves
    Session({"save": {"start_step": 5, "end_step": 5, "steps": [7]}, "rules": ["default"]}, write=False).close()


def test_an_evaluation_only_run_is_not_warned_about_training_losses(tmp_path: Path, caplog) -> None:
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": ["default"]})
    plan = s.begin_step("eval", 0)
    plan.add("val_loss", 1.0, "losses")
    s.end_step()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_new_training_into_a_run_that_holds_records_is_named_once(tmp_path, caplog) -> None:
    """Running the same script twice with one out_dir appends the second training after the first
    (nothing is lost); the second session says so at its first step, once. A resumed session
    (load_state_dict) continues the run: no message."""

    def train(resume: dict | None = None) -> dict:
        with Session(out_dir=str(tmp_path / "run"), save_interval=1) as s:
            if resume is not None:
                s.load_state_dict(resume)
            for i in range(3):
                s.step("train", i, {"loss": (1.0, "losses")})
            return s.state_dict()

    with caplog.at_level(logging.WARNING, logger="tripwire"):
        state = train()
        assert not [r for r in caplog.records if "already holds records" in r.getMessage()]
        train()
        msgs = [r.getMessage() for r in caplog.records if "already holds records" in r.getMessage()]
        assert len(msgs) == 1 and "own out_dir" in msgs[0]
        caplog.clear()
        train(resume=state)
        assert not [r for r in caplog.records if "already holds records" in r.getMessage()]
    steps, _ = tripwire.open_run(tmp_path / "run").series("loss", "raw", "train")
    assert steps.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2]  # every training's records kept


def test_a_checkpoint_holds_no_step_the_run_lacks_even_when_the_process_dies_at_once(tmp_path: Path) -> None:
    # state_dict() queued the kept losses without waiting for the writer: killed a few ms after
    # its checkpoint, a process lost steps the checkpoint said were done
    import subprocess
    import sys

    code = (
        "import os, sys, tripwire\n"
        "s = tripwire.Session(out_dir=sys.argv[1], save_interval=5)\n"
        "for step in range(31):\n"
        "    s.step('train', step, {'loss': (0.1 * step, 'losses')})\n"
        "state = s.state_dict()\n"
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    steps, values = tripwire.open_run(tmp_path / "run").series("loss", "raw", "train")
    assert steps.tolist() == list(range(31))


def test_none_is_no_value_and_is_skipped(tmp_path: Path) -> None:
    # the .grad of a frozen parameter: add() said True, then end_step failed naming nothing
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1, include_collections=["gradients"])
    plan = s.begin_step("train", 0)
    assert plan.add("gradients/frozen.weight", None, "gradients") is False
    assert plan.add("gradients/fc.weight", np.ones(3), "gradients") is True
    s.end_step()
    s.close()
    assert tripwire.open_run(tmp_path / "run").tensor_names(collection="gradients") == ["gradients/fc.weight"]


def test_a_hand_written_loops_epoch_values_are_kept_with_summary(tmp_path: Path, caplog) -> None:
    # Session.step("eval", epoch, ...) under the default interval kept only every 10th epoch's
    # val_loss, and a test loss of one step none at all, silently
    s = Session(out_dir=str(tmp_path / "a"))
    for epoch in range(12):
        s.step("eval", epoch, {"val_loss": (1.0 / (epoch + 1), "losses")}, summary=True)
    s.close()
    assert tripwire.open_run(tmp_path / "a").steps("eval") == list(range(12))
    s = Session(out_dir=str(tmp_path / "b"), save_interval=5)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.step("test", 1, {"test_loss": (0.5, "losses")})  # step 1 of test: not a save step
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "no test step" in r.getMessage()]
    assert len(said) == 1 and "nothing of losses, metrics was captured in test" in said[0], said
    assert "Session.step('test', ..., summary=True)" in said[0]


def test_a_train_step_that_does_not_increase_is_named_once(tmp_path: Path, caplog) -> None:
    # one begin_step per micro-batch under the optimizer step's number: stored silently as several
    # records per step
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            for _micro in range(2):
                s.step("train", step, {"loss": (1.0, "losses")})
        s.step("train", 2, {"train_acc": (0.5, "metrics")}, summary=True)  # an epoch summary: fine
    s.close()
    said = [r.getMessage() for r in caplog.records if "train steps must increase" in r.getMessage()]
    assert said == ["tripwire: train step 0 came after train step 0: train steps must increase, one begin_step per "
                    "optimizer step (with gradient accumulation, offer the mean of the micro-batches' losses once, "
                    "at the step); repeated steps are stored as they come, several records each"]


def test_a_resume_from_a_checkpoint_older_than_the_run_names_the_steps_done_twice(tmp_path: Path, caplog) -> None:
    # a crash after the checkpoint of step 4 (steps 5-7 written), then a resume from it: the resumed
    # steps 5-7 are appended after the dead attempt's, and a reader sees both
    out = str(tmp_path / "run")
    s = Session(out_dir=out, save_interval=1)
    for step in range(5):
        s.step("train", step, {"loss": (1.0, "losses")})
    s.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
    state = s.state_dict()
    for step in range(5, 8):
        s.step("train", step, {"loss": (2.0, "losses")})
    s.step("eval", 1, {"val_loss": (2.0, "losses")}, summary=True)  # a validation after the checkpoint too
    for step in (1, 2, 3):  # a test after it: not done again by the resumed fit (it said "test steps 0 to 3")
        s.step("test", step, {"test_loss": (2.0, "losses")})
    s.flush()
    s.writer.abandon()  # (the crash: no close, no end marker; the dead process's shard lock is gone)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed = Session(out_dir=out, save_interval=1)
        resumed.load_state_dict(state)
        for step in range(5, 9):
            resumed.step("train", step, {"loss": (3.0, "losses")})
        resumed.close()
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1 and "holds train steps 5 to 7 and eval step 1 of worker 0, written" in said[0], said
    assert tripwire.open_run(out).series("loss", "raw", "train")[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8]


def test_close_names_a_rule_the_training_never_fed(tmp_path: Path, caplog) -> None:
    # dead_relu named, but the training offered no ReLU output (a Keras activation given as a
    # lambda, an MXNet net hybridized before registration): silent in process, named by watch only
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=["dead_relu", "loss_not_decreasing"])
    for step in range(3):
        s.step("train", step, {"loss": (1.0, "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert said == ["tripwire: rule 'dead_relu' had nothing to read: no tensor of the 'relu_outputs' collection was "
                    "captured (the run holds tensors of: losses): the rules asked for the collection, but the training "
                    "offered no such tensor; a model with no ReLU layer (a GRU, an LSTM, sigmoid or tanh layers only) "
                    "has none, and a ReLU called as a function in a forward pass is no layer and is not captured "
                    "(F.relu, torch.relu, the default activation of nn.TransformerEncoderLayer and "
                    "nn.TransformerDecoderLayer; keras.ops.relu in a layer's call): give it as a layer (nn.ReLU(); "
                    "activation=nn.ReLU() in nn.TransformerEncoderLayer; keras.layers.ReLU() or activation='relu'), "
                    "so the rule never judged"]


def test_close_names_rules_missing_the_same_collection_in_one_message(tmp_path: Path, caplog) -> None:
    # an XGBoost run without evaluation sets logged three warnings that differed in the rule's name
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1,
                rules=["loss_not_decreasing", "oscillating_loss", "exploding_tensor", "dead_relu"])
    for step in range(3):
        s.step("train", step, {"w": (np.ones(4), "weights")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert len(said) == 2
    assert said[0].startswith("tripwire: rules 'loss_not_decreasing', 'oscillating_loss', 'exploding_tensor' had "
                              "nothing to read: no tensor of the 'losses' collection was captured (the run holds "
                              "tensors of: none)")
    assert said[0].endswith("so these rules never judged")
    assert said[1].startswith("tripwire: rule 'dead_relu' had nothing to read") and said[1].endswith("so the rule never judged")


def test_an_optional_input_missing_is_not_named_at_close(tmp_path: Path, caplog) -> None:
    # saturated_activation reads relu_outputs only to tell ReLU layers apart: a tanh-only model
    # (no ReLU) was told the rule "had nothing to read ... never judged" right after it fired
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=["saturated_activation"],
                collections=["activation_inputs", "relu_outputs", "losses"])
    for step in range(3):
        s.step("train", step, {"loss": (1.0, "losses"), "sat/tanh/input": (np.full(50, 9.0), "activation_inputs")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    assert [f.rule for f in s.findings] == ["saturated_activation"]
    assert not [r for r in caplog.records if "had nothing to read" in r.getMessage()]


def test_two_trainings_writing_one_out_dir_at_once_are_refused(tmp_path: Path) -> None:
    """A second training on the same out_dir and rank while the first still writes: its records
    would interleave with the first's (a fresh user's two processes did) and its open would cut the
    first's record being written; refused, naming the writer. Once the first ends, it appends."""
    out = str(tmp_path / "run")
    first = Session(out_dir=out, save_interval=1)
    first.step("train", 0, {"loss": (1.0, "losses")})
    with pytest.raises(ConfigError, match=r"out_dir: got '.*run', whose worker 0 is being written by another "
                                          r"training \(another session of this process that is still open: a second callback with the same "
                                          r"out_dir in this training, or one left open.*close\(\)\); "
                                          r"accepted: a directory no other training writes to"):
        Session(out_dir=out, save_interval=1)
    other = subprocess.run([sys.executable, "-c", f"import tripwire; tripwire.Session(out_dir={out!r})"],
                           capture_output=True, text=True)
    assert other.returncode == 1 and re.search(r"being written by another training \(pid \d+ on .*\)", other.stderr)
    assert Session(out_dir=out, save_interval=1, rank=1, world_size=2).close() is None  # another worker's shard
    first.step("train", 1, {"loss": (1.0, "losses")})
    first.close()
    second = Session(out_dir=out, save_interval=1)
    second.step("train", 2, {"loss": (2.0, "losses")})
    second.close()
    assert tripwire.open_run(out).series("loss", "raw", "train")[0].tolist() == [0, 1, 2]


def test_a_session_that_writes_nothing_claims_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without out_dir a writing session claims tripwire-runs/run-<date>-<time>; one with
    write=False made an empty one each time (thousands under the test suite's working directory)."""
    monkeypatch.chdir(tmp_path)
    s = Session({"save": {"interval": 1}}, write=False)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.close()
    assert list(tmp_path.iterdir()) == []
    with Session({"save": {"interval": 1}}) as written:
        written.step("train", 0, {"loss": (1.0, "losses")})
    assert [p.name for p in (tmp_path / "tripwire-runs").iterdir()] == [written.out_dir.name]


def test_a_session_left_open_at_exit_is_written_and_marked_failed(tmp_path: Path) -> None:
    # a training that raised where no callback hook saw it (a Keras data pipeline), or a loop that
    # never called close(): the run read "running" for ever and lost its last queued records
    out = tmp_path / "run"
    code = ("import tripwire\n"
            f"s = tripwire.Session(out_dir={str(out)!r}, save_interval=1)\n"
            "for step in range(40):\n"
            "    s.step('train', step, {'loss': (float(step), 'losses')})\n")
    # ... and one the script dropped before exit (collected: its run was never ended)
    dropped = code + "import gc\ndel s\ngc.collect()\n"
    for program in (code, dropped):
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "still open" in done.stderr and "marked failed" in done.stderr, done.stderr
        run = tripwire.open_run(out)
        assert run.status == "failed" and run.series("loss")[0].tolist()[-40:] == list(range(40))
    closed = ("import tripwire\n"
              f"with tripwire.Session(out_dir={str(tmp_path / 'closed')!r}) as s:\n"
              "    s.step('train', 0, {'loss': (1.0, 'losses')})\n")
    done = subprocess.run([sys.executable, "-c", closed], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "still open" not in done.stderr, done.stderr
    assert tripwire.open_run(tmp_path / "closed").status == "complete"


def test_a_kept_every_step_loss_is_the_value_at_its_step_even_in_a_reused_buffer(tmp_path: Path) -> None:
    # a gradient-accumulation loop keeping the loss mean in one buffer (zero_() then +=): every kept
    # step read the buffer's value at the next save step (11.5 for steps 1-9 instead of 2.5 ... 10.5)
    import torch

    acc = torch.zeros(())
    with Session(out_dir=str(tmp_path / "run")) as s:  # save interval 10, every-step losses
        for step in range(12):
            acc.zero_()
            acc += step + 1.5
            plan = s.begin_step("train", step)
            plan.add("loss", acc, "losses")
            s.end_step()
    steps, values = tripwire.open_run(tmp_path / "run").series("loss")
    assert steps.tolist() == list(range(12)) and values.tolist() == [k + 1.5 for k in range(12)]


def test_misused_step_calls_are_named() -> None:
    s = Session(save_interval=1, write=False)
    plan = s.begin_step("train", 0)
    plan.add("loss", 1.0, "losses")
    s.end_step()
    with pytest.raises(tripwire.StepEndedError, match=r"add\('acc'\): the train step 0 has ended \(end_step ran"):
        plan.add("acc", 0.5, "metrics")  # a metric logged after end_step: it was dropped, add said True
    plan = s.begin_step("train", 1)
    with pytest.raises(ConfigError, match=r"add\('w'\): kind='gradient'; did you mean 'gradients'\?; accepted: "):
        plan.add("w", np.ones(3), "gradient")
    with pytest.raises(ConfigError, match=r"add\('y'\): kind=None; accepted: "):
        plan.add("y", np.ones(3), None)
    with pytest.raises(ConfigError, match=r"add: name=3 \(int\); accepted: a string"):
        plan.add(3, np.ones(3), "weights")
    with pytest.raises(ConfigError, match=r"add\('note'\): got a str \('hello'\); accepted: a tensor, an array or a number"):
        plan.add("note", "hello", "metrics")
    s.end_step()
    with pytest.raises(ConfigError, match=r"step: tensors\['loss'\] is float 1.0; accepted: a \(tensor, kind\) pair"):
        s.step("train", 2, {"loss": 1.0})
    with pytest.raises(ConfigError, match=r"begin_step: step=-5; accepted: an integer from 0 to 2\*\*63 - 1"):
        s.begin_step("train", -5)
    with pytest.raises(ConfigError, match=r"load_state_dict: got a mapping with the keys \['bias', 'weight'\]; accepted: "
                                          r"what Session.state_dict\(\) returned"):
        s.load_state_dict({"weight": 1, "bias": 2})  # a model's state_dict by mistake
    with pytest.raises(ConfigError, match=r"load_state_dict: got a list"):
        s.load_state_dict([])  # type: ignore[arg-type]


def test_a_rule_judges_each_mode_on_its_own_even_when_their_step_numbers_meet() -> None:
    # Lightning with overfit_batches=10: train steps 0-9 and eval steps 1-10 per epoch; an eval
    # evaluation at step 10 made the rule skip train step 10, and every train step after (a NaN
    # loss at step 25 never fired in process; a fresh user's report)
    seen: list[tuple[str, int]] = []

    def spy(history, step, mode):  # type: ignore[no-untyped-def]
        seen.append((mode, step))

    s = Session({"save": {"interval": 10}, "rules": [FunctionRule(spy, modes=["train", "eval"])]}, write=False)
    for epoch in range(3):
        for b in range(10):
            s.step("train", 10 * epoch + b, {"loss": (1.0, "losses")})
        for b in range(10):
            s.step("eval", 10 * epoch + b + 1, {"val_loss": (1.0, "losses")})
    assert [st for m, st in seen if m == "train"] == [0, 10, 20]
    assert [st for m, st in seen if m == "eval"] == [10, 20, 30]
    rule = s.rules[0]
    state = rule.state_dict()
    assert state["tripwire"]["last_eval"] == {"train": 20, "eval": 30}
    rule.load_state_dict({"streak": 2, "last_eval": 7})  # a state saved before the counts were per mode
    assert rule._last_eval == {"train": 7, "eval": 7} and rule._streak == {"train": 2, "eval": 2}


def test_close_names_offered_kinds_that_no_collection_takes(tmp_path: Path, caplog) -> None:
    # a collections mapping that set up gradients only: the loss and metrics handed over went nowhere
    # (an integration's session says it at close; a hand-written loop's at the first offer of each
    # kind, and not again at close: trial 21f)
    for framework in ("fake", "python"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            s = Session({"out_dir": str(tmp_path / f"run-{framework}"), "save": {"interval": 1},
                         "collections": {"gradients": {"reductions": ["l2"]}}}, framework=framework)
            for step in range(2):
                s.step("train", step, {"loss": (1.0, "losses"), "acc": (0.5, "metrics"),
                                       "gradients/w": (np.ones(4), "gradients")})
            s.close()
        closing = [r.getMessage() for r in caplog.records if "went to no collection" in r.getMessage()]
        offered = [r.getMessage() for r in caplog.records if "is not captured" in r.getMessage()]
        if framework == "fake":
            [said] = closing
            assert "'losses' (loss); 'metrics' (acc)" in said and "collections (gradients)" in said and not offered
        else:
            assert not closing and len(offered) == 2 and "'loss', offered as losses" in offered[0]


def test_close_names_a_collection_asked_for_that_was_never_offered(tmp_path: Path, caplog) -> None:
    # activations of a hybridized MXNet net: asked for by name, captured nothing, nothing said
    s = Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "collections": ["losses", "activations", "gradients"]},
                framework="mxnet")
    for step in range(2):
        s.step("train", step, {"loss": (1.0, "losses"), "gradients/w": (np.ones(4), "gradients")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "captured nothing" in r.getMessage()]
    assert said == ["tripwire: collection 'activations' captured nothing: the training offered no tensor of its kinds "
                    "(activations) in this session (see docs/mxnet.md for what it captures, and when)"]


def test_a_predict_session_does_not_say_labels_captured_nothing(tmp_path: Path, caplog) -> None:
    # trial 24c: trainer.predict after a fit that captured labels warned "collection 'labels' captured
    # nothing: the training offered no tensor": prediction batches have no labels
    config = {"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "collections": ["labels", "predictions", "inputs"]}
    s = Session(config, framework="lightning")
    s.step("predict", 1, {"predictions": (np.ones(4), "predictions")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    said = [r.getMessage() for r in caplog.records if "captured nothing" in r.getMessage()]
    # (trial 42a: "the training" said of a predict alone)
    assert said == ["tripwire: collection 'inputs' captured nothing: the predict steps offered no tensor of its kinds "
                    "(inputs) in this session (see docs/lightning.md for what it captures, and when)"]


def test_a_resumed_session_judges_the_whole_training_not_only_what_came_after_the_checkpoint(tmp_path: Path) -> None:
    # a flat loss checkpointed at step 39, killed at 45, resumed from 40: loss_not_decreasing fired
    # at step 100 ("in 60 steps") instead of 60, as an uninterrupted run does (a fresh user's report)
    def flat(session: Session, steps: range) -> list[int]:
        fired = []
        for step in steps:
            d = session.step("train", step, {"loss": (1.2 + 0.001 * ((step * 7) % 5), "losses")})
            if d.stop:
                fired.append(step)
                break
        return fired

    cfg = {"rules": [{"name": "loss_not_decreasing", "actions": ["stop_training"]}]}
    plain = Session({**cfg, "out_dir": str(tmp_path / "plain")})
    plain.set_planned_steps(600)
    first = flat(plain, range(200))
    plain.close()
    s = Session({**cfg, "out_dir": str(tmp_path / "run")})
    s.set_planned_steps(600)
    flat(s, range(40))
    state = s.state_dict()  # the checkpoint after step 39
    flat(s, range(40, 46))  # then a crash (the records of 40-45 stay in the run)
    s.close("failed")
    resumed = Session({**cfg, "out_dir": str(tmp_path / "run")})
    resumed.set_planned_steps(600)
    resumed.load_state_dict(state)
    assert resumed.history.series("loss")[0].tolist() == list(range(40))  # not the steps redone
    assert flat(resumed, range(40, 200)) == first == [60]
    resumed.close()


def test_one_element_and_empty_tensors_get_the_histogram_asked_for(tmp_path: Path) -> None:
    # numpy.histogram of one value or of none: they were left out with no word, and reading one
    # named the raw scalar's steps ("no hist_counts value at step 0 ...; steps with one: [0]")
    cfg = {"collections": {"weights": {"reductions": ["l2", "histogram"]}, "biases": {"reductions": ["l2"]}}}
    with Session(cfg, out_dir=tmp_path / "run") as s:
        plan = s.begin_step("train", 0)
        plan.add("one", np.full((1, 1), -3.0, np.float32), "weights")
        plan.add("empty", np.zeros((0, 4), np.float32), "weights")
        plan.add("b", np.ones(3), "biases")
        s.end_step()
    run = tripwire.open_run(tmp_path / "run")
    for name, values in (("one", [-3.0]), ("empty", [])):
        counts, edges = run.histogram(name, 0)
        want_counts, want_edges = np.histogram(np.asarray(values, np.float32), bins=30)
        np.testing.assert_array_equal(counts, want_counts)
        np.testing.assert_allclose(edges, want_edges, rtol=1e-6)
    with pytest.raises(tripwire.TensorNotFoundError,
                       match=r"tensor 'b' has no histogram at step 0 in mode 'train' \(worker 0\); none at any step of "
                             r"that mode; of it the run stores the reductions .*l2.* \(one at a step: "
                             r"run.tensor\('b'\).value\('\w+', 0\)\); arrays stored of it: none"):
        run.histogram("b", 0)
    with pytest.raises(tripwire.TensorNotFoundError, match=r"tensor 'one' has no histogram at step 5 .*; steps with one: \[0\]"):
        run.histogram("one", 5)


def test_the_steps_after_the_last_save_step_are_judged_at_close(tmp_path: Path) -> None:
    # a NaN loss at step 12 of 20 (saves every 10 steps): stored, and never judged in process before
    s = Session(out_dir=tmp_path / "run", rules=["exploding_tensor"], actions=["record", "stop_training"])
    for step in range(20):
        s.step("train", step, {"loss": (float("nan") if step == 12 else 1.0, "losses")})
    assert s.findings == []  # (no save step since step 12)
    s.close()
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 12)]
    # (trial 29j F2: a stop asked at close(), after the loop ran every step, stops nothing: the finding
    # is recorded, the run complete)
    assert s.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    assert [(f.rule, f.step) for f in run.findings] == [("exploding_tensor", 12)] and run.status == "complete"


def test_kept_values_written_by_flush_are_judged_and_acted_on_at_the_next_step(tmp_path: Path) -> None:
    """Trial 17f: Lightning flushes at the end of the first epoch (a checkpoint's state_dict does
    too); the kept losses it wrote were never judged, and close() had nothing left to judge."""
    s = Session(out_dir=tmp_path / "run", rules=["exploding_tensor"], actions=["record", "stop_training"])
    for step in range(15):
        s.step("train", step, {"loss": (float("nan") if step == 12 else 1.0, "losses")})
    s.flush()
    decision = s.step("train", 15, {"loss": (1.0, "losses")})  # acted on at the next step, as a late finding is
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 12)]
    assert decision.stop and s.stopped_by is not None and s.stopped_by.step == 12
    s.close()
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_no_eval_save_step_warning_names_only_what_no_summary_captured(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 17d: each epoch had a summary eval step (activations captured) and a plain one (never a
    save step): close() said "nothing of activations was captured in eval", which the run held."""
    def run(summary_activations: bool) -> list[str]:
        caplog.clear()
        s = Session({"collections": ["activations", "losses"]}, write=False)
        for _ in range(3):
            s.step("train", None, {"loss": (1.0, "losses")})
            act = {"fc/output": (np.ones(4), "activations")} if summary_activations else {}
            s.step("eval", None, {**act, "val_loss": (0.5, "losses")}, summary=True)
            s.step("eval", None, {"other_loss": (0.5, "losses")})
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            s.close()
        return [r.getMessage() for r in caplog.records if "was a save step" in r.getMessage()]

    assert run(summary_activations=True) == []
    [said] = run(summary_activations=False)
    assert "nothing of activations was captured in eval" in said


@pytest.mark.parametrize("framework", ["python", "mxnet"])
def test_the_never_saved_warning_names_an_inherited_start_step(caplog: pytest.LogCaptureFixture,
                                                                framework: str) -> None:
    # trial 19d: save {interval: 4, start_step: 2, modes: {eval: {interval: 1}}}: two eval steps, before
    # the start_step eval inherits; the advice was eval's interval 1, which the config had
    s = Session({"save": {"interval": 4, "start_step": 2, "modes": {"eval": {"interval": 1}}}}, write=False,
                framework=framework)
    for i in range(4):
        s.step("train", i, {"loss": (1.0, "losses")})
    for i in range(2):
        s.step("eval", None, {"val_loss": (0.5, "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.close()
    [said] = [r.getMessage() for r in caplog.records if "was a save step" in r.getMessage()]
    assert ("(interval 1, start_step 2) (every eval step so far came before start_step 2: save.start_step holds in "
            "every mode unless save.modes.eval sets its own)") in said
    assert "save: {modes: {eval: {start_step: 0}}}" in said
    summary = "hook.begin_step('eval', summary=True)" if framework == "mxnet" else "Session.step('eval', ..., summary=True)"
    assert said.endswith(summary)


def test_a_rank_resumed_from_another_ranks_checkpoint_keeps_its_own_rule_state(tmp_path: Path) -> None:
    """Trial 17f: Lightning writes rank 0's callback state alone, and every DDP rank loads it. A
    rule that had fired on rank 0 stayed silent on rank 1 after the resume (a NaN loss there went
    unseen); one that had fired on rank 1 fired there again."""
    cfg = {"out_dir": str(tmp_path), "save": {"interval": 1}, "rules": ["exploding_tensor"], "actions": ["record"]}

    def fit(rank: int, steps: range, nan_at: int | None, state: dict | None = None) -> Session:
        s = Session(cfg, rank=rank, world_size=2)
        if state is not None:
            s.load_state_dict(state)
        for step in steps:
            s.step("train", step, {"loss": (float("nan") if step == nan_at else 1.0, "losses")})
        return s

    # before the checkpoint: rank 0 finds a NaN at step 3, rank 1 is healthy
    r0, r1 = fit(0, range(10), 3), fit(1, range(10), None)
    checkpoint = r0.state_dict()  # (rank 0's: what Lightning saves)
    r0.close()
    r1.close()
    # resumed: rank 1 loads rank 0's state; its own NaN at step 15 is a finding
    r1 = fit(1, range(10, 20), 15, checkpoint)
    assert [(f.rule, f.step, f.worker) for f in r1.findings] == [("exploding_tensor", 15, 1)]
    r1.close()
    # the reverse: a rule that fired on rank 1 before the checkpoint does not fire there again
    out = tmp_path / "b"
    cfg["out_dir"] = str(out)
    r0, r1 = fit(0, range(10), None), fit(1, range(10), 3)
    checkpoint = r0.state_dict()
    r0.close()
    r1.close()
    r1 = fit(1, range(10, 20), None, checkpoint)
    assert r1.findings == []
    r1.close()
    assert [(f.rule, f.step, f.worker) for f in tripwire.open_run(out).findings] == [("exploding_tensor", 3, 1)]


def test_a_writer_rank_list_that_no_rank_of_the_job_holds_is_refused(tmp_path: Path) -> None:
    """Trial 17f: writer: {ranks: [5]} (or []) under a 2-rank DDP fit wrote nothing, created no
    out_dir and said nothing: the whole run was lost."""
    with pytest.raises(ConfigError, match=r"writer\.ranks: got \[\]: no rank would write"):
        Session({"out_dir": str(tmp_path), "writer": {"ranks": []}})
    for rank in (0, 1):
        with pytest.raises(ConfigError, match=r"writer\.ranks: got \[5\], but this job has ranks 0 to 1 \(world size 2\)"):
            Session({"out_dir": str(tmp_path), "writer": {"ranks": [5]}}, rank=rank, world_size=2)
    s = Session({"out_dir": str(tmp_path), "writer": {"ranks": [1]}}, rank=0, world_size=2)  # rank 1 writes: fine
    assert s.writer is None
    s.close()


def test_a_rank_of_a_distributed_job_needs_the_shared_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 17f: Session(rank=r, world_size=2) without out_dir gave each rank a timestamped
    directory of its own: one run split in two, each half reading as complete."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"out_dir: none given for rank 1 of a 2-rank job: .* the same out_dir= "
                                          r"\(or name=\) on every rank"):
        Session(rank=1, world_size=2)
    assert not (tmp_path / "tripwire-runs").exists()
    for rank in (0, 1):
        s = Session({"save": {"interval": 1}}, name="exp", rank=rank, world_size=2)
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.close()
    assert tripwire.open_run(tmp_path / "tripwire-runs" / "exp").workers == [0, 1]


def test_a_complex_tensor_is_saved_as_its_magnitude(tmp_path: Path) -> None:
    # trial 15f: beside a float64 tensor the step failed as it ended (its every record lost); beside
    # float32 ones it was stored as its real part, with torch's warning only. Trial 30g F4: it was then
    # refused, and the README's loop failed at step 0; now its magnitude |z| is saved under its name
    torch = pytest.importorskip("torch")
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1, collections=["weights", "losses"])
    plan = s.begin_step("train", 0)
    plan.add("loss", 1.0, "losses")
    plan.add("w", torch.ones(3, dtype=torch.float64), "weights")
    z = torch.tensor([3 + 4j, 0 - 1j, 1 + 0j], dtype=torch.complex64)
    values = {"c_torch": z, "c_numpy": z.numpy().astype(np.complex128), "c_number": 3 + 4j, "c_list": [3 + 4j, 1.0]}
    for name, value in values.items():
        assert plan.add(name, value, "weights") is True
    assert plan.add("c_torch", z, "weights") is True  # (the same tensor again: one entry)
    s.end_step()
    s.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor_names() == ["c_list", "c_number", "c_numpy", "c_torch", "loss", "w"]
    assert run.tensor("c_torch").value("l2", 0) == pytest.approx(float(np.sqrt(25 + 1 + 1)), rel=1e-6)
    assert run.tensor("c_torch").value("mean", 0) == pytest.approx(7 / 3, rel=1e-6)
    assert run.tensor("c_numpy").value("min", 0) == pytest.approx(1.0)
    assert run.tensor("c_number").value("mean", 0) == pytest.approx(5.0)
    assert run.tensor("c_list").value("max", 0) == pytest.approx(5.0)


def test_close_refuses_a_status_it_does_not_know(tmp_path: Path) -> None:
    # close('fail') wrote 'fail' into the end marker, and readers took the run as complete
    s = Session(out_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r"^close: status='fail'; accepted: None, 'complete', 'stopped', 'failed'$"):
        s.close("fail")
    s.close("failed")
    assert tripwire.open_run(tmp_path / "run").status == "failed"


def test_a_step_after_close_says_to_reopen(tmp_path: Path) -> None:
    # steps after close() were taken silently, then failed at the next save step without a word of reopen()
    s = Session(out_dir=str(tmp_path / "run"), save_interval=10)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.close()
    with pytest.raises(StoreClosedError, match=r"^begin_step: the run '.*run' was closed \(close\(\)\); call "
                                               r"session\.reopen\(\) to append to it, or make a new Session$"):
        s.begin_step("train", 1)
    s.reopen()
    s.step("train", 1, {"loss": (2.0, "losses")})
    s.close()
    assert tripwire.open_run(tmp_path / "run").series("loss")[1].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("kw, match", [({"rank": "0"}, r"^rank: got '0'; accepted: an integer in \[0, 0\]$"),
                                       ({"rank": 2, "world_size": 2}, r"^rank: got 2; accepted: an integer in \[0, 1\]$"),
                                       ({"world_size": 0}, r"^world_size: got 0; accepted: an integer >= 1$")])
def test_rank_and_world_size_are_checked(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):  # rank='0' raised "'<' not supported between 'str' and 'int'"
        Session(write=False, **kw)


def test_a_forgotten_end_step_is_named_and_the_old_plan_refuses_values(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # trial 17d: begin_step while a step was open said nothing, and values offered to the old plan
    # were accepted (add() returned True) and never written
    s = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses", "weights"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        p0 = s.begin_step("train", 0)
        p1 = s.begin_step("train", 1)
        s.begin_step("train", 2)  # (said once)
    said = [r.getMessage() for r in caplog.records if "still open" in r.getMessage()]
    assert said == ["tripwire: begin_step('train') while the train step 0 was still open: it was ended here, and its "
                    "decision (a stop its rules ask for) goes unreturned; call end_step() once per step (or use "
                    "session.step(...))"]
    for plan in (p0, p1):
        with pytest.raises(tripwire.StepEndedError, match=r"add\('loss'\): the train step \d has ended"):
            plan.add("loss", 1.0, "losses")
    s.plan.add("loss", 0.5, "losses")
    s.end_step()
    s.close()
    assert tripwire.open_run(tmp_path / "run").series("loss")[0].tolist() == [2]


def test_collections_asking_one_tensor_for_different_histograms_are_named(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    # trial 17d: a tensor keeps one histogram a step; the second collection's bins and range were
    # dropped without a word
    s = tripwire.Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "collections": {
        "weights": {"reductions": ["l2", "histogram"], "histogram_bins": 7},
        "zoom": {"include": ["^w$"], "reductions": ["histogram"], "histogram_bins": 4, "histogram_range": [-1, 1]}}})
    a = np.random.default_rng(0).normal(size=50)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(2):
            s.begin_step("train", step).add("w", a, "weights")
            s.end_step()
    s.close()
    said = [r.getMessage() for r in caplog.records if "different histograms" in r.getMessage()]
    assert said == ["tripwire: tensor 'w' is in collections that ask for different histograms ('weights': 7 bins over "
                    "its own range; 'zoom': 4 bins over [-1, 1]); a tensor keeps one histogram a step: collection "
                    "'weights''s. Give those collections the same histogram_bins and histogram_range, or exclude the "
                    "tensor from all but one (the same holds for every tensor in those collections)"]
    assert len(tripwire.open_run(tmp_path / "run").histogram("w", 0)[0]) == 7
    caplog.clear()
    same = tripwire.Session({"out_dir": str(tmp_path / "same"), "save": {"interval": 1}, "collections": {
        "weights": {"reductions": ["histogram"], "histogram_bins": 4},
        "zoom": {"include": ["^w$"], "reductions": ["histogram"], "histogram_bins": 4}}})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        same.begin_step("train", 0).add("w", a, "weights")
        same.end_step()
    same.close()
    assert "different histograms" not in caplog.text


def test_an_evaluation_after_a_failed_training_leaves_the_run_failed(tmp_path: Path) -> None:
    # trial 19g: a Keras fit raised (its run "failed"), then model.evaluate(callbacks=[cb]) reopened
    # and closed the run: it read "complete"
    s = Session(out_dir=str(tmp_path / "run"), save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.close("failed")
    s.reopen()
    s.step("test", 0, {"test_loss": (1.0, "losses")}, summary=True)
    s.close()
    assert tripwire.open_run(tmp_path / "run").status == "failed"
    # a new training through the session (a second fit) ends complete again
    s.new_training()
    s.reopen()
    s.step("train", 1, {"loss": (0.5, "losses")})
    s.close()
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_an_offer_no_collection_takes_is_said_once_per_kind(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 20d: collections= replaced the defaults and the loss the loop offered every step was
    dropped without a word. Said once per kind, in a hand-written loop; a kind a collection takes at
    some step (not now) is not."""
    from tripwire import Collection, ReductionConfig

    fc1 = Collection("fc1", include=["fc1"], reduction=ReductionConfig(reductions=["l2"]))
    s = Session(out_dir=str(tmp_path / "run"), rules=[], collections={"fc1": fc1, "weights": {"save": {"interval": 2}}})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            plan = s.begin_step("train", step)
            plan.add("loss", np.float32(1.0), "losses")
            plan.add("aux_loss", np.float32(1.0), "losses")
            plan.add("fc2/w", np.ones((2, 2), dtype=np.float32), "weights")  # taken by weights at even steps
            s.end_step()
        s.close()
    said = [r.getMessage() for r in caplog.records if "is not captured" in r.getMessage()]
    # (trial 23l: the any-kind collection's patterns are named: "no collection takes losses" was said where
    # one could, had its include matched)
    assert said == ["tripwire: 'loss', offered as losses, is not captured: the patterns of the collections for any "
                    "kind leave it out (collections.fc1: include ['fc1']), and no collection of this config is for "
                    "losses (collections: fc1, weights); to keep it, name 'losses' among the collections (collections= "
                    "replaces the default set; include_collections= adds to it)"]
    assert tripwire.open_run(tmp_path / "run").tensor_names() == ["fc2/w"]


def test_a_failed_training_is_not_said_to_have_left_rules_unfed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 21a: a KeyError in the first training_step came after 8 WARNINGs that the rules and
    collections had nothing to read; a training that ends says them, as before."""
    for status, said in (("failed", 0), (None, 1)):
        caplog.clear()
        s = Session(out_dir=str(tmp_path / f"run-{status}"), rules=["exploding_tensor"], save_interval=1,
                    include_collections=["gradients"])
        s.begin_step("train", 0)
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            s.close(status)
        unfed = [r for r in caplog.records if "had nothing to read" in r.getMessage()]
        assert len(unfed) == said, [r.getMessage() for r in caplog.records]


def test_a_rank_that_writes_no_records_writes_its_findings(tmp_path: Path) -> None:
    """Trial 21f: with writer ranks [0], a hand-written DDP loop's rank-1 finding was in rank 1's
    log alone; the run ended stopped with no findings. A rank the writer leaves out writes its
    findings to the run (a file of its own), where it knows the run's directory."""
    out = tmp_path / "run"
    ranks = [Session(out_dir=str(out), rank=r, world_size=2, rules=["exploding_tensor"], actions=["record"],
                     save_interval=1, writer={"ranks": [0]}) for r in (0, 1)]
    for step in range(3):
        for r, s in enumerate(ranks):
            s.step("train", step, {"loss": (float("nan") if (r, step) == (1, 1) else 1.0, "losses")})
    for s in ranks:
        s.close()
    run = tripwire.open_run(out)
    assert run.workers == [0] and run.status == "complete"
    assert [(f.rule, f.step, f.worker) for f in run.findings] == [("exploding_tensor", 1, 1)]
    assert (out / "findings" / "rank-00001.jsonl").exists()
    # write=False writes nothing at all, and a rank with no out_dir of its own knows no run to write to
    quiet = Session(out_dir=str(tmp_path / "quiet"), rank=1, world_size=2, rules=["exploding_tensor"],
                    save_interval=1, writer={"ranks": [0]}, write=False)
    quiet.step("train", 0, {"loss": (float("nan"), "losses")})
    quiet.close()
    assert quiet.findings and not (tmp_path / "quiet").exists()


def test_a_kind_no_collection_takes_is_said_once_not_again_at_close(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    # trial 21f: said at the first offer, then again, worded otherwise, at close
    s = Session(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, collections=["gradients", "losses"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(2):
            s.step("train", step, {"loss": (1.0, "losses"), "fc1/output": (np.ones(3), "activations")})
        s.close()
    said = [r.getMessage() for r in caplog.records if "fc1/output" in r.getMessage()]
    assert len(said) == 1 and "is not captured" in said[0], said


def test_a_validation_mode_is_pointed_at_eval() -> None:
    # trial 21f: "mode: got 'validation'; accepted: train, eval, test, predict", no pointer to eval
    s = Session(write=False)
    with pytest.raises(tripwire.ConfigError, match=r"mode: got 'validation'; accepted: train, eval, test, predict "
                                                   r"\(validation is mode 'eval'\)"):
        s.begin_step("validation", 0)
    with pytest.raises(tripwire.ConfigError, match=r"mode: got 'training'.*did you mean 'train'"):
        s.step("training", 0, {"loss": (1.0, "losses")})
