"""Smoke check of the MXNet overhead benchmark (the figures come from the full run, not tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_overhead_benchmark_quick(tmp_path) -> None:
    out = tmp_path / "overhead.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--framework", "mxnet", "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "mxnet mlp: no hook" in proc.stdout and "mxnet cnn: no hook" in proc.stdout
    result = json.loads(out.read_text())
    assert result["framework"] == "mxnet" and result["quick"] is True
    for model in ("mlp", "cnn"):
        entry = result["models"][model]
        assert entry["step_ms_none"] > 0
        for config in ("default", "everything"):
            assert entry[config]["ratio_median"] > 0
