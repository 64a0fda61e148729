"""The examples run as their docstrings say, one after another in one folder (the Lightning
quickstart's healthy run once appended to the faulty run's directory and reported its findings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


def _run(tmp_path: Path, script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_lightning_quickstart_fault_then_healthy(tmp_path: Path) -> None:
    fault = _run(tmp_path, "lightning_quickstart.py")
    healthy = _run(tmp_path, "lightning_quickstart.py", "--healthy")
    assert "stopped by: None" not in fault
    assert "stopped by: None" in healthy and "[warning]" not in healthy, healthy[-3000:]
    assert len(list((tmp_path / "tripwire-runs").iterdir())) == 2  # a run directory each


@pytest.mark.slow
def test_xgboost_train_twice(tmp_path: Path) -> None:
    import time

    first = _run(tmp_path, "xgboost_train.py")
    time.sleep(1.1)  # (directories are stamped to the second)
    second = _run(tmp_path, "xgboost_train.py")
    for out in (first, second):
        assert "max_depth=12: 1 of 50 rounds" in out and "max_depth=2: 50 of 50 rounds; stopped by: None" in out
        assert "already holds records" not in out


def test_custom_rule(tmp_path: Path) -> None:
    # (trial 31f F11) a FunctionRule and a registered Rule subclass with a requirement, from a config
    # mapping, with a custom action, on a hand-written loop: the raised learning rate is found and stops it
    out = _run(tmp_path, "custom_rule.py")
    assert "stopped at step 45; stopped by: [warning] grad_spike at step 45 (train)" in out, out
    assert "findings: [('grad_spike', 45), ('loss_above', 45)]; paged: [('grad_spike', 45)]" in out, out
    assert "page: grad_spike at step 45: gradients/w's norm" in out
    [run] = (tmp_path / "tripwire-runs").iterdir()
    assert run.name.startswith("custom-rule-")
