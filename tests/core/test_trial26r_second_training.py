"""Trial 26i, finding 4: a second training appended into the same out_dir (the same script run twice,
not a resume) left run metadata that mixed two trainings: ``run.json`` kept the first training's
config and argv, the worker meta file was overwritten with the second's, ``Run.trainings`` was {}
and ``tripwire inspect`` showed neither the repeated steps nor the second training. The second
training is now a training of the worker meta file's ``trainings`` (where it began, not continuing,
``fresh``: judged alone, its own argv and config), the first's facts kept there, inspect says how
many trainings the run holds and which steps were written again, and ``tripwire watch`` judges the
second training's records alone, as its session did."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Requirement, Session
from tripwire._cli import main
from tripwire._watch import Watcher
from test_trial26r_resume_history import _Probe  # (a rule that remembers the loss series it read)


def _train(out: Path, interval: int, steps: int, offset: float) -> Session:
    with Session({"save": {"interval": interval}, "rules": ["default"], "actions": ["record"]}, out_dir=str(out)) as s:
        s.set_planned_steps(steps)
        for step in range(steps):
            plan = s.begin_step("train", step)
            plan.add("loss", 1.0 / (1 + step) + offset, "losses")
            if plan.wants("gradients"):
                plan.add("gradients/w", np.full(3, 0.1), "gradients")
            s.end_step()
    return s


def test_a_second_training_into_one_out_dir_is_a_training_of_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _train(out, 10, 30, 0.0)
    started = json.loads((out / "workers" / "worker-00000.json").read_text())["started"]
    second = _train(out, 5, 20, 10.0)
    meta = json.loads((out / "workers" / "worker-00000.json").read_text())
    assert meta["every_step"] == {"losses": 5} and meta["planned_steps"] == 20  # (the worker's latest training)
    trainings = meta["trainings"]
    assert len(trainings) == 2
    one, two = trainings
    # the first training's facts are kept: its start, argv and planned length
    assert one["steps"] == {} and one["began"] is None and one["continued"] is False
    assert one["planned_steps"] == 30 and one["started"] == started and one["argv"] == list(sys.argv)
    assert two["steps"] == {"train": 0, "eval": 0, "test": 0, "predict": 0} and two["continued"] is False
    assert two["fresh"] is True and two["planned_steps"] == 20 and two["argv"] == list(sys.argv)
    assert two["began"] == meta["started"] and two["began"] > started
    assert two["config"]["save"]["interval"] == 5 and second.config.to_dict() == two["config"]
    run = tripwire.open_run(out)
    assert run.config["save"]["interval"] == 10  # run.json: the first training's
    assert [t["fresh"] for t in run.trainings[0]] == [False, True]
    assert run.trainings[0][1]["config"]["save"]["interval"] == 5
    assert run.trainings[0][0]["argv"] == list(sys.argv)
    assert first.stopped_by is None and second.stopped_by is None
    # a third one appends a third training; the first two are kept as they were
    before = run.trainings[0]
    _train(out, 5, 10, 20.0)
    run = tripwire.open_run(out)
    assert len(run.trainings[0]) == 3 and run.trainings[0][:2] == before
    assert run.trainings[0][2]["planned_steps"] == 10 and run.trainings[0][2]["fresh"] is True


def test_inspect_says_how_many_trainings_and_which_steps_were_written_again(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _train(out, 10, 30, 0.0)
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "trainings" not in text and "went back" not in text  # (one training: nothing to say)
    _train(out, 5, 20, 10.0)
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert "worker 0 holds 2 trainings: 1 from train step 0; 2 from train step 0, a new training (judged alone)" in text
    # (both trainings are this process's: trial 30f F3, it said "by a later process")
    assert f"2 from train step 0, a new training (judged alone), by the same process (pid {os.getpid()})" in text
    assert ("worker 0: a later training or a resume went back over (started again at or before) the records of train "
            "steps 0-29 (30 steps): series() returns every record, value() the last written") in text


def test_inspect_names_the_steps_a_resume_wrote_again(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1)
    for step in range(8):
        s.step("train", step, {"loss": (1.0, "losses")})
        if step == 4:
            state = s.state_dict()
    s.flush()
    s.writer.abandon()
    resumed = Session(out_dir=str(out), save_interval=1)
    resumed.load_state_dict(state)
    for step in range(5, 10):
        resumed.step("train", step, {"loss": (2.0, "losses")})
    resumed.close()
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert "trainings" not in text  # (a resume continues its training)
    assert ("worker 0: a later training or a resume went back over (started again at or before) the records of train "
            "steps 5-7 (3 steps): series() returns every record, value() the last written") in text


def test_watch_judges_the_second_training_alone(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _train(out, 10, 30, 0.0)
    _train(out, 5, 20, 10.0)
    probe = _Probe()
    watcher = Watcher(out, {"rules": ["default", probe], "actions": ["record"]}, echo=lambda f: None)
    watcher.watch(once=True)
    second = [(step, steps, values) for step, steps, values in probe.seen if len(values) and values[-1] > 5]
    assert second, probe.seen
    for step, steps, values in second:  # only its own records, as its session's rules read them
        assert steps.tolist() == list(range(step + 1)) and bool(np.all(values > 5)), (step, steps, values)


def _at_five(history: Any, step: int, mode: str) -> str | None:
    return "step five" if step == 5 else None


def test_watch_judges_a_rule_again_in_a_training_of_its_own(tmp_path: Path) -> None:
    # the first training's session recorded the rule's finding; the second, run again into the out_dir
    # without that rule, judged nothing: watch judges the rule in the second training too (its
    # session's rules started fresh), not "held" by the first training's finding
    out = tmp_path / "run"
    made = tripwire.FunctionRule(_at_five, name="at_five", requirements=[Requirement("losses", ("raw",))])
    with Session({"save": {"interval": 1}, "rules": [made], "actions": ["record"]}, out_dir=str(out)) as s:
        for step in range(8):
            s.step("train", step, {"loss": (1.0, "losses")})
    with Session({"save": {"interval": 1}, "rules": [], "actions": ["record"]}, out_dir=str(out)) as s:
        for step in range(8):
            s.step("train", step, {"loss": (2.0, "losses")})
    assert [(f.rule, f.step) for f in tripwire.open_run(out).findings] == [("at_five", 5)]
    probe = tripwire.FunctionRule(_at_five, name="at_five", requirements=[Requirement("losses", ("raw",))])
    watcher = Watcher(out, {"rules": [probe], "actions": ["record"]}, echo=lambda f: None)
    watcher.watch(once=True)
    began = tripwire.open_run(out).trainings[0][1]["began"]
    assert [(f.rule, f.step) for f in watcher.findings] == [("at_five", 5)]
    assert watcher.findings[0].wall_time > began and len(watcher.earlier) == 1
