"""The MXNet examples run as their docstrings say (both ended with a TypeError: they iterated over
``stopped_by``, a Finding or None)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["mxnet_gluon_loop.py", "mxnet_estimator.py"])
@pytest.mark.parametrize("args, stopped", [([], False), (["--bias", "-10"], True)])
def test_mxnet_example_runs(tmp_path: Path, script: str, args: list[str], stopped: bool) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("stopped by:")]
    assert said and ("nothing" not in said[0]) is stopped, done.stdout[-2000:]
    assert len(list((tmp_path / "tripwire-runs").iterdir())) == 1  # a new run directory
