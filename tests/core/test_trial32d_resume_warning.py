"""Trial 32d (theta's note): the resume WARNING said of the earlier training's last step that it "may
hold only some of its tensors (a crash inside that step)" at every resume, after a training that had
ended normally too. A session reads how the earlier training ended (its end marker, before its
writer removes it) and names that step only where the training failed or ended without closing the
run (killed), as a possibility tied to that end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tripwire import Session


def _step(session: Session, step: int, *, loss: bool = True) -> None:
    plan = session.begin_step("train", step)
    plan.add("gradients/w", np.full(4, 0.1 * (step + 1)), "gradients")
    if loss:
        plan.add("loss", 1.0 / (step + 1), "losses")
    session.end_step()


def _session(out: Path) -> Session:
    return Session(out_dir=str(out), save_interval=1, rules=[], include_collections=["gradients"])


def _resumed_warning(out: Path, state: dict[str, Any], caplog: pytest.LogCaptureFixture) -> str:
    resumed = _session(out)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed.load_state_dict(state)
    for step in range(5, 8):
        _step(resumed, step)
    resumed.close()
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1, said
    return said[0]


def _first(out: Path, end: str) -> dict[str, Any]:
    """A training checkpointed after step 4 that goes on to step 6 and ends ``end``: ``complete``,
    ``stopped``, ``failed`` (inside step 6, before its loss), ``killed`` (likewise, no end marker)."""
    first = _session(out)
    for step in range(5):
        _step(first, step)
    state = first.state_dict()
    _step(first, 5)
    _step(first, 6, loss=end == "complete" or end == "stopped")
    if end == "killed":
        first.flush()
        first.writer.abandon()
    else:
        first.close(end)
    return state


@pytest.mark.parametrize("end", ["complete", "stopped"])
def test_no_cut_step_is_named_after_a_training_that_ended_normally(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, end: str) -> None:
    said = _resumed_warning(tmp_path / "run", _first(tmp_path / "run", end), caplog)
    assert "holds train steps 5 to 6 of worker 0" in said
    assert "only some of its tensors" not in said and "crash" not in said and "step 6 is the last" not in said, said


def test_a_training_killed_inside_a_step_has_that_step_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said = _resumed_warning(tmp_path / "run", _first(tmp_path / "run", "killed"), caplog)
    assert ("; train step 6 is the last that training wrote before it ended without closing the run (killed, out of "
            "memory, a crash): if it ended inside that step, that step holds only some of its tensors, and one it "
            "lacks holds that step once, the resumed record;") in said, said


def test_a_training_that_failed_has_its_last_step_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said = _resumed_warning(tmp_path / "run", _first(tmp_path / "run", "failed"), caplog)
    assert ("; train step 6 is the last that training wrote before it failed: if it ended inside that step, that "
            "step holds only some of its tensors, and one it lacks holds that step once, the resumed record;") in said
