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


@pytest.mark.slow
def test_tune_mxnet_example_reports_epochs_and_rule_stops(tmp_path: Path) -> None:
    # a Gluon loop under the tuner (docs/mxnet.md, "Tuning"): the scheduler stops trials at their
    # rungs, a rule stops the diverging ones, which the journal names and never ranks best
    import sqlite3

    done = subprocess.run([sys.executable, str(EXAMPLES / "tune_mxnet.py"), "--max-jobs", "6", "--journal", "j.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = sqlite3.connect(tmp_path / "j.db").execute("SELECT number, status, rule, resource FROM trials").fetchall()
    assert len(rows) == 6 and all(status in ("completed", "stopped") for _, status, _, _ in rows)
    by_rule = [n for n, _, rule, _ in rows if rule is not None]
    assert by_rule and any(status == "completed" and resource == 9 for _, status, _, resource in rows)
    best = int(done.stdout.split("best: trial ")[1].split()[0])
    assert best not in by_rule
    assert (tmp_path / "runs" / f"trial-{by_rule[0]}-1").is_dir()
