"""Trial 32f F3: ``tripwire demo --out-dir /proc/x`` printed its banner and then was refused (exit 2),
where docs/cli.md says an ``--out-dir`` that cannot hold a run is "refused before anything is
printed" (``--out-dir afile/x``, a file on the path, was: the config's check). A directory that
cannot be created or written is refused with nothing on stdout, one line on stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tripwire._cli import main


def _refused_before_the_banner(out_dir: str, capsys: pytest.CaptureFixture[str]) -> str:
    pytest.importorskip("lightning", reason="tripwire demo runs Lightning")
    pytest.importorskip("sklearn", reason="tripwire demo trains on scikit-learn's digits")
    assert main(["demo", "--out-dir", out_dir, "--max-epochs", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no directory can be made")
def test_an_out_dir_that_cannot_be_created_is_refused_before_the_banner(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused_before_the_banner("/proc/tripwire-32f/x", capsys)
    assert line.startswith("tripwire demo: error: --out-dir: got '/proc/tripwire-32f/x', which this process cannot "
                           "create or write ("), line


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into a directory whatever its mode")
def test_an_out_dir_that_cannot_be_written_is_refused_before_the_banner(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        line = _refused_before_the_banner(str(locked / "run"), capsys)
    finally:
        locked.chmod(0o700)
    assert "which this process cannot create or write (Permission denied" in line, line
    assert not (locked / "run").exists()
