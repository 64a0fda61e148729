"""Trial 32b, ``tripwire inspect`` and the reader.

F6: a training killed several times and resumed each time from its last checkpoint repeats steps in
separate ranges (250-400, 1000-1039, 2250-2289); inspect said "train steps 250 to 2289 (231 steps)
hold records; eval steps ... hold records that ...", which read as if 401-999 were written twice
and hardly parsed. It says the ranges now, in one sentence whose subject is the records.

F1 (second half): a full disk lost the finding that stopped the training (the end marker counts it,
``write_error`` says the writer failed), yet ``run.findings`` was ``[]`` without a word and inspect
said "findings: none" under the stop reason. The reader warns, naming the worker and both counts,
and inspect's findings section says what is missing.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Session
from tripwire._cli import main


def _killed_and_resumed(out: Path, kills: list[int], total: int, every: int) -> None:
    """A training killed at each step of ``kills`` (its writer abandoned: no end marker, as a SIGKILL
    leaves it) and resumed from its last checkpoint, taken every ``every`` steps; the last attempt
    runs to ``total``."""
    state: dict[str, Any] | None = None
    start = 0
    for kill in [*kills, None]:
        s = Session(out_dir=str(out), save_interval=1, rules=[])
        if state is not None:
            s.load_state_dict(state)
        for step in range(start, total):
            if step == kill:
                s.flush()
                s.writer.abandon()
                break
            s.step("train", step, {"loss": (1.0 / (1 + step), "losses")})
            if (step + 1) % every == 0:
                state, start = s.state_dict(), step + 1
        else:
            s.close()


def _inspect(out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["inspect", str(out), "--width", "400"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_inspect_says_each_range_of_steps_a_resume_went_back_over(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _killed_and_resumed(out, kills=[8, 23, 31], total=40, every=5)  # (repeats 5-7, 20-22 and 30)
    run = tripwire.open_run(out)
    df = run.dataframe()
    assert sorted(set(df[df.superseded].step.tolist())) == [5, 6, 7, 20, 21, 22, 30]
    text = _inspect(out, capsys)
    assert ("worker 0: a later training or a resume went back over (started again at or before) the records of train "
            "steps 5-7, 20-22 and 30 (7 steps): series() returns every record, value() the last written; "
            "run.dataframe()'s superseded column marks the records gone back over") in text, text
    assert "5 to 30" not in text and "hold records;" not in text
    # (each step the killed attempts wrote last was written whole: nothing is said of a step cut short)
    assert "cut off" not in text and "crash" not in text
    assert main(["inspect", str(out), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("the records of train steps 5-7, 20-22 and 30 (7 steps)" in n for n in notes), notes


def test_inspect_says_the_first_ranges_and_how_many_more(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _killed_and_resumed(out, kills=[7, 12, 17, 22, 27, 32], total=40, every=5)  # (repeats 5-6, 10-11 ... 30-31)
    text = _inspect(out, capsys)
    assert ("the records of train steps 5-6, 10-11, 15-16, 20-21 and 2 more ranges (12 steps): series() returns "
            "every record") in text, text


def test_inspect_ranges_run_over_the_steps_held(tmp_path: Path, capsys) -> None:
    """A range runs over consecutive steps the run holds (a save interval of 10: steps 0, 10, 20 ...),
    not consecutive integers: steps 20 and 30 written again are one range, 20-30."""
    out = tmp_path / "run"
    state = None
    s = Session(out_dir=str(out), save_interval=10, rules=[])
    for step in range(45):
        s.step("train", step, {"acc": (1.0, "metrics")})  # (metrics: saved on the interval only)
        if step == 19:
            state = s.state_dict()
    s.flush()
    s.writer.abandon()
    s = Session(out_dir=str(out), save_interval=10, rules=[])
    s.load_state_dict(state)
    for step in range(20, 50):
        s.step("train", step, {"acc": (2.0, "metrics")})
    s.close()
    text = _inspect(out, capsys)
    assert "the records of train steps 20-40 (3 steps):" in text, text


# -------------------------------------------------------------------------------- F1: lost findings
class _FullDisk:
    """A findings file on a disk that has filled: every write fails."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.inner.close()


def _nan_run_on_a_full_disk(out: Path) -> Session:
    """A training whose disk fills at step 10, then a NaN loss at step 15 stops it (trial 32b's
    full_nan.py, without a tmpfs): the writer's shard and findings writes fail from step 10 on."""
    s = Session(out_dir=str(out), save_interval=1, rules=["default"], actions=["log", "stop_training"])
    for step in range(30):
        if step == 10:
            s.flush()
            writer = s.writer

            def full(data: Any) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            writer._write_all = full
            writer._findings_file = _FullDisk(writer._findings_file)
        d = s.step("train", step, {"loss": (float("nan") if step == 15 else 1.0 / (1 + step), "losses")})
        if d.stop:
            break
    s.close()
    return s


def test_a_finding_lost_to_a_full_disk_is_said(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    s = _nan_run_on_a_full_disk(out)
    assert [f.rule for f in s.findings] == ["exploding_tensor"]
    run = tripwire.open_run(out)
    marker = run.end_markers[0]
    assert marker["findings"] == 1 and marker["status"] == "stopped" and "No space left" in marker["write_error"]
    assert run.findings == []
    said = [w for w in run.warnings if "finding" in w]
    assert len(said) == 1, run.warnings
    assert said[0].startswith("worker 0: its end marker counts 1 finding (rule errors included), the run holds 0 of "
                              "that worker ("), said
    assert "in-process-00000.jsonl): 1 lost to the write error its end marker names (OSError: [Errno 28] No space " \
           "left on device)" in said[0], said
    text = _inspect(out, capsys)
    assert "findings: none read, though worker 0's end marker counts 1 finding (rule errors included), the run " \
           "holds 0 of that worker (lost to its write error): see the warning above" in text, text
    assert "findings: none " not in text.replace("findings: none read", "")
    assert f"warning: {said[0]}" in text
    assert main(["inspect", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == [] and said[0] in data["warnings"]


def test_a_findings_file_cut_after_the_run_ended_is_said(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with Session(out_dir=str(out), save_interval=1, rules=["default"], actions=["record"]) as s:
        for step in range(20):
            s.step("train", step, {"loss": (float("nan") if step in (5, 12) else 1.0, "losses")})
    run = tripwire.open_run(out)
    counted = run.end_markers[0]["findings"]
    assert counted == len(run.findings) >= 1 and not run.warnings  # (an intact run: nothing said)
    findings = out / "findings" / "in-process-00000.jsonl"
    findings.write_text("")
    run = tripwire.open_run(out)
    assert run.findings == []
    assert any(w.startswith(f"worker 0: its end marker counts {counted} finding") and "the run holds 0" in w
               and "a findings file was truncated, damaged or removed after the run ended" in w
               for w in run.warnings), run.warnings
    text = _inspect(out, capsys)
    assert "(lost to a damaged findings file): see the warning above" in text, text


def test_some_findings_read_and_some_lost(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with Session(out_dir=str(out), save_interval=1, rules=["default"], actions=["record"]) as s:
        for step in range(20):
            s.step("train", step, {"loss": (float("nan") if step == 5 else 1.0, "losses")})
    findings = out / "findings" / "in-process-00000.jsonl"
    marker_path = out / "workers" / "worker-00000.end.json"
    marker = json.loads(marker_path.read_text())
    marker["findings"] += 2  # (two more that the writer could not write)
    marker["write_error"] = "OSError: [Errno 28] No space left on device"
    marker_path.write_text(json.dumps(marker))
    held = len(tripwire.open_run(out).findings)
    assert held >= 1 and findings.stat().st_size
    text = _inspect(out, capsys)
    assert (f"findings: fewer read than the end markers count: worker 0's end marker counts {held + 2} findings (rule "
            f"errors included), the run holds {held} of that worker (lost to its write error)") in text, text


def test_a_finding_of_another_worker_that_a_session_held_is_no_loss(tmp_path: Path) -> None:
    """A session that honoured another rank's stop keeps that rank's finding (its end marker counts
    it) and does not write it: that rank's session does. The run holding it, under that worker, is
    no loss."""
    out = tmp_path / "run"
    for rank in range(2):
        with Session({"out_dir": str(out), "save": {"interval": 1}}, rank=rank, world_size=2, rules=[]) as s:
            for step in range(3):
                s.step("train", step, {"acc": (1.0, "metrics")})  # (metrics: saved on the interval only)
    finding = tripwire.Finding(rule="exploding_tensor", step=2, mode="train", severity="critical",
                               message="loss holds nan", worker=1)
    with open(out / "findings" / "in-process-00001.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(finding.to_dict()) + "\n")
    for rank in range(2):  # (each session held the finding: rank 1 found it, rank 0 honoured its stop)
        path = out / "workers" / f"worker-0000{rank}.end.json"
        marker = json.loads(path.read_text())
        marker["findings"] = 1
        path.write_text(json.dumps(marker))
    run = tripwire.open_run(out)
    assert len(run.findings) == 1 and not [w for w in run.warnings if "finding" in w], run.warnings


def test_a_loss_beyond_other_workers_findings_is_said_of_them_all(tmp_path: Path) -> None:
    """Where the run holds other workers' findings, a worker's end marker is compared with all of
    them, and the warning says so."""
    out = tmp_path / "run"
    for rank in range(2):
        with Session({"out_dir": str(out), "save": {"interval": 1}}, rank=rank, world_size=2, rules=[]) as s:
            s.step("train", 0, {"loss": (1.0, "losses")})
    finding = tripwire.Finding(rule="exploding_tensor", step=0, mode="train", severity="critical",
                               message="loss holds nan", worker=1)
    with open(out / "findings" / "in-process-00001.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(finding.to_dict()) + "\n")
    path = out / "workers" / "worker-00000.end.json"
    marker = json.loads(path.read_text())
    marker.update(findings=3, write_error="OSError: [Errno 28] No space left on device")
    path.write_text(json.dumps(marker))
    run = tripwire.open_run(out)
    assert any(w.startswith("worker 0: its end marker counts 3 findings (rule errors included), the run holds 1 of all "
                            "its workers (") and "2 lost to the write error" in w for w in run.warnings), run.warnings
