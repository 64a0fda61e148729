"""Trial 30b (a hand-written torch.distributed DDP loop, one ``tripwire.Session`` per rank): what a
rank's run says about how it ended and why. Sessions of two ranks are made in one process here
(tests/integrations/test_trial30b_ddp.py runs the recipe under torchrun).

- F1: a process that ended on an exception before its session's first step left the shard
  ``complete``, with no WARNING and no ``stop_reason`` (``tripwire watch`` then blamed the config).
- F2: a rank stopped by another rank's finding recorded no reason (with ``writer.ranks: [0]`` the
  run read ``stopped`` and said nowhere why): ``Session.stopped_by_rank``.
- F3: the hand loop's "stopping training" line did not name the rank under a world size above 1.
- F5: a rank that does not evaluate (a loop validating on rank 0 alone) heard that "no evaluation
  (mode eval) was recorded in this run", though the run holds rank 0's.
- F6: a run of world size 2 holding one worker's shard read ``complete`` with no word of the other.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError, Session
from tripwire._cli import main

STOP = [{"name": "exploding_tensor", "actions": ["log", "stop_training"]}]


def _ranks(out: Path, rules: Any = STOP, **kw: Any) -> tuple[Session, Session]:
    return tuple(Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=rules, **kw)  # type: ignore[return-value]
                 for r in (0, 1))


def _run_script(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def _marker(out: Path, rank: int = 0) -> dict[str, Any]:
    return json.loads((out / "workers" / f"worker-{rank:05d}.end.json").read_text())


# ------------------------------------------------------------ F1: a crash before the first step
def test_a_process_that_raises_before_the_first_step_ends_its_run_failed_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "crash0"
    proc = _run_script(f"""
        import tripwire
        s = tripwire.Session(out_dir={str(out)!r}, rules=["default"])
        raise RuntimeError("data loader failed before the first step")
    """, tmp_path)
    assert proc.returncode == 1, proc.stderr
    marker = _marker(out)
    assert marker["status"] == "failed", marker  # (it was complete)
    assert marker["stop_reason"] == "RuntimeError: data loader failed before the first step"
    assert marker["records"] == 0
    assert ("tripwire: the process is exiting with the run " in proc.stderr
            and "(the process ends on RuntimeError: data loader failed before the first step, before the session's "
                "first step): its records are written and it is marked failed" in proc.stderr), proc.stderr
    run = tripwire.open_run(out)
    assert run.status == "failed"
    assert run.stop_reasons == {0: "RuntimeError: data loader failed before the first step"}


def test_a_rank_that_raises_before_its_first_step_fails_the_run_of_its_job(tmp_path: Path) -> None:
    # (the DDP case: rank 1 dies in its first collective; rank 0 trained and closed)
    out = tmp_path / "ddp"
    rank0 = Session(out_dir=str(out), rank=0, world_size=2, save_interval=1, rules=[])
    for step in range(3):
        rank0.step("train", step, {"loss": (1.0, "losses")})
    rank0.close()
    proc = _run_script(f"""
        import tripwire
        s = tripwire.Session(out_dir={str(out)!r}, rank=1, world_size=2)
        raise ConnectionError("Connection closed by peer")
    """, tmp_path)
    assert proc.returncode == 1, proc.stderr
    run = tripwire.open_run(out)
    assert run.status == "failed"
    assert run.stop_reasons == {1: "ConnectionError: Connection closed by peer"}


def test_a_process_that_exits_normally_with_an_unused_session_leaves_it_as_it_is(tmp_path: Path) -> None:
    # (what the docs keep: a callback made and not used, in a process that ends without an exception)
    out = tmp_path / "unused"
    proc = _run_script(f"""
        import tripwire
        s = tripwire.Session(out_dir={str(out)!r}, rules=["default"])
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _marker(out)["status"] == "complete"
    assert "still open" not in proc.stderr, proc.stderr


# ------------------------------------------------------------ F2: a rank stopped by another's finding
def _train(sessions: tuple[Session, ...], nan_on_1_at: int, steps: int = 8) -> dict[int, Any]:
    """The recipe's loop, both ranks in turn: any rank's stop stops both at the same step (the
    collective: the lowest stopping rank), each stopped rank told whose stop it is. Returns
    ``{rank: the decision of the step it stopped at}``."""
    for step in range(steps):
        decisions = {s.rank: s.step("train", step, {"loss": (math.nan if s.rank == 1 and step >= nan_on_1_at
                                                              else 1.0 / (step + 1), "losses")})
                     for s in sessions}
        stoppers = [r for r, d in decisions.items() if d.stop]
        if stoppers:
            who = min(stoppers)
            for s in sessions:
                s.stopped_by_rank(who, decisions[who].stopped_by)
            return decisions
    raise AssertionError("no rank stopped")


@pytest.mark.parametrize("writer", [{"ranks": "all"}, {"ranks": [0]}])
def test_a_rank_stopped_by_another_ranks_finding_says_why(
        tmp_path: Path, writer: dict[str, Any], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    sessions = _ranks(out, writer=writer)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _train(sessions, nan_on_1_at=3)
        for s in sessions:
            s.close()
    rank0, rank1 = sessions
    assert rank1.stopped_by is not None and rank1.stopped_by.rule == "exploding_tensor"
    found = rank0.stopped_by
    assert found is not None and found.rule == "distributed_stop" and found.source == "check"
    assert (found.step, found.mode, found.worker, found.severity) == (3, "train", 0, "warning")
    assert found.message.startswith("rank 1's rule 'exploding_tensor' (train step 3: ")
    assert found.message.endswith(") stopped training; every rank stops at the same step")
    assert found.details["stopped_by"][0]["rank"] == 1 and found.details["stopped_by"][0]["rule"] == "exploding_tensor"
    # the stop line of each rank names it, as the Lightning callback's
    said = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert said == ["tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 3 (train)",
                    "tripwire: rank 0: stopping training: rank 1's rule 'exploding_tensor' at step 3 (train)"], said
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    reasons = run.stop_reasons
    assert reasons[0].startswith("[warning] distributed_stop at step 3 (train, rank 0): rank 1's rule 'exploding_tensor'")
    if writer["ranks"] == "all":
        assert reasons[1].startswith("[critical] exploding_tensor at step 3 (train, rank 1)")
    else:  # (the run held rank 0's shard alone, and said nowhere why it stopped)
        assert set(reasons) == {0}
    # the distributed_stop is a check the run holds, next to rank 1's own finding
    assert sorted((f.rule, f.worker, f.source) for f in run.findings) == [
        ("distributed_stop", 0, "check"), ("exploding_tensor", 1, "in-process")]
    assert main(["inspect", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "worker 0 stopped: [warning] distributed_stop at step 3 (train, rank 0): rank 1's rule 'exploding_tensor'" in printed


def test_stopped_by_rank_without_the_finding_names_the_rank_or_another_rank(tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    rank0, rank1 = _ranks(tmp_path / "a")
    rank1.close()
    rank0.step("train", 0, {"loss": (1.0, "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        found = rank0.stopped_by_rank(1)
    assert found.message == "rank 1 stopped training (its finding is in the run); every rank stops at the same step"
    assert "tripwire: rank 0: stopping training: rank 1's stop" in caplog.text
    rank0.close()
    assert tripwire.open_run(tmp_path / "a").end_markers[0]["status"] == "stopped"
    other, rank1 = _ranks(tmp_path / "b")
    rank1.close()
    other.step("train", 0, {"loss": (1.0, "losses")})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert other.stopped_by_rank().message == "another rank stopped training; every rank stops at the same step"
    assert "tripwire: rank 0: stopping training: another rank's stop" in caplog.text
    # the later decisions of this training say stop too, as after a rule's stop
    assert other.step("train", 1, {"loss": (1.0, "losses")}).stop
    other.close()
    assert tripwire.open_run(tmp_path / "b").stop_reasons[0].endswith("another rank stopped training; every rank "
                                                                      "stops at the same step")


def test_stopped_by_rank_keeps_this_ranks_own_stop(tmp_path: Path) -> None:
    rank0, rank1 = _ranks(tmp_path / "run")
    rank0.close()
    decision = rank1.step("train", 0, {"loss": (math.nan, "losses")})
    assert decision.stop
    assert rank1.stopped_by_rank(0) is decision.stopped_by  # (its own finding is why it stops)
    assert [f.rule for f in rank1.findings] == ["exploding_tensor"]
    rank1.close()


def test_stopped_by_rank_refuses_what_names_no_other_rank(tmp_path: Path) -> None:
    rank0, rank1 = _ranks(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"stopped_by_rank: rank=0 is this session's own rank.*another of 0 to 1"):
        rank0.stopped_by_rank(0)
    with pytest.raises(ConfigError, match=r"stopped_by_rank: rank: got 2.*"):
        rank0.stopped_by_rank(2)
    with pytest.raises(ConfigError, match=r"stopped_by_rank: finding='NaN'; accepted: None, a Finding"):
        rank0.stopped_by_rank(1, "NaN")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"stopped_by_rank: mode='validation'; accepted: 'train', 'eval'"):
        rank0.stopped_by_rank(1, mode="validation")
    single = Session(out_dir=str(tmp_path / "one"), save_interval=1)
    with pytest.raises(ConfigError, match=r"stopped_by_rank: this session's world_size is 1"):
        single.stopped_by_rank(1)
    assert rank0.stopped_by is None
    # a finding's to_dict() (what all_gather_object of a dict carries) names its rank
    quoted = tripwire.Finding(rule="loss_not_decreasing", step=7, mode="eval", message="no progress",
                              severity="info", worker=1, details={"train_step": 40}).to_dict()
    found = rank0.stopped_by_rank(finding=quoted, mode="train", step=40)
    assert (found.severity, found.step) == ("info", 40)
    assert found.message == ("rank 1's rule 'loss_not_decreasing' (eval step 7, after train step 40: no progress) "
                             "stopped training; every rank stops at the same step")
    for s in (rank0, rank1, single):
        s.close()


# ------------------------------------------------------------ F3: the stop line names the rank
def test_the_stop_line_of_a_rank_names_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rank0, rank1 = _ranks(tmp_path / "run")
    rank0.close()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        rank1.step("train", 0, {"loss": (1.0, "losses")})
        rank1.step("train", 1, {"loss": (math.nan, "losses")})
    said = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert said == ["tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 1 (train)"]
    rank1.close()


# ------------------------------------------------------------ F5: evaluation on rank 0 alone
def test_a_rank_that_does_not_evaluate_hears_it_of_this_rank_not_of_the_run(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    rank0, rank1 = _ranks(out, rules=["overfit"])
    for step in range(4):
        for s in (rank0, rank1):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    rank0.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)  # (rank 0 alone validates)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        rank0.close()
        rank1.close()
    said = [r.getMessage() for r in caplog.records if "validation='val_loss'" in r.getMessage()]
    assert said == [
        "tripwire: rank 1: rule 'overfit': validation='val_loss' read nothing: no evaluation (mode eval) was recorded "
        "by this rank (one of 2; it recorded mode train only), so the rule had nothing to read under any name: the "
        "training stopped before its first evaluation, ran none, or saved none on this rank; where another rank "
        "evaluates alone (a distributed loop that validates on rank 0), that rank's rule judges its records and this "
        "rank's reads none: leave the rule out of this rank's rules (docs/architecture.md, the DDP recipe)"], said
    assert tripwire.open_run(out).steps("eval") == [0]  # (the run holds rank 0's evaluation)


# ------------------------------------------------------------ F6: a worker that never wrote
def test_a_run_missing_a_worker_of_its_world_size_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "split"
    rank1 = Session(out_dir=str(out), rank=1, world_size=2, save_interval=1)
    for step in range(3):
        rank1.step("train", step, {"loss": (1.0, "losses")})
    rank1.close()
    run = tripwire.open_run(out)
    assert run.status == "complete" and run.workers == [1]  # (the read does not fail)
    assert run.missing_workers() == [0]
    assert main(["inspect", str(out)]) == 0
    head, note = capsys.readouterr().out.splitlines()[:2]
    assert "status: complete" in head and "world size: 2" in head
    assert note == ("worker 0 of world size 2 wrote nothing to this run (no shard, no end marker), though "
                    "writer.ranks is all: the status is that of worker 1 alone; such a rank never made its session "
                    "(it failed before, or has not started yet), was given another out_dir (a per-rank timestamp "
                    "splits one job in several runs), or was made with write=False"), note
    assert main(["inspect", str(out), "--json"]) == 0
    assert any(n.startswith("worker 0 of world size 2 wrote nothing") for n in json.loads(capsys.readouterr().out)["notes"])


def test_a_run_whose_writer_ranks_leave_a_worker_out_misses_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ranks1"
    for rank in (0, 1):
        s = Session({"out_dir": str(out), "writer": {"ranks": [1]}, "save": {"interval": 1}}, rank=rank, world_size=2)
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.close()
    run = tripwire.open_run(out)
    assert run.workers == [1] and run.missing_workers() == []
    both = tmp_path / "both"
    for s in _ranks(both, rules=[]):
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.close()
    assert tripwire.open_run(both).missing_workers() == []
    assert main(["inspect", str(both)]) == 0
    assert "wrote nothing" not in capsys.readouterr().out
