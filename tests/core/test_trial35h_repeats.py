"""Trial 35h: a train step below the last one (a loop that counts from 0 every epoch) replaced the
every-step losses kept since the last save step at the same step numbers, and a NaN kept at the end
of an epoch was never judged (the next save step's rules read up to a lower step). The kept values
are now written and judged when the step goes back."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

import tripwire


def _session(tmp_path: Path) -> tripwire.Session:
    return tripwire.Session({"rules": ["exploding_tensor"], "actions": ["log", "stop_training"]},
                            out_dir=tmp_path / "run")


def test_repeated_steps_keep_every_value(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        for step, value in [(0, 1.0), (1, 2.0), (2, 3.0), (1, 9.0), (2, 8.0), (3, 7.0)]:
            s.step("train", step, {"loss": (value, "losses")})
    steps, values = tripwire.open_run(tmp_path / "run").series("loss")
    assert steps.tolist() == [0, 1, 2, 1, 2, 3] and values.tolist() == [1.0, 2.0, 3.0, 9.0, 8.0, 7.0]


@pytest.mark.parametrize("epoch,at", [(0, 12), (1, 12), (0, 14)])
def test_a_nan_kept_before_the_steps_restart_is_judged_and_stops(tmp_path: Path, epoch: int, at: int) -> None:
    stopped = None
    with _session(tmp_path) as s:
        for e in range(3):
            for step in range(15):
                value = math.nan if (e, step) == (epoch, at) else 100.0 * e + step
                if s.step("train", step, {"loss": (value, "losses")}).stop and stopped is None:
                    stopped = (e, step)
            if stopped:
                break
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", at)]
    assert stopped == (epoch + 1, 0)  # (the first step after the restart acts on it)


def test_the_quiet_step_path_judges_kept_values_when_the_step_goes_back(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        for e in range(2):
            step = 0
            while step < 15:
                if s.quiet_until("train", step) > step:
                    value = math.nan if (e, step) == (0, 13) else float(step)
                    decision = s.quiet_step("train", step, [("loss", value, "losses")])
                else:
                    s.begin_step("train", step).add("loss", float(step), "losses")
                    decision = s.end_step()
                if decision.stop:
                    break
                step += 1
            if decision.stop:
                break
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 13)]
    assert (e, step) == (1, 0)


def test_end_step_with_no_step_open_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tripwire"), _session(tmp_path) as s:
        assert not s.end_step().stop
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.end_step()
    said = [r.getMessage() for r in caplog.records if "end_step() with no step open" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("tripwire: ")


def test_a_checkpoint_loaded_into_a_session_of_another_out_dir_is_said(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    with tripwire.Session({"rules": ["default"]}, out_dir=tmp_path / "a") as s:
        for step in range(13):
            s.step("train", step, {"loss": (1.0, "losses")})
        state = s.state_dict()
    with caplog.at_level("WARNING", logger="tripwire"):
        other = tripwire.Session({"rules": ["default"]}, out_dir=tmp_path / "b")
        other.load_state_dict(state)
        other.close()
    assert any("load_state_dict: the checkpoint counts 13 train step(s), but" in r.getMessage() and "holds no run"
               in r.getMessage() for r in caplog.records), caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="tripwire"):
        same = tripwire.Session({"rules": ["default"]}, out_dir=tmp_path / "a")
        same.load_state_dict(state)
        same.close()
    assert not any("holds no run" in r.getMessage() for r in caplog.records), caplog.text
