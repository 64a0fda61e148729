"""Smoke check: ``benchmarks/tuning.py --quick`` runs and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tuning_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "tuning.json"
    scratch = tmp_path / "tmp"  # (its temporary journals: removed at the end, none left behind)
    scratch.mkdir()
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tuning.py"), "--quick", "--out", str(out),
                           "--cache", "none"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(scratch.iterdir()) == []
    data = json.loads(out.read_text())
    assert data["quick"] is True
    for family in ("xgboost", "simulated"):
        res = data[family]
        assert res["seeds"] >= 1 and res["random_resource"] == res["random_trials"] * res["max_resource"]
        assert res["third_budget"] == res["random_resource"] // 3
        for row in res["rows"]:
            assert row["random_full"]["resource"] == res["random_resource"]
            # the budget is spent; the report that spends it stops its trial, the others report once more
            for m in ("tripwire_hyperband", "optuna_random_hyperband"):
                if row.get(m):
                    used = row[m]["resource"]
                    assert res["third_budget"] <= used <= res["third_budget"] + res["workers"] - 1
            anytime = row["tripwire_hyperband"]["anytime"]
            assert [p[1] for p in anytime] == sorted(p[1] for p in anytime)      # resource grows
            assert [p[2] for p in anytime] == sorted(p[2] for p in anytime)      # best never falls
        assert 0.5 < res["random_full"]["mean"] < 1.0
    assert 0.08 < data["xgboost"]["positives"] < 0.16
    assert data["decision_time"]["trials"] == 10_000 and data["decision_time"]["mean_us"] > 0
    assert data["warm_vs_fresh"]["fresh"]["worker_starts"] > data["warm_vs_fresh"]["warm"]["worker_starts"]
    assert "[scheduler]" in proc.stdout and "start-up ratio" in proc.stdout and "[xgboost]" in proc.stdout
    assert "goal 1 [tripwire_hyperband]" in proc.stdout
    # how far each rung level predicts the final value, per family
    res_n = {"xgboost": 10, "simulated": 20}      # random search's trials in quick mode
    for family in ("xgboost", "simulated"):
        cur = data[family]["curves"]
        assert "1" in cur["levels"] and cur["chance_top_kept"] == 1 / 3
        for v in cur["levels"].values():
            assert -1.0 <= v["spearman"] <= 1.0 and 0.0 <= v["top10_kept"] <= 1.0
        n, big = res_n[family], data[family]["max_resource"]
        assert cur["one_epoch_keep"] == (data[family]["third_budget"] - n) // (big - 1)
    assert "[simulated curves]" in proc.stdout and "[xgboost curves]" in proc.stdout
    # the fast methods on further seeds (1 in quick mode, simulated only)
    more = data["simulated"]["more_seeds"]
    assert more["seeds"] == [1, 1] and "per_bracket_minus_shared" in more
    assert "more_seeds" not in data["xgboost"] and "[simulated, seeds 1-1, fast methods]" in proc.stdout
    res = data["xgboost"]["tripwire_hyperband"]["minus_random"]
    assert res["ci95"][0] <= res["mean"] <= res["ci95"][1]
    # the docs section a full run writes (the quick run leaves docs/benchmarks.md alone)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tuning

    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- tuning:start -->\nSTALE-SECTION\n<!-- tuning:end -->\n\ntail\n")
    tuning.write_docs(data, doc)
    text = doc.read_text()
    assert "STALE-SECTION" not in text and text.endswith("tail\n") and text.count("<!-- tuning:start -->") == 1
    assert "| tripwire_hyperband |" in text and "goal 1 [tripwire_hyperband]" in text
