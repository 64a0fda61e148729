"""Trial 26h (core/_session.py): a DDP rank that ``writer.ranks`` leaves out, resumed from rank 0's
checkpoint state, rebuilt its rule state from no findings at all (not even its own
``findings/rank-0000N.jsonl``), so a rule that had fired on it before the checkpoint fired again."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tripwire
from tripwire import Session

RULES = [{"name": "exploding_tensor", "actions": ["log", "record"]}]


def _ranks(out: Path, **kw: Any) -> tuple[Session, Session]:
    return tuple(Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=RULES, **kw)  # type: ignore[return-value]
                 for r in (0, 1))


def _steps(sessions: tuple[Session, Session], steps: range, nan_on_1: set[int]) -> None:
    for step in steps:
        for s in sessions:
            loss = math.nan if s.rank == 1 and step in nan_on_1 else 1.0 / (step + 1)
            s.step("train", step, {"loss": (loss, "losses")})


def _rank1_findings(out: Path) -> list[tuple[str, int]]:
    return [(f.rule, f.step) for f in tripwire.open_run(out).findings if f.worker == 1]


def test_a_rank_that_writes_no_records_keeps_what_fired_on_it_across_a_resume(tmp_path: Path) -> None:
    for variant, writer in (("rank0", {"ranks": [0]}), ("all", {"ranks": "all"})):
        out = tmp_path / variant
        first = _ranks(out, writer=writer)
        _steps(first, range(0, 6), nan_on_1={3})
        state = first[0].state_dict()  # (Lightning saves rank 0's callback state; every rank loads it)
        _steps(first, range(6, 9), nan_on_1=set())
        for s in first:
            s.close()
        resumed = _ranks(out, writer=writer)
        for s in resumed:
            s.load_state_dict(state)
        _steps(resumed, range(6, 12), nan_on_1={10})  # the fault again, after the checkpoint
        for s in resumed:
            s.close()
        assert [f.rule for f in resumed[1].findings] == [], (variant, resumed[1].findings)
        assert _rank1_findings(out) == [("exploding_tensor", 3)], variant


def test_an_unmatched_rule_input_is_said_once_per_run_in_this_process(tmp_path: Path, caplog: Any) -> None:
    """Trial 26a: a Lightning callback opens a Session per stage (fit, validate, test, predict) and
    hands the state on with state_dict; each stage's close said "`overfit`: validation='val_loss'
    matches nothing" again, its text changed by the names captured meanwhile. Said once per run
    (by rule and parameter) in this process; a checkpoint loaded in another process says it again."""
    import logging

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "validation='val_loss' matches no" in r.getMessage()]

    out = str(tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        fit = Session(out_dir=out, save_interval=1, rules=["overfit"])
        for step in range(4):
            fit.step("train", step, {"loss": (1.0, "losses")})
        fit.step("eval", 1, {"val_acc": (0.5, "metrics")}, summary=True)
        fit.close()
        assert len(said()) == 1 and "captured: loss, val_acc" in said()[0], said()
        state = fit.state_dict()
        test = Session(out_dir=out, save_interval=1, rules=["overfit"])
        test.load_state_dict(state)
        test.step("test", 1, {"test_acc": (0.5, "metrics")}, summary=True)  # (the captured names grow)
        test.close()
        assert len(said()) == 1, said()
        elsewhere = Session(out_dir=out, save_interval=1, rules=["overfit"])
        elsewhere.load_state_dict({**state, "said": {**state["said"], "pid": -1}})  # (saved by another process)
        elsewhere.step("test", 2, {"test_acc": (0.5, "metrics")}, summary=True)
        elsewhere.close()
    assert len(said()) == 2 and "test_acc" in said()[1], said()


def test_switch_off_records_the_rules_and_why_in_the_run(tmp_path: Path) -> None:
    import pytest

    from tripwire import ConfigError

    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"], framework="xgboost")
    assert tripwire.open_run(out).switched_off == {}  # (a run written since trial 26h says: none)
    with pytest.raises(ConfigError, match=r"switch_off: why=''; accepted: None or a non-empty string"):
        s.switch_off(["exploding_tensor"], why="")
    assert s.switch_off(["exploding_tensor", "confusion"], why="no classes here") == ["exploding_tensor"]
    assert s.switched_off == {"exploding_tensor": "no classes here", "confusion": "no classes here"}
    assert tripwire.open_run(out).switched_off == s.switched_off  # (the worker meta file's switched_off)
    state = s.state_dict()
    s.close()
    resumed = Session(out_dir=str(tmp_path / "other"), save_interval=1, rules=["exploding_tensor"], framework="xgboost")
    resumed.load_state_dict(state)
    assert tripwire.open_run(tmp_path / "other").switched_off == s.switched_off
    resumed.step("train", 0, {"loss": (math.nan, "losses")})  # (off: not judged)
    resumed.close()
    assert resumed.findings == []
    plain = Session(out_dir=str(tmp_path / "plain"), save_interval=1)
    assert plain.switch_off(["dead_relu"]) == [] and plain.switched_off == {
        "dead_relu": "the python integration switched it off"}
    plain.close()


def _fit_epochs(s: Session, epochs: range, batches: int = 3, val: float = 0.0) -> None:
    """Train ``batches`` steps per epoch, each epoch followed by a validation of one batch (its eval
    step counted by the session, as the Lightning callback counts them)."""
    for epoch in epochs:
        for b in range(batches):
            s.step("train", epoch * batches + b, {"loss": (1.0 / (epoch + 1), "losses")})
        plan = s.begin_step("eval", max(s.mode_steps["eval"], 1))
        plan.add("val_loss", val + epoch, "losses")
        s.end_step()


def test_a_validation_right_at_the_checkpoint_keeps_its_eval_step_after_a_resume(tmp_path: Path, caplog: Any) -> None:
    """Trial 26h: a checkpoint at an epoch's last train batch, before its validation (Lightning's
    ModelCheckpoint(every_n_train_steps=...)); the resumed fit does not run that validation again,
    and numbered the next one with its eval step: eval steps [1, 2, 2] instead of [1, 2, 3]."""
    import logging

    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1)
    _fit_epochs(s, range(1))
    for b in range(3):  # epoch 2's training, the checkpoint at its last batch, then its validation
        s.step("train", 3 + b, {"loss": (0.5, "losses")})
    state = s.state_dict()
    plan = s.begin_step("eval", max(s.mode_steps["eval"], 1))
    plan.add("val_loss", 1.0, "losses")
    s.end_step()
    s.close()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed = Session(out_dir=str(out), save_interval=1)
        resumed.load_state_dict(state)
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1 and "holds eval step 2 of worker 0" in said[0], said
    assert ("eval step 2, a validation right at the checkpoint (before any later train step), is not run again by a "
            "resumed training that starts by training (Lightning's does): it is there once, and the resumed "
            "validations count on from eval step 3") in said[0]
    _fit_epochs(resumed, range(2, 3))  # epoch 3: its training first, then its validation
    resumed.close()
    run = tripwire.open_run(out)
    steps, values = run.series("val_loss")
    assert steps.tolist() == [1, 2, 3] and values.tolist() == [0.0, 1.0, 2.0]
    assert run.train_steps("eval").tolist() == [2, 5, 8]
    assert run.value("val_loss", "raw", 2, "eval") == 1.0


def test_a_validation_run_again_after_the_resume_keeps_the_checkpoints_eval_step(tmp_path: Path) -> None:
    # a resumed training that starts with the validation after the checkpoint (Lightning's, resumed from
    # a checkpoint taken mid-validation): that validation is run again, under its own eval step
    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1)
    _fit_epochs(s, range(1))
    state = s.state_dict()
    plan = s.begin_step("eval", max(s.mode_steps["eval"], 1))
    plan.add("val_loss", 9.0, "losses")  # (taken after the checkpoint: the training stopped here)
    s.end_step()
    s.close()
    resumed = Session(out_dir=str(out), save_interval=1)
    resumed.load_state_dict(state)
    plan = resumed.begin_step("eval", max(resumed.mode_steps["eval"], 1))  # (the validation again)
    plan.add("val_loss", 0.0, "losses")
    resumed.end_step()
    _fit_epochs(resumed, range(1, 2))
    resumed.close()
    assert tripwire.open_run(out).series("val_loss")[0].tolist() == [1, 2, 2, 3]  # (eval step 2 twice: both held)
