"""Trial 41d F6: ``load_state_dict`` on a session that had run steps told the user to "create the
session ... with the run's out_dir", which it had been."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire


def test_load_state_dict_after_steps_says_when_it_belongs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = tripwire.Session(rules=[], out_dir=tmp_path / "run", save_interval=2)
    for step in range(2):
        s.step("train", step, {"loss": (1.0, "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.load_state_dict(s.state_dict())
    s.close()
    (said,) = [r.getMessage() for r in caplog.records if "load_state_dict" in r.getMessage()]
    assert "this session has run steps already" in said and "before its first step" in said, said
    assert "create the session" not in said


def test_a_checkpoint_into_another_out_dir_still_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with tripwire.Session(rules=[], out_dir=tmp_path / "a") as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
        state = s.state_dict()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(rules=[], out_dir=tmp_path / "b") as s2:
            s2.load_state_dict(state)
    (said,) = [r.getMessage() for r in caplog.records if "load_state_dict" in r.getMessage()]
    assert "holds no run of this worker" in said and "create the session (or callback) with the run's out_dir" in said


def _checkpointed(out: Path) -> dict:
    """A training of 5 steps into ``out``, closed: its session's state_dict (a checkpoint's)."""
    with tripwire.Session(rules=[], out_dir=out) as s:
        for step in range(5):
            s.step("train", step, {"loss": (1.0, "losses")})
        return s.state_dict()


def test_a_checkpoint_into_its_own_out_dir_after_steps_is_said(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Trial 41k F2: the documented resume (a new session on the run's own out_dir) that ran steps
    before load_state_dict was silent: its steps went 23, 24, 0, 1, 2 and the run read 'fresh'."""
    state = _checkpointed(tmp_path / "run")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(rules=[], out_dir=tmp_path / "run") as again:
            for step in range(2):
                again.step("train", step, {"loss": (1.0, "losses")})
            again.load_state_dict(state)
    said = [r.getMessage() for r in caplog.records if "load_state_dict" in r.getMessage()]
    assert len(said) == 1 and "this session has run steps already" in said[0], said


def test_the_documented_resume_is_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = _checkpointed(tmp_path / "run")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(rules=[], out_dir=tmp_path / "run") as again:
            again.load_state_dict(state)
            again.step("train", 5, {"loss": (1.0, "losses")})
    assert not [r for r in caplog.records if "load_state_dict" in r.getMessage()], caplog.text
