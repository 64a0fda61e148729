"""Trial 29a follow-up: ``Session.suspend_step()`` / ``Session.resume_step(plan)``, the API the
Lightning callback uses for a validation inside a gradient accumulation window (trial 29a F1; the
callback set the session's ``_plan``, ``mode_steps`` and ``global_step`` by hand). Driven by hand on
a Session: the suspended step's counters are as before its ``begin_step`` while other steps run,
``resume_step`` counts it again as ``begin_step`` did, its record is whole, and misuse is a
``ConfigError`` naming what is accepted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Session, StepPlan, StoreClosedError


def _session(out: Path) -> Session:
    return Session({"out_dir": str(out), "save": {"interval": 1}, "collections": ["losses", "gradients"],
                    "rules": []})


def _train(s: Session, step: int, loss: float) -> None:
    plan = s.begin_step("train", step)
    plan.add("loss", loss, "losses")
    s.end_step()


def test_a_suspended_step_lets_other_steps_follow_the_last_ended_one_and_resumes_whole(tmp_path: Path) -> None:
    s = _session(tmp_path)
    _train(s, 0, 3.0)
    _train(s, 1, 2.0)
    assert (s.mode_steps["train"], s.global_step) == (2, 2)
    plan = s.begin_step("train")  # (step None: counted by the session, 2)
    plan.add("gradients/fc.weight", np.full(3, 4.0), "gradients")
    assert (plan.step, s.mode_steps["train"], s.global_step) == (2, 3, 3)
    suspended = s.suspend_step()
    assert suspended is plan and s.plan is None
    assert (s.mode_steps["train"], s.global_step) == (2, 2)  # as before its begin_step
    for _ in range(2):  # a validation of two batches in between
        s.begin_step("eval").add("val_loss", 1.5, "losses")
        s.end_step()
    assert (s.mode_steps["train"], s.mode_steps["eval"], s.global_step) == (2, 2, 4)
    plan.add("loss", 1.0, "losses")  # (the plan keeps what is offered while it is suspended)
    s.resume_step(plan)
    assert s.plan is plan and (s.mode_steps["train"], s.global_step) == (3, 5)
    plan.add("gradients/fc.bias", np.full(2, 5.0), "gradients")
    s.end_step()
    _train(s, 3, 0.5)  # (step given; begin_step(None) would count 3 too)
    s.close()
    run = tripwire.open_run(tmp_path)
    assert run.series("loss")[0].tolist() == [0, 1, 2, 3]
    assert run.series("loss")[1].tolist() == [3.0, 2.0, 1.0, 0.5]
    assert run.tensor("gradients/fc.weight").value("mean", 2) == pytest.approx(4.0)
    assert run.tensor("gradients/fc.bias").value("mean", 2) == pytest.approx(5.0)
    # the validation follows train step 1, the last one ended before it, not the suspended step 2
    assert run.train_steps("eval", [0, 1]).tolist() == [1, 1]


def test_a_suspended_step_counted_by_the_session_is_followed_by_the_next_count(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": []}, write=False)
    plan = s.begin_step("train")
    s.suspend_step()
    assert s.begin_step("eval").step == 0
    s.end_step()
    s.resume_step(plan)
    s.end_step()
    assert s.begin_step("train").step == 1  # (not 0 again: resume counted the step as begin_step did)
    s.end_step()
    assert s.global_step == 3


def test_suspend_step_with_no_open_step_is_a_config_error(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": []}, write=False)
    with pytest.raises(ConfigError, match=r"suspend_step: no step is open .*accepted: a call between begin_step\(\) "
                                          r"and end_step\(\)"):
        s.suspend_step()
    s.begin_step("train", 0)
    s.end_step()
    with pytest.raises(ConfigError, match="suspend_step: no step is open"):
        s.suspend_step()
    assert (s.mode_steps["train"], s.global_step) == (1, 1)  # (nothing changed)


def test_resume_step_while_another_step_is_open_is_a_config_error(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": []}, write=False)
    plan = s.begin_step("train", 4)
    s.suspend_step()
    other = s.begin_step("eval", 0)
    with pytest.raises(ConfigError, match=r"resume_step: the eval step 0 is open; end it \(end_step\(\)\) before "
                                          r"resuming the train step 4"):
        s.resume_step(plan)
    assert s.plan is other and (s.mode_steps["train"], s.global_step) == (0, 1)  # (nothing changed)
    s.end_step()
    s.resume_step(plan)  # (still suspended: it resumes once the other step ended)
    assert s.plan is plan and s.mode_steps["train"] == 5


def test_resuming_twice_or_a_step_never_suspended_is_a_config_error(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": []}, write=False)
    plan = s.begin_step("train", 0)
    s.suspend_step()
    s.resume_step(plan)
    with pytest.raises(ConfigError, match=r"resume_step: the train step 0 is not suspended \(it was resumed already, "
                                          r"or never suspended\); accepted: the StepPlan suspend_step\(\) returned, once"):
        s.resume_step(plan)
    s.end_step()
    with pytest.raises(ConfigError, match=r"the train step 0 is not suspended \(it was ended\)"):
        s.resume_step(plan)
    assert (s.mode_steps["train"], s.global_step, s.plan) == (1, 1, None)


def test_resume_step_of_something_else_is_a_config_error(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": []}, write=False)
    other = Session({"save": {"interval": 1}, "rules": []}, write=False)
    foreign = other.begin_step("train", 0)
    other.suspend_step()
    with pytest.raises(ConfigError, match=r"resume_step: got a StepPlan of another session \(train step 0\); "
                                          r"accepted: the StepPlan this session's suspend_step\(\) returned"):
        s.resume_step(foreign)
    with pytest.raises(ConfigError, match=r"resume_step: got str 'train'; accepted: the StepPlan"):
        s.resume_step("train")  # type: ignore[arg-type]
    assert isinstance(foreign, StepPlan) and s.plan is None


def test_a_step_suspended_when_the_run_closes_is_not_recorded(tmp_path: Path) -> None:
    s = _session(tmp_path)
    _train(s, 0, 3.0)
    plan = s.begin_step("train", 1)
    plan.add("loss", 2.0, "losses")
    s.suspend_step()
    s.close()
    with pytest.raises(StoreClosedError, match=r"resume_step: the run .* was closed \(close\(\)\) while the train "
                                               r"step 1 was suspended: it was not recorded"):
        s.resume_step(plan)
    assert tripwire.open_run(tmp_path).series("loss")[0].tolist() == [0]
