"""Smoke check: ``benchmarks/tuning.py --quick`` runs and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tuning_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "tuning.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tuning.py"), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["quick"] is True
    sim = data["simulated"]
    assert sim["seeds"] >= 3 and sim["random_resource"] == 3 * sim["third_budget"]
    assert all(r["tripwire_resource"] <= sim["third_budget"] for r in sim["rows"])
    assert data["decision_time"]["trials"] == 10_000 and data["decision_time"]["mean_us"] > 0
    assert data["warm_vs_fresh"]["fresh"]["worker_starts"] > data["warm_vs_fresh"]["warm"]["worker_starts"]
    assert data["xgboost"]["rows"][0]["tripwire_resource"] <= data["xgboost"]["rows"][0]["random_resource"]
    assert "[scheduler]" in proc.stdout and "start-up ratio" in proc.stdout
