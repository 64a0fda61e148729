"""Smoke check of the detection suite: ``benchmarks/detection/run.py --quick`` (a few programs), the
onset definitions, the held-out set's size and the MXNet hand-off."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DETECTION = ROOT / "benchmarks" / "detection"


@pytest.fixture()
def detection() -> Iterator[dict[str, Any]]:
    sys.path.insert(0, str(DETECTION))
    try:
        import _harness
        import programs
        import run

        yield {"harness": _harness, "programs": programs, "run": run}
    finally:
        sys.path.remove(str(DETECTION))


def test_detection_runner_quick(tmp_path: Path) -> None:
    out = tmp_path / "detection.json"
    proc = subprocess.run(
        [sys.executable, str(DETECTION / "run.py"), "--quick", "--json", str(out)],
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
    # onsets come from the run's own records: the linear regression diverges after a few steps
    nan = by_program["nan_lr_huge"]
    assert nan["onset_kind"] == "nonfinite" and 0 < nan["onset_step"] <= nan["fired"]["exploding_tensor"]["step"]
    assert by_program["loss_flat_lr_tiny"]["onset_step"] == 0
    rule = summary["rules"]["exploding_tensor"]
    assert rule["median_delay_steps"] < rule["median_steps_from_0"]
    # the MXNet program ran in its environment, or the output says why not
    mx = data["mxnet"]
    assert mx["status"] in ("ran", "skipped")
    if mx["status"] == "ran":
        assert "mxnet_loss_lr_tiny" in by_program
    else:
        assert "MXNet programs SKIPPED" in proc.stdout and mx["reason"]


def test_detection_suite_size(detection: dict[str, Any]) -> None:
    programs = detection["programs"]
    from tripwire.rules import available_rules

    for set_, faults_min, healthy_min in (("dev", 25, 12), ("holdout", 10, 6)):
        chosen = [p for p in programs.PROGRAMS if p.set == set_]
        faults = [p for p in chosen if not p.healthy]
        assert len(faults) >= faults_min and len([p for p in chosen if p.healthy]) >= healthy_min
        for p in faults:
            assert set(p.expected) <= set(available_rules()), p.name
            assert p.onset in detection["harness"].ONSETS, p.name
    assert {"torch", "lightning", "keras", "xgboost", "mxnet"} <= {p.framework for p in programs.PROGRAMS if p.set == "dev"}
    assert len({p.name for p in programs.PROGRAMS}) == len(programs.PROGRAMS)


def test_onset_definitions(detection: dict[str, Any]) -> None:
    h = detection["harness"]
    r = h.Result(planned_steps=10)
    for step, loss in enumerate([2.0, 1.5, 1.0, 3.5, 0.5, math.inf]):
        r.began(step, 0.1 * step)
        r.saw_loss(step, loss)
    r.val_losses = [(1, 0.9, 0.15), (3, 0.7, 0.35), (5, 0.8, 0.55)]
    assert h.onset("start", r) == (0, 0.0)
    assert h.onset("nonfinite", r) == (5, pytest.approx(0.5))
    assert h.onset("first_swing", r) == (3, pytest.approx(0.3))  # 3.5 - 1.0 > 2.0, the initial loss
    assert h.onset("best_val", r) == (3, 0.35)
    assert h.onset("planted", r) == (None, None)
    with pytest.raises(ValueError, match="unknown kind 'later'"):
        h.onset("later", r)


def test_missing_mxnet_environment_is_reported(detection: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TRIPWIRE_MXNET_PYTHON", str(ROOT / "no-such-env" / "bin" / "python"))
    runs, status = detection["run"].run_mxnet(["mxnet_loss_lr_tiny"], [0], quick=True)
    assert runs == [] and status["status"] == "skipped" and "no-such-env" in status["reason"]
    assert "MXNet programs SKIPPED (1)" in capsys.readouterr().out
