"""Smoke check of the Lightning overhead benchmark (figures are printed by the benchmark itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parents[2]


def test_overhead_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--framework", "lightning", "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tripwire_default" in proc.stdout and "tripwire_everything" in proc.stdout and "tripwire_wga" in proc.stdout
    data = json.loads(out.read_text())
    assert data["framework"] == "lightning" and data["quick"] is True
    for model in ("mlp", "cnn"):
        ratios = data["models"][model]["ratios"]
        assert set(ratios) >= {"tripwire_default", "tripwire_everything", "tripwire_wga", "tensorboard_hist_1"}
        assert all(r["median"] > 0 for r in ratios.values())
        assert all(r["median"] > 0 for r in data["models"][model]["thread_ratios"].values())
        paired = data["models"][model]["default_paired"]
        assert paired["thread"]["n"] == 2 and paired["thread"]["ci_low"] <= paired["thread"]["mean"] <= paired["thread"]["ci_high"]
