"""Quiet steps: ``Session.quiet_until`` finds the steps at which nothing is due, and
``Session.quiet_step`` accounts for one of them (counters, kept every-step losses, a stop requested
by ``tripwire watch``) with the same outcome as ``begin_step``/``end_step``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Finding, Session


def _drive(session: Session, losses: list[float], quiet: bool) -> None:
    """Offer one training loss a step, through quiet_step where allowed (``quiet``) or through
    begin_step/end_step at every step."""
    for step, value in enumerate(losses):
        if quiet and session.quiet_until("train", step) > step:
            kept = (("loss", value, "losses"),) if session.quiet_keeps("train", "losses") else ()
            session.quiet_step("train", step, kept)
            continue
        plan = session.begin_step("train", step)
        if plan.keeps("losses"):
            plan.add("loss", value, "losses")
        session.end_step()


@pytest.mark.parametrize("save", [
    {"interval": 10},
    {"interval": 7, "start_step": 5, "end_step": 40},
    {"interval": 1000, "steps": [3, 4, 18]},
])
def test_quiet_path_records_what_the_plan_path_records(tmp_path: Path, save: dict[str, Any]) -> None:
    losses = list(np.linspace(2.0, 0.5, 50))
    runs = {}
    for quiet in (False, True):
        out = tmp_path / f"run-{quiet}"
        s = Session({"out_dir": str(out), "save": save, "rules": []})
        _drive(s, losses, quiet)
        assert s.mode_steps["train"] == 50 and s.global_step == 50
        s.close()
        run = tripwire.open_run(out)
        runs[quiet] = (run.series("loss", "raw", "train"), run.steps("train"))
    (steps_a, values_a), saved_a = runs[False]
    (steps_b, values_b), saved_b = runs[True]
    assert steps_a.tolist() == steps_b.tolist() and saved_a == saved_b
    np.testing.assert_array_equal(values_a, values_b)
    cfg = tripwire.SaveConfig.from_dict(save).for_mode("train")
    in_range = [s for s in range(50) if cfg.in_range(s)]
    assert steps_b.tolist() == in_range  # every step of the saved range: kept at quiet steps too


def test_quiet_until_finds_the_next_due_step() -> None:
    s = Session({"save": {"interval": 10, "start_step": 5, "end_step": 60, "modes": {"eval": {"interval": 1}}},
                 "rules": []}, write=False)
    assert s.quiet_until("train", 0) == 5  # quiet, without kept losses: those start at start_step
    assert not s.quiet_keeps("train", "losses")
    assert s.quiet_until("train", 5) == 10 and s.quiet_keeps("train", "losses")
    assert s.quiet_until("train", 7) == 10  # inside the range found: a comparison
    assert s.quiet_until("train", 10) == 10  # a save step is not quiet
    assert s.quiet_until("train", 11) == 20
    assert s.quiet_until("train", 51) == 60  # 60: end_step, where keeping the losses stops
    assert s.quiet_until("train", 60) == 60 + tripwire._session.QUIET_SCAN  # nothing is ever due after
    assert not s.quiet_keeps("train", "losses")
    assert s.quiet_until("eval", 7) == 7  # every eval step (from start_step) is saved


def test_quiet_step_refuses_a_step_that_is_not_quiet() -> None:
    s = Session({"save": {"interval": 10}, "rules": []}, write=False)
    assert s.quiet_until("train", 1) == 10
    with pytest.raises(ValueError, match=r"quiet_step: step 10 of mode 'train' is not quiet.*\[1, 10\)"):
        s.quiet_step("train", 10)
    with pytest.raises(ValueError, match="mode: got 'valid'"):
        s.quiet_until("valid", 0)


def test_external_stop_is_honoured_at_a_quiet_step(tmp_path: Path) -> None:
    s = Session({"out_dir": str(tmp_path), "save": {"interval": 100}, "rules": []})
    assert s.quiet_until("train", 1) == 100
    assert not s.quiet_step("train", 1).stop
    tripwire.request_stop(tmp_path, Finding("watch_rule", 0, "train", "seen by the watcher", source="watch"))
    s._stop_checked = 0.0  # polled at most once a second
    d = s.quiet_step("train", 2, (("loss", 1.0, "losses"),))
    assert d.stop and d.stopped_by.rule == "watch_rule" and s.stopped_by is d.stopped_by
    s.close()
    assert tripwire.open_run(tmp_path).series("loss", "raw", "train")[0].tolist() == [2]


def test_owned_values_are_kept_by_reference_others_as_copies(tmp_path: Path) -> None:
    # owned=True (Lightning's own clone of a step's loss): no clone a step; a caller's buffer is copied
    torch = pytest.importorskip("torch")
    s = Session(out_dir=str(tmp_path / "run"), save_interval=10)
    s.step("train", 0, {"loss": (torch.tensor(0.0), "losses")})
    assert s.quiet_until("train", 1) == 10
    buffer = torch.tensor(1.0)
    s.quiet_step("train", 1, [("loss", buffer, "losses")])
    buffer.fill_(99.0)  # a loop reusing its buffer: the kept value is the one offered
    own = torch.tensor(2.0)
    s.quiet_step("train", 2, [("loss", own, "losses")], owned=True)
    kept = {step: tensor for step, _, tensor in s.kept}
    assert kept[2] is own and kept[1] is not buffer and float(kept[1]) == 1.0
    s.close()
    assert tripwire.open_run(tmp_path / "run").series("loss")[1].tolist() == [0.0, 1.0, 2.0]
