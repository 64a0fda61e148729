"""Trial 33h F2: the resume WARNING said the steps past the checkpoint were written "by the training
that stopped after it" whatever way that training ended: after one that ran to its end (``complete``)
and after one killed. "stopped" is one of the run's statuses, so the line suggested that a rule had
stopped a training that it had not. It now names how that training ended: its end marker's status,
or "ended" where it left none."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tripwire import Session


def _step(session: Session, step: int) -> None:
    plan = session.begin_step("train", step)
    plan.add("gradients/w", np.full(4, 0.1 * (step + 1)), "gradients")
    plan.add("loss", 1.0 / (step + 1), "losses")
    session.end_step()


def _session(out: Path) -> Session:
    return Session(out_dir=str(out), save_interval=1, rules=[], include_collections=["gradients"])


def _first(out: Path, end: str) -> dict[str, Any]:
    """A training checkpointed after step 2 that goes on to step 4 and ends ``end`` (``killed``: no
    end marker)."""
    first = _session(out)
    for step in range(3):
        _step(first, step)
    state = first.state_dict()
    for step in (3, 4):
        _step(first, step)
    if end == "killed":
        first.flush()
        first.writer.abandon()
    else:
        first.close(end)
    return state


@pytest.mark.parametrize(("end", "said_of_it"), [
    ("complete", "(by the training that went on after it and ended 'complete');"),
    ("stopped", "(by the training that went on after it and ended 'stopped');"),
    ("failed", "(by the training that went on after it and ended 'failed');"),
    ("killed", "(by the training that went on after it and ended);"),
])
def test_the_resume_warning_names_how_the_earlier_training_ended(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, end: str, said_of_it: str) -> None:
    state = _first(tmp_path / "run", end)
    resumed = _session(tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed.load_state_dict(state)
    _step(resumed, 3)
    resumed.close()
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1, said
    assert "holds train steps 3 to 4 of worker 0, written after this checkpoint " + said_of_it in said[0], said[0]
    assert "stopped after it" not in said[0]
