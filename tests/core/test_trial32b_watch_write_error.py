"""Trial 32b F1 (the watch's half): a training whose disk filled at step 10 of 30 went on, and its
end marker holds ``"records": 10, "write_error": "OSError: [Errno 28] No space left on device"``: 20
of its steps are not in the run. ``tripwire watch`` judged the 10 records there and exited 0 ("no
finding"), its ``--json`` summary naming nothing. A worker whose end marker holds a write error
makes the watch exit 3 (not everything was judged: what it could not write), said on stderr, in the
``--json`` summary (``write_errors``) and on the closing line."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from tripwire import Session
from tripwire._cli import main


def _run_on_a_disk_that_fills(out: Path, *, full_at: int = 10, steps: int = 30) -> None:
    """A healthy training whose writer's shard writes fail from step ``full_at`` on (ENOSPC)."""
    s = Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"], actions=["log"])
    for step in range(steps):
        if step == full_at:
            s.flush()

            def full(data: Any) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            s.writer._write_all = full
        s.step("train", step, {"loss": (1.0 / (1 + step), "losses")})
    s.close()


def test_a_watch_over_a_run_that_lost_records_to_a_full_disk_exits_3(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _run_on_a_disk_that_fills(out)
    marker = json.loads((out / "workers" / "worker-00000.end.json").read_text())
    assert marker["records"] == 10 and "No space left" in marker["write_error"]
    assert main(["watch", str(out), "--once", "--no-record"]) == 3
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert ("tripwire watch: worker 0's records after the 10 it wrote were lost to its write error (OSError: [Errno 28] "
            "No space left on device), its training going on: not judged") in err, err
    assert "no finding, but not everything was judged: the records worker 0 could not write (said above)" in err, err
    assert captured.out.strip().endswith(
        "1 rule watched over 10 train records: no finding; not everything judged (worker 0 could not write all of its "
        "records; stderr says why); exit status 3"), captured.out

    assert main(["watch", str(out), "--once", "--no-record", "--json"]) == 3
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["exit_code"] == 3
    assert summary["write_errors"] == [{"worker": 0, "records": 10,
                                        "error": "OSError: [Errno 28] No space left on device"}]
    assert any(n.startswith("worker 0's records after the 10 it wrote were lost") for n in summary["notes"]), summary


def test_an_intact_run_has_no_write_errors(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"], actions=["log"]) as s:
        for step in range(10):
            s.step("train", step, {"loss": (1.0 / (1 + step), "losses")})
    assert main(["watch", str(out), "--once", "--no-record", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["exit_code"] == 0 and summary["write_errors"] == []


def test_a_finding_beside_a_write_error_still_exits_1(tmp_path: Path, capsys) -> None:
    """A finding fails the watch whatever was lost (exit 1 comes before 3)."""
    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"], actions=["log"])
    for step in range(20):
        if step == 10:
            s.flush()

            def full(data: Any) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            s.writer._write_all = full
        s.step("train", step, {"loss": (float("nan") if step == 5 else 1.0, "losses")})
    s.close()
    assert main(["watch", str(out), "--once", "--no-record", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["exit_code"] == 1 and [w["worker"] for w in summary["write_errors"]] == [0]
