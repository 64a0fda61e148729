"""Trial 28a (core/_session.py; DDP sessions by hand, one per rank, in one process) and trial 28d F2.

- F1: a rank resumed from another rank's checkpoint state (Lightning saves rank 0's) counted every
  finding of its own in the run as "fired before", also those made after the checkpoint by the
  attempt that crashed before its stop took effect: the resumed rule stayed silent and its stop was lost.
- F2: such a rank that ``writer.ranks`` leaves out has no records of its own to read back: its rules
  start afresh, which nothing said.
- F6: a check recorded again at a step the resumed training ran again, its message measured anew
  (``distributed_stop`` quotes another rank's finding), was written twice.
- 28d F2: ``plan.add`` took an LSTM's tuple output or a ``PackedSequence``; every later ``end_step``
  then raised a numpy error naming no tensor, and the step's loss was lost.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Finding, Session

STOP = [{"name": "exploding_tensor", "actions": ["log", "stop_training"]}]


def _ranks(out: Path, rules: Any = STOP, **kw: Any) -> tuple[Session, Session]:
    return tuple(Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=rules, **kw)  # type: ignore[return-value]
                 for r in (0, 1))


def _steps(sessions: tuple[Session, ...], steps: range, nan_on_1: set[int]) -> dict[int, list[Any]]:
    """Each step on every rank; the decisions of each rank's steps."""
    decisions: dict[int, list[Any]] = {s.rank: [] for s in sessions}
    for step in steps:
        for s in sessions:
            loss = math.nan if s.rank == 1 and step in nan_on_1 else 1.0 / (step + 1)
            decisions[s.rank].append(s.step("train", step, {"loss": (loss, "losses")}))
    return decisions


@pytest.mark.parametrize("writer", [{"ranks": "all"}, {"ranks": [0]}])
def test_a_finding_on_rank_1_after_the_checkpoint_is_found_again_and_its_stop_acts(
        tmp_path: Path, writer: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    first = _ranks(out, writer=writer)
    _steps(first, range(0, 6), nan_on_1=set())
    state = first[0].state_dict()  # (Lightning saves rank 0's callback state: steps 0-5 done)
    got = _steps(first, range(6, 9), nan_on_1={7})  # the fault after the checkpoint; the stop never took effect
    assert got[1][1].stop and got[1][1].stopped_by.step == 7
    for s in first:
        s.close("failed")  # (the attempt crashed at step 8)
    resumed = _ranks(out, writer=writer)
    for s in resumed:
        s.load_state_dict(state)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        got = _steps(resumed, range(6, 9), nan_on_1={7})
    for s in resumed:
        s.close()
    # rank 1's rule finds it again at step 7 and its stop acts (it was silent: fired "before")
    assert [d.stop for d in got[1]] == [False, True, True], got[1]
    assert got[1][1].stopped_by is not None and (got[1][1].stopped_by.rule, got[1][1].stopped_by.step) == (
        "exploding_tensor", 7)
    assert resumed[1].stopped_by is not None and resumed[1].stopped_by.worker == 1
    assert "found again after the resume: [critical] exploding_tensor at step 7 (train, rank 1)" in caplog.text
    # the run holds it once (found again: not written again)
    held = [(f.rule, f.step, f.worker) for f in tripwire.open_run(out).findings]
    assert held == [("exploding_tensor", 7, 1)], held


def test_a_finding_before_the_checkpoint_still_keeps_its_rule_quiet(tmp_path: Path) -> None:
    """The other side of F1: a finding at a step the checkpoint had done is "fired before" (trial 26h)."""
    out = tmp_path / "run"
    first = _ranks(out, rules=[{"name": "exploding_tensor", "actions": ["log", "record"]}])
    _steps(first, range(0, 6), nan_on_1={3})
    state = first[0].state_dict()
    for s in first:
        s.close()
    resumed = _ranks(out, rules=[{"name": "exploding_tensor", "actions": ["log", "record"]}])
    for s in resumed:
        s.load_state_dict(state)
    _steps(resumed, range(6, 10), nan_on_1={8})
    for s in resumed:
        s.close()
    assert resumed[1].findings == []
    assert [(f.rule, f.step, f.worker) for f in tripwire.open_run(out).findings] == [("exploding_tensor", 3, 1)]


def test_a_resumed_rank_that_writes_no_records_says_its_rules_start_afresh(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for writer in ({"ranks": [0]}, {"ranks": "all"}):
        out = tmp_path / str(writer["ranks"])
        first = _ranks(out, writer=writer)
        _steps(first, range(0, 6), nan_on_1=set())
        state = first[0].state_dict()
        for s in first:
            s.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            resumed = _ranks(out, writer=writer)
            for s in resumed:
                s.load_state_dict(state)
        for s in resumed:
            s.close()
        said = [r.getMessage() for r in caplog.records if "start afresh" in r.getMessage()]
        if writer["ranks"] == "all":  # (every rank reads its own records back: nothing to say)
            assert said == [], said
            continue
        assert len(said) == 1, said
        assert said[0].startswith("tripwire: rank 1 resumed from rank 0's checkpoint state at train step 6, and its "
                                  "rules start afresh there"), said[0]
        assert "writer.ranks [0] leaves it out" in said[0] and "writer: {ranks: all}" in said[0]


def _stop_check(step: int, percent: str) -> Finding:
    return Finding(rule="distributed_stop", step=step, mode="train", worker=0,
                   message=f"rank 1's rule 'loss_not_decreasing' (train step {step}: loss has risen {percent} in 50 "
                           f"steps) stopped training; every rank stops at the same step")


def test_a_check_recorded_again_at_a_step_run_again_is_held_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = Session(out_dir=str(out), rank=0, world_size=2, save_interval=1, rules=[])
    _steps((first,), range(0, 6), nan_on_1=set())
    state = first.state_dict()
    _steps((first,), range(6, 9), nan_on_1=set())
    first.record_finding(_stop_check(8, "6.701%"))
    first.close("failed")
    resumed = Session(out_dir=str(out), rank=0, world_size=2, save_interval=1, rules=[])
    resumed.load_state_dict(state)
    _steps((resumed,), range(6, 9), nan_on_1=set())
    got = resumed.record_finding(_stop_check(8, "7.159%"))  # (the other rank measured it again)
    later = resumed.record_finding(_stop_check(12, "7.5%"))  # (another step: another stop)
    resumed.close()
    assert got.message.endswith("7.159% in 50 steps) stopped training; every rank stops at the same step")
    assert [f.step for f in resumed.findings] == [8, 12] and later.step == 12
    held = [(f.rule, f.step) for f in tripwire.open_run(out).findings]
    assert held == [("distributed_stop", 8), ("distributed_stop", 12)], held


# ------------------------------------------------------------------------------------ trial 28d F2
def _plan(tmp_path: Path) -> tuple[Session, Any]:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[], include_collections=["activations"])
    return session, session.begin_step("train", 0)


def test_a_tuple_offered_is_refused_at_once_naming_it_and_the_step_keeps_the_rest(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    lstm = torch.nn.LSTM(4, 8, batch_first=True)
    with torch.no_grad():
        out = lstm(torch.randn(2, 5, 4))  # (output, (h, c))
    session, plan = _plan(tmp_path)
    plan.add("loss", torch.tensor(0.5), "losses")
    with pytest.raises(ConfigError, match=r"add\('lstm/output'\): got a tuple of 2 holding a tensor \(Tensor\); "
                                          r"accepted: a tensor, an array or a number.*output\[0\]"):
        plan.add("lstm/output", out, "activations")
    plan.add("lstm/output", out[0], "activations")  # (the fix the message names)
    session.end_step()
    for step in (1, 2):
        session.step("train", step, {"loss": (torch.tensor(0.4), "losses")})
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("train") == [0, 1, 2]
    assert run.series("loss", "raw", "train")[0].tolist() == [0, 1, 2]
    assert "lstm/output" in run.tensor_names()


def test_a_packed_sequence_is_refused_naming_its_data(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    lstm = torch.nn.LSTM(4, 8, batch_first=True)
    x = torch.randn(3, 5, 4)
    packed = lstm(torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3, 2]), batch_first=True))[0]
    session, plan = _plan(tmp_path)
    plan.add("loss", 0.5, "losses")
    with pytest.raises(ConfigError, match=r"add\('lstm/output'\): got a PackedSequence .*accepted: a tensor, an "
                                          r"array or a number: offer its \.data"):
        plan.add("lstm/output", packed, "activations")
    plan.add("lstm/output", packed.data.detach(), "activations")
    session.end_step()  # (it raised a numpy error naming nothing, and the loss was lost)
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.value("loss", "raw", 0, "train") == 0.5 and "lstm/output" in run.tensor_names()


@pytest.mark.parametrize("value, said", [
    (object(), r"got a builtins\.object \(<object object at .*\), which is no tensor, array or number"),
    ([1.0, None], r"got a list of 2 holding None \(NoneType\)"),
    (((1.0, 2.0), ("a", 1.0)), r"got a tuple of 2 holding a str \(str\)"),
    (np.array(["a", "b"]), r"got a numpy array of dtype <U1"),
    (np.str_("a"), r"got a numpy scalar of dtype <U1"),
    ("hello", r"got a str \('hello'\); accepted: a tensor, an array or a number"),
])
def test_what_is_no_value_is_refused_where_it_is_offered(tmp_path: Path, value: Any, said: str) -> None:
    session, plan = _plan(tmp_path)
    with pytest.raises(ConfigError, match=r"add\('x/output'\): " + said):
        plan.add("x/output", value, "activations")
    session.end_step()
    session.close()


def test_numbers_lists_of_numbers_and_arrays_are_still_taken(tmp_path: Path) -> None:
    session, plan = _plan(tmp_path)
    for i, value in enumerate([1, 2.5, True, np.float32(3.0), np.int64(4), [1.0, 2.0], ((1, 2), (3, 4)),
                               np.ones((2, 3), dtype=np.float32), np.arange(4)]):
        assert plan.add(f"a{i}/output", value, "activations"), value
    session.end_step()
    session.close()
    assert len(tripwire.open_run(tmp_path / "run").tensor_names()) == 9
