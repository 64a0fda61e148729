"""Smoke check of the detection suite: ``benchmarks/detection/run.py --quick`` (a few programs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_detection_runner_quick(tmp_path: Path) -> None:
    out = tmp_path / "detection.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "detection" / "run.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| rule | fault runs | recall |" in proc.stdout
    data = json.loads(out.read_text())
    summary = data["summary"]
    assert summary["program_errors"] == [] and summary["rule_errors"] == []
    assert summary["fault_programs"] >= 2 and summary["healthy_programs"] >= 1
    # the planted faults are found and the healthy control stays quiet
    assert summary["recall"] == 1.0
    assert summary["healthy_runs_with_false_alarm"] == 0
    by_program = {r["program"]: r for r in data["runs"]}
    assert "loss_not_decreasing" in by_program["loss_flat_lr_tiny"]["fired"]


def test_detection_suite_size() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks" / "detection"))
    try:
        import programs
    finally:
        sys.path.pop(0)
    faults = [p for p in programs.PROGRAMS if not p.healthy]
    healthy = [p for p in programs.PROGRAMS if p.healthy]
    assert len(faults) >= 25 and len(healthy) >= 12
    assert {"torch", "lightning", "keras", "xgboost"} <= {p.framework for p in programs.PROGRAMS}
    from tripwire.rules import available_rules

    for p in faults:
        assert set(p.expected) <= set(available_rules()), p.name
    assert len({p.name for p in programs.PROGRAMS}) == len(programs.PROGRAMS)
