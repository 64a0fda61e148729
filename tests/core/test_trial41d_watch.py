"""Trial 41d F1: a training killed (SIGKILL) right after its session opened the run, before its first
record, left a shard and no record: a live ``tripwire watch`` counted the run's workers from their
records (none), so it waited for ever (until ``timeout`` killed it) where ``inspect`` said the
writer was gone; ``--once`` said "the run has not ended" and every rule "had nothing to read ...
capture it in the training's config"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tripwire._cli import main


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    script = textwrap.dedent(f"""\
        import os, tripwire
        s = tripwire.Session(rules=["default"], out_dir={str(out)!r})
        os.kill(os.getpid(), 9)
        """)
    done = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert done.returncode == -9
    return out


def test_a_live_watch_of_a_run_killed_before_its_first_record_ends(killed: Path, capsys) -> None:
    # (before: no end; the test would hang on it: a second process bounds it)
    done = subprocess.run([sys.executable, "-m", "tripwire", "watch", str(killed), "--interval", "0.2", "--no-record"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done
    err = done.stderr.splitlines()
    assert "tripwire watch: the training ended before its first record, without closing the run: no rule had " \
           "anything to judge" in err, err
    assert any(line.startswith("tripwire watch: worker 0 ended without closing the run (killed, out of memory, a "
                               "crash) before this watch began") for line in err), err
    assert "capture it" not in done.stderr
    assert done.stdout.splitlines()[-1].endswith("no finding; nothing judged (the training ended without closing "
                                                 "the run before its first record); exit status 3")


def test_watch_once_says_the_worker_ended(killed: Path, capsys) -> None:
    assert main(["watch", str(killed), "--once", "--no-record"]) == 3
    captured = capsys.readouterr()
    assert "tripwire watch: worker 0 ended without closing the run (killed, out of memory, a crash): what was " \
           "written is judged" in captured.err
    assert "the run has not ended (--once)" not in captured.err and "capture it" not in captured.err, captured.err
