"""Trial 26c: a stop is hard to lose. A stop decided at an eval step (a NaN training loss kept since
the last save step, judged when the validation's record is written; a ``tripwire watch`` request read
there) came back from ``session.step("eval", ...)`` alone, and every later ``end_step().stop`` was
False, so a loop that reads the train steps' decision (the README's) trained on. A run ended by the
``raise`` action that was never closed was marked ``failed`` at exit, without its stop reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tripwire
from tripwire import Finding, Session


def _readme_loop(out: Path, nan_at: int = 7, epochs: int = 5, batches: int = 8) -> tuple[int, Session]:
    """The README's hand-written loop (train steps every batch, one summary eval step per epoch) on
    plain numbers, a NaN loss at ``nan_at``; returns the steps trained and the session."""
    session = Session(rules=["exploding_tensor"], actions=["stop_training"], out_dir=str(out))
    step, stop = 0, False
    for epoch in range(epochs):
        for _ in range(batches):
            plan = session.begin_step("train", step)
            plan.add("loss", float("nan") if step == nan_at else 1.0 / (step + 1), "losses")
            stop = session.end_step().stop
            step += 1
            if stop:
                break
        if stop:
            break
        session.step("eval", epoch, {"val_loss": (0.5, "losses")}, summary=True)  # (its decision ignored)
    session.close()
    return step, session


def test_a_stop_decided_at_an_eval_step_stops_the_next_train_step(tmp_path: Path) -> None:
    # the NaN loss of step 7 (no save step: interval 10) is judged when epoch 0's eval record is
    # written; the loop reads only the train steps' decision: it trained all 40 steps
    trained, session = _readme_loop(tmp_path / "run")
    assert session.stopped_by is not None and session.stopped_by.rule == "exploding_tensor"
    assert session.stopped_by.step == 7
    assert trained == 9  # train step 8's decision carries the stop asked at the eval step after step 7
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_every_later_decision_holds_the_stop_until_a_new_training(tmp_path: Path) -> None:
    s = Session({"save": {"interval": 1}, "rules": ["exploding_tensor"], "actions": ["stop_training"]},
                out_dir=str(tmp_path / "run"))
    decisions = [s.step("train", step, {"loss": (float("nan") if step == 2 else 1.0, "losses")}) for step in range(6)]
    assert [d.stop for d in decisions] == [False, False, True, True, True, True]
    first = decisions[2].stopped_by
    assert first is not None and first.step == 2
    # the later ones name the stop asked, and hold no finding of their own (it was acted on once)
    assert all(d.stopped_by is first and d.reason == str(first) and d.findings == () for d in decisions[3:])
    assert s.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True).stop  # eval steps too
    assert s.end_step().stop  # (no step open: still the stop)
    # the quiet-step path (the callbacks' cheap one) holds it too
    q = Session({"save": {"interval": 10}, "rules": ["exploding_tensor"], "actions": ["stop_training"]}, write=False)
    q.step("train", 0, {"loss": (float("nan"), "losses")})
    assert q.quiet_until("train", 1) == 10
    assert q.quiet_step("train", 1).stop
    q.close()
    # a new training is armed again: its steps continue
    s.new_training(continued=False)
    assert s.stopped_by is None
    assert not s.step("train", 6, {"loss": (1.0, "losses")}).stop
    s.close()


def test_a_stop_asked_by_watch_and_read_at_an_eval_step_stops_the_next_train_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = Session(rules=["exploding_tensor"], actions=["log"], out_dir=str(out))
    for step in range(10):
        assert not s.step("train", step, {"loss": (1.0 / (step + 1), "losses")}).stop
    tripwire.request_stop(out, Finding(rule="my_watch", step=9, mode="train", message="stop please"))
    time.sleep(1.1)  # (requests are read at most once a second)
    assert s.step("eval", 0, {"val_loss": (0.5, "losses")}, summary=True).stop
    later = s.step("train", 10, {"loss": (0.1, "losses")})
    assert later.stop and later.stopped_by is not None and later.stopped_by.rule == "my_watch"
    s.close()
    assert tripwire.open_run(out).status == "stopped"


def test_an_evaluation_after_a_stopped_training_is_not_told_to_stop(tmp_path: Path) -> None:
    # close() ends the training: a Keras evaluate() after a stopped fit reopens the run, and its test
    # steps are no training's to stop; the run stays stopped
    out = tmp_path / "run"
    s = Session({"save": {"interval": 1}, "rules": ["exploding_tensor"], "actions": ["stop_training"]},
                out_dir=str(out))
    assert s.step("train", 0, {"loss": (float("nan"), "losses")}).stop
    s.close()
    s.reopen()
    assert not s.step("test", 0, {"loss": (1.0, "losses")}, summary=True).stop
    s.close()
    assert tripwire.open_run(out).status == "stopped"


RAISED = """
import tripwire
s = tripwire.Session(out_dir={out!r}, rules=["exploding_tensor"], actions=["raise"], save_interval=1)
for step in range(10):
    s.step("train", step, {{"loss": (float("nan") if step == 3 else 1.0, "losses")}})
"""


def _end_marker(out: Path) -> dict:
    [end] = (out / "workers").glob("*.end.json")
    return json.loads(end.read_text())


def test_a_run_ended_by_the_raise_action_is_marked_stopped_at_exit(tmp_path: Path) -> None:
    # TrainingStopped left the script (no close(), no with): the run was "failed", no stop_reason
    out = tmp_path / "raised"
    done = subprocess.run([sys.executable, "-c", RAISED.format(out=str(out))], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "TrainingStopped" in done.stderr, done.stderr
    assert "marked stopped, as rule 'exploding_tensor' asked at step 3 (train)" in done.stderr, done.stderr
    assert "marked failed" not in done.stderr, done.stderr
    run = tripwire.open_run(out)
    assert run.status == "stopped" and run.steps() == [0, 1, 2, 3]
    end = _end_marker(out)
    assert "exploding_tensor at step 3 (train)" in end["stop_reason"], end


def test_a_loop_that_ended_after_a_stop_without_close_is_stopped_and_a_crash_after_one_failed(tmp_path: Path) -> None:
    stopped = """
import tripwire
s = tripwire.Session(out_dir={out!r}, rules=["exploding_tensor"], actions=["stop_training"], save_interval=1)
for step in range(10):
    if s.step("train", step, {{"loss": (float("nan") if step == 3 else 1.0, "losses")}}).stop:
        break
"""
    out = tmp_path / "stopped"
    done = subprocess.run([sys.executable, "-c", stopped.format(out=str(out))], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "marked stopped" in done.stderr, done.stderr
    assert tripwire.open_run(out).status == "stopped"
    assert "exploding_tensor" in _end_marker(out)["stop_reason"]
    # another error after the stop (not the session's TrainingStopped): a crash, failed
    crashed = stopped.replace("        break", "        raise KeyError('boom')")
    out = tmp_path / "crashed"
    done = subprocess.run([sys.executable, "-c", crashed.format(out=str(out))], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "KeyError" in done.stderr and "marked failed" in done.stderr, done.stderr
    assert tripwire.open_run(out).status == "failed"


def test_a_session_is_a_context_manager_that_ends_the_run_stopped_or_failed(tmp_path: Path) -> None:
    with pytest.raises(tripwire.TrainingStopped, match="exploding_tensor at step 1"):
        with Session(out_dir=str(tmp_path / "a"), rules=["exploding_tensor"], actions=["raise"], save_interval=1) as s:
            for step in range(4):
                s.step("train", step, {"loss": (float("nan") if step == 1 else 1.0, "losses")})
    assert tripwire.open_run(tmp_path / "a").status == "stopped"
    with pytest.raises(KeyError):
        with Session(out_dir=str(tmp_path / "b"), save_interval=1) as s:
            s.step("train", 0, {"loss": (1.0, "losses")})
            raise KeyError("boom")
    assert tripwire.open_run(tmp_path / "b").status == "failed"
