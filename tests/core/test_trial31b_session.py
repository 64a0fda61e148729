"""Trial 31b (Lightning DDP, gloo, 2 ranks), the session's side; DDP sessions by hand, one per rank,
in one process.

- F2: under DDP the "found again after the resume" line named the rank for rank 1 only: rank 0's
  read as if its finding had no rank.
- F3: after a crash inside a step, the resume WARNING said that a reader sees both records of each
  step run again, but the step the crash interrupted holds only part of its tensors.
- F5: a rank whose own loss was finite, its gradients NaN after the all-reduce, was told to check
  its own inputs and labels.
- F6: the warnings a session says at its end named no rank under DDP: each rank said the same line.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Finding, Session

STOP = [{"name": "exploding_tensor", "actions": ["log", "stop_training"]}]


def _ranks(out: Path, rules: Any = STOP, world_size: int = 2, **kw: Any) -> tuple[Session, ...]:
    return tuple(Session(out_dir=str(out), rank=r, world_size=world_size, save_interval=1, rules=rules, **kw)
                 for r in range(world_size))


def _steps(sessions: tuple[Session, ...], steps: range, nan_at: set[int]) -> None:
    for step in steps:
        for s in sessions:
            loss = math.nan if step in nan_at else 1.0 / (step + 1)
            s.step("train", step, {"loss": (loss, "losses")})


# ------------------------------------------------------------ F2: "found again" names rank 0 too
def test_the_found_again_line_names_every_rank_rank_0_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = _ranks(out)
    _steps(first, range(0, 6), nan_at=set())
    state = first[0].state_dict()  # (Lightning saves rank 0's callback state)
    _steps(first, range(6, 8), nan_at={7})  # (both ranks find it at step 7: the stop never took effect)
    for s in first:
        s.close("failed")
    resumed = _ranks(out)
    for s in resumed:
        s.load_state_dict(state)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _steps(resumed, range(6, 8), nan_at={7})
    for s in resumed:
        s.close()
    said = sorted(r.getMessage() for r in caplog.records if "found again after the resume" in r.getMessage())
    assert len(said) == 2, said
    assert said[0].startswith("tripwire: found again after the resume: [critical] exploding_tensor at step 7 "
                              "(train, rank 0): loss holds the value nan"), said[0]
    assert said[1].startswith("tripwire: found again after the resume: [critical] exploding_tensor at step 7 "
                              "(train, rank 1): "), said[1]


def test_a_check_found_again_names_rank_0_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    check = Finding(rule="distributed_stop", step=7, mode="train", worker=0, message="rank 1's stop")
    first = Session(out_dir=str(out), rank=0, world_size=2, save_interval=1, rules=[])
    _steps((first,), range(0, 6), nan_at=set())
    state = first.state_dict()
    _steps((first,), range(6, 8), nan_at=set())
    first.record_finding(check)
    first.close("failed")
    resumed = Session(out_dir=str(out), rank=0, world_size=2, save_interval=1, rules=[])
    resumed.load_state_dict(state)
    _steps((resumed,), range(6, 8), nan_at=set())
    with caplog.at_level(logging.INFO, logger="tripwire"):
        resumed.record_finding(check)
    resumed.close()
    said = [r.getMessage() for r in caplog.records if "found again after the resume" in r.getMessage()]
    assert said == ["tripwire: found again after the resume: [warning] distributed_stop at step 7 (train, rank 0): "
                    "rank 1's stop (the run holds this check's finding from the training it continues: not recorded "
                    "again)"], said


def test_one_process_names_no_rank_in_the_found_again_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), save_interval=1, rules=STOP)
    _steps((first,), range(0, 6), nan_at=set())
    state = first.state_dict()
    _steps((first,), range(6, 8), nan_at={7})
    first.close("failed")
    resumed = Session(out_dir=str(out), save_interval=1, rules=STOP)
    resumed.load_state_dict(state)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _steps((resumed,), range(6, 8), nan_at={7})
    resumed.close()
    assert "found again after the resume: [critical] exploding_tensor at step 7 (train): loss" in caplog.text


# ------------------------------------------------------------ F6: the end's warnings name the rank
def _gan_steps(sessions: tuple[Session, ...], steps: range) -> None:
    for step in steps:
        for s in sessions:  # (no "loss": a GAN's training step returns none)
            s.step("train", step, {"g_loss": (1.0 / (step + 1), "losses"), "d_loss": (0.5, "losses")})


def test_the_warnings_said_at_the_end_name_each_rank(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ranks = _ranks(tmp_path / "run", rules=["oscillating_loss"])
    _gan_steps(ranks, range(4))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for s in ranks:
            s.close()
    said = [r.getMessage() for r in caplog.records if "loss='loss'" in r.getMessage()]
    assert len(said) == 2, said
    for rank, line in enumerate(said):
        assert line.startswith(f"tripwire: rank {rank}: rule 'oscillating_loss': loss='loss' matches no loss or metric "
                               f"of this run (captured: d_loss, g_loss): the rule read nothing under that name. The "
                               f"losses of a GAN"), line


def test_the_warnings_said_after_the_first_epoch_name_each_rank(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ranks = _ranks(tmp_path / "run", rules=["oscillating_loss"])
    _gan_steps(ranks, range(4))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        named = [s.name_unread_inputs() for s in ranks]
        for s in ranks:
            s.close()  # (said already: not said again)
    assert all(n and n[0].startswith("rule 'oscillating_loss': loss='loss' matches no") for n in named), named
    said = [r.getMessage() for r in caplog.records if "loss='loss'" in r.getMessage()]
    assert len(said) == 2, said
    for rank, line in enumerate(said):
        assert line.startswith(f"tripwire: rank {rank}: rule 'oscillating_loss': loss='loss' matches no"), line
        assert line.endswith("(named after the first epoch: the training has offered no such value so far)"), line


def test_one_process_names_no_rank_in_the_warnings_at_the_end(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=["oscillating_loss"])
    _gan_steps((session,), range(4))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session.close()
    said = [r.getMessage() for r in caplog.records if "loss='loss'" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("tripwire: rule 'oscillating_loss': loss='loss'"), said


# ------------------------------------------------------------ F3: the step a crash interrupted
def _step_with_gradients(session: Session, step: int) -> None:
    plan = session.begin_step("train", step)
    plan.add("gradients/w", np.full(4, 0.1 * step), "gradients")
    plan.add("loss", 1.0 / (step + 1), "losses")
    session.end_step()


def test_the_resume_warning_names_the_step_a_crash_cut_as_holding_part_of_its_tensors(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), save_interval=1, rules=[], include_collections=["gradients"])
    for step in range(5):
        _step_with_gradients(first, step)
    state = first.state_dict()  # (the checkpoint: steps 0-4 done)
    _step_with_gradients(first, 5)
    plan = first.begin_step("train", 6)
    plan.add("gradients/w", np.full(4, 0.6), "gradients")  # the crash comes before the loss
    first.close("failed")
    resumed = Session(out_dir=str(out), save_interval=1, rules=[], include_collections=["gradients"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        resumed.load_state_dict(state)
    for step in range(5, 8):
        _step_with_gradients(resumed, step)
    resumed.close()
    said = [r.getMessage() for r in caplog.records if "written after this checkpoint" in r.getMessage()]
    assert len(said) == 1, said
    assert "holds train steps 5 to 6 of worker 0" in said[0]
    assert ("so a reader sees both of each (series() returns such a step twice, the resumed one second); train step "
            "6 is the last that training wrote before it failed: if it ended inside that step, that step holds only "
            "some of its tensors, and one it lacks holds that step once, the resumed record;") in said[0], said[0]
    # what it says: the loss of step 6 is there once, its gradient twice
    run = tripwire.open_run(out)
    assert run.series("loss")[0].tolist() == [0, 1, 2, 3, 4, 5, 5, 6, 7]
    assert run.series("gradients/w", "l2")[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 5, 6, 7]


# ------------------------------------------------------------ F5: a NaN that came through the all-reduce
def _ddp_step(session: Session, step: int, nan_rank: int | None, loss_nan: bool = True) -> Any:
    """A step of a DDP loop whose rank ``nan_rank`` had a NaN batch at step 3: its loss NaN, and every
    rank's gradients NaN after the all-reduce."""
    plan = session.begin_step("train", step)
    nan_step = nan_rank is not None and step == 3
    plan.add("loss", math.nan if nan_step and session.rank == nan_rank and loss_nan else 1.0 / (step + 1), "losses")
    plan.add("gradients/w", np.full(4, math.nan if nan_step else 0.1), "gradients")
    return session.end_step()


def test_a_rank_whose_loss_was_finite_is_pointed_at_the_other_ranks(tmp_path: Path) -> None:
    ranks = _ranks(tmp_path / "run", include_collections=["gradients"])
    for step in range(5):
        for s in ranks:
            _ddp_step(s, step, nan_rank=1)
    for s in ranks:
        s.close()
    (on_0,), (on_1,) = ranks[0].findings, ranks[1].findings
    assert (on_0.rule, on_0.step, on_0.tensors) == ("exploding_tensor", 3, ("gradients/w",))
    assert on_0.message.startswith("gradients/w holds 4 non-finite values at step 3 (train). Usual causes: ")
    assert on_0.message.endswith(
        "check the inputs and labels. This rank's loss was finite at that step (loss 0.25), and its gradients are "
        "all-reduced with those of the other ranks (world size 2): a NaN or infinity from another rank's loss or "
        "batch reaches every rank's gradients, so look first at the other ranks' findings at this step (tripwire "
        "inspect on the run), then at this rank's inputs and labels."), on_0.message
    # the rank whose own loss was NaN is told of its loss, as before
    assert on_1.tensors == ("loss",) and "all-reduced" not in on_1.message
    # the run holds the note (the log line and tripwire inspect read it there)
    held = {f.worker: f.message for f in tripwire.open_run(tmp_path / "run").findings}
    assert "This rank's loss was finite at that step (loss 0.25)" in held[0] and "all-reduced" not in held[1]


def test_a_nan_gradient_with_a_finite_loss_has_no_all_reduce_note_in_one_process(tmp_path: Path) -> None:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=STOP, include_collections=["gradients"])
    for step in range(5):
        _ddp_step(session, step, nan_rank=0, loss_nan=False)  # (float16 overflow in the backward, say)
    session.close()
    (found,) = session.findings
    assert found.tensors == ("gradients/w",) and "all-reduced" not in found.message
    assert found.message.endswith("check the inputs and labels.")


def test_a_rank_whose_loss_is_not_known_gets_no_all_reduce_note(tmp_path: Path) -> None:
    """No loss recorded at that step (a loop offering gradients alone): nothing says that this rank's
    loss was finite, so nothing is added."""
    ranks = _ranks(tmp_path / "run", include_collections=["gradients"])
    for step in range(5):
        for s in ranks:
            s.step("train", step, {"gradients/w": (np.full(4, math.nan if step == 3 else 0.1), "gradients")})
    for s in ranks:
        s.close()
    found = [f for s in ranks for f in s.findings]
    assert [(f.worker, f.tensors) for f in found] == [(0, ("gradients/w",)), (1, ("gradients/w",))]
    assert all(f.message.endswith("check the inputs and labels.") for f in found), found
