"""Trial 42h F3: ``sys.exit(0)`` (or ``sys.exit()``, a ``StopIteration``) leaving a ``with
tripwire.Session(...)`` block ended the run ``failed`` with the reason ``SystemExit: 0``, where
``close()`` in a ``finally`` block ends it ``complete``, as its docstring says; another exit status
fails it either way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tripwire


def _loop(out: Path, end: BaseException) -> None:
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        raise end


@pytest.mark.parametrize(("end", "status", "reasons"), [
    (SystemExit(0), "complete", {}),
    (SystemExit(), "complete", {}),
    (StopIteration(), "complete", {}),
    (SystemExit(3), "failed", {0: "SystemExit: 3"}),
    (RuntimeError("boom"), "failed", {0: "RuntimeError: boom"}),
])
def test_a_with_block_ends_as_close_in_a_finally_block(tmp_path: Path, end: BaseException, status: str,
                                                       reasons: dict) -> None:
    with pytest.raises(type(end)):
        _loop(tmp_path / "run", end)
    run = tripwire.open_run(tmp_path / "run")
    assert (run.status, run.stop_reasons) == (status, reasons)
    assert run.steps("train") == [0, 1, 2]


def test_sys_exit_inside_a_with_block_of_a_script(tmp_path: Path) -> None:
    import subprocess

    script = (f"import sys, tripwire\nwith tripwire.Session(out_dir={str(tmp_path / 'run')!r}, rules=[]) as s:\n"
              f"    s.step('train', 0, {{'loss': (1.0, 'losses')}})\n    sys.exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert tripwire.open_run(tmp_path / "run").status == "complete"
