"""Trial 33d F3: a second ``tripwire tune --resume`` on a journal another tuner holds printed an empty
progress view on stdout ("0 trials", "best so far -", although the journal held trials) above the
refusal on stderr. A refused start prints no view: one line on stderr, exit status 1 (a locked
journal is not bad input: docs/cli.md and docs/tune.md), and ``fit(progress=LiveView(...))``
refused by the lock leaves no view either."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("rich")
from rich.console import Console  # noqa: E402

from tripwire._cli import main  # noqa: E402
from tripwire.tune import JournalLockedError, Tuner  # noqa: E402
from tripwire.tune._view import LiveView  # noqa: E402

from test_trial27b_cli import _config  # noqa: E402  (tests/tune is on sys.path, as tune_trainables is)

_HOLD = """\
import sys
from tripwire.tune._journal import Journal
j = Journal(sys.argv[1])
j.acquire_lock()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Path]:
    """A started job's YAML (3 trials in its journal) whose journal another live tuner holds."""
    config = _config(tmp_path)
    assert main(["tune", "--no-progress", str(config)]) == 0
    capsys.readouterr()
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / "tuning.db")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield config
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.mark.parametrize("flags", [["--resume"], ["--resume-if-exists"]])
def test_a_refused_tune_prints_no_view_and_one_line(held: Path, capsys: pytest.CaptureFixture[str],
                                                    flags: list[str]) -> None:
    assert main(["tune", *flags, str(held)]) == 1   # (with the live view: no --no-progress)
    out, err = capsys.readouterr()
    assert out == "", out
    assert err.count("\n") == 1, err
    assert err.startswith("tripwire tune: error: journal ") and "is held by another tuner (pid " in err, err
    assert "continuing the job" not in err


def test_a_fit_refused_by_the_lock_leaves_no_view(held: Path) -> None:
    journal = held.parent / "tuning.db"
    # (as tripwire tune and fit(progress=True) draw it: a tuner that took the lock after the CLI's check)
    piped = Console(file=io.StringIO(), width=200)
    with pytest.raises(JournalLockedError, match="is held by another tuner"), \
            LiveView("tripwire tune tune.yaml", console=piped) as view:
        Tuner.resume(journal).fit(progress=view)
    assert piped.file.getvalue() == ""
    terminal = Console(file=io.StringIO(), width=100, force_terminal=True)
    with pytest.raises(JournalLockedError, match="is held by another tuner"), \
            LiveView("tripwire tune tune.yaml", console=terminal) as view:
        Tuner.resume(journal).fit(progress=view)
    # in a terminal, a view drawn while the job started is erased (rich's cursor restore: erase line)
    text = terminal.file.getvalue()
    assert "0 trials" not in text or text.endswith("\x1b[2K"), repr(text[-200:])


def test_a_view_that_got_a_snapshot_still_prints_it() -> None:
    piped = Console(file=io.StringIO(), width=200)
    with LiveView("tripwire tune t.yaml", console=piped) as view:
        view({"running": 0, "completed": 3, "stopped": 0, "failed": 0, "best": 0.5, "resource_used": 9,
              "elapsed": 1.0, "phase": "ended"})
    text = piped.file.getvalue()
    assert "3 trials" in text and "0.5" in text and text.endswith("\n")
