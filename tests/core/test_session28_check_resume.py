"""A check's finding (``Session.record_finding``) is recorded once in a run that a resumed training
continues: the check runs again at the resumed fit's start and finds the same thing (session 28:
a Keras fit resumed with ``initial_epoch=`` into the crashed fit's ``out_dir`` held
``loss_output_mismatch`` twice)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import tripwire
from tripwire import Finding


def _train(session: tripwire.Session, steps: range) -> None:
    for step in steps:
        session.step("train", step, {"loss": (np.float32(1.0 / (step + 1)), "losses")})


def _check(step: int, message: str = "the loss expects logits, the model's output applies softmax") -> Finding:
    return Finding(rule="loss_output_mismatch", step=step, mode="train", message=message)


def test_a_resumed_session_does_not_record_a_held_check_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = tripwire.Session(rules=[], out_dir=out)
    first.record_finding(_check(0))
    _train(first, range(0, 20))
    state = first.state_dict()
    first.close()

    resumed = tripwire.Session(rules=[], out_dir=out)
    resumed.load_state_dict(state)
    got = resumed.record_finding(_check(20))
    _train(resumed, range(20, 30))
    resumed.close()

    assert got.step == 20 and [f.step for f in resumed.findings] == [20]  # (the session keeps what it found)
    held = [(f.rule, f.step) for f in tripwire.open_run(out).findings]
    assert held == [("loss_output_mismatch", 0)]


def test_a_different_check_or_message_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = tripwire.Session(rules=[], out_dir=out)
    first.record_finding(_check(0))
    _train(first, range(0, 10))
    state = first.state_dict()
    first.close()

    resumed = tripwire.Session(rules=[], out_dir=out)
    resumed.load_state_dict(state)
    resumed.record_finding(_check(10, "the loss expects probabilities, the model's output is logits"))
    resumed.record_finding(Finding(rule="eval_is_train", step=10, mode="train", message="the same data"))
    resumed.close()
    held = sorted((f.rule, f.step) for f in tripwire.open_run(out).findings)
    assert held == [("eval_is_train", 10), ("loss_output_mismatch", 0), ("loss_output_mismatch", 10)]


def test_a_new_run_in_a_fresh_directory_records_it(tmp_path: Path) -> None:
    for name in ("a", "b"):
        session = tripwire.Session(rules=[], out_dir=tmp_path / name)
        session.record_finding(_check(0))
        _train(session, range(0, 5))
        session.close()
        assert [f.step for f in tripwire.open_run(tmp_path / name).findings] == [0]


def test_the_same_session_records_each_of_its_own_checks(tmp_path: Path) -> None:
    session = tripwire.Session(rules=[], out_dir=tmp_path / "run")
    session.record_finding(_check(0))
    _train(session, range(0, 5))
    session.record_finding(_check(5))  # (a new model in the same session: its own finding)
    session.close()
    assert [f.step for f in tripwire.open_run(tmp_path / "run").findings] == [0, 5]
    assert os.path.isdir(tmp_path / "run")
