"""Trial 42f F3: a run that a finding stopped (an earlier ``watch --stop --config ...``'s, or its own
rule's) passed a later ``tripwire watch --once`` whose rules do not include that finding's rule:
"no finding; exit status 0". The finding that stopped a worker now fails the watch (exit 1), said
on stderr and in the summary (``unwatched_stops``); other findings of rules not watched still count
for nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main


def _train(out: Path, nan_at: int | None, stop: bool) -> None:
    rules = [{"name": "exploding_tensor", "actions": ["log", "stop_training"] if stop else ["log", "record"]}]
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=rules) as s:
        for step in range(30):
            loss = float("nan") if nan_at is not None and step >= nan_at else 1.0 / (step + 1)
            if s.step("train", step, {"loss": (loss, "losses")}).stop:
                break


@pytest.fixture
def other_rules(tmp_path: Path) -> Path:
    path = tmp_path / "other.yaml"
    path.write_text("rules: [loss_not_decreasing]\n")
    return path


def test_a_run_stopped_by_a_rule_not_watched_fails_the_watch(tmp_path: Path, other_rules: Path, capsys) -> None:
    _train(tmp_path / "run", nan_at=12, stop=True)
    assert tripwire.open_run(tmp_path / "run").status == "stopped"
    assert main(["watch", str(tmp_path / "run"), "--once", "--config", str(other_rules), "--json"]) == 1
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["findings"] == 0 and summary["unwatched_stops"] == [
        {"worker": 0, "rule": "exploding_tensor", "step": 12, "mode": "train", "severity": "critical"}]
    assert ("worker 0 was stopped by a finding of rule 'exploding_tensor' (recorded by the training), which this "
            "watch does not run") in err


def test_a_finding_of_a_rule_not_watched_that_stopped_nothing_still_counts_for_nothing(tmp_path: Path,
                                                                                     other_rules: Path, capsys) -> None:
    _train(tmp_path / "run", nan_at=12, stop=False)
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    rc = main(["watch", str(tmp_path / "run"), "--once", "--config", str(other_rules), "--json"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["unwatched_stops"] == [] and rc in (0, 3)


def test_a_stop_by_a_check_is_no_unwatched_stop(tmp_path: Path, capsys) -> None:
    """Trial 42l F3: a run stopped by ``request_stop`` with a finding of no rule (a check) listed it in
    ``unwatched_stops`` besides counting it as a check."""
    import time

    out = tmp_path / "run"
    s = tripwire.Session(rules=["exploding_tensor"], actions=["log", "stop_training"], out_dir=str(out))
    tripwire.request_stop(str(out), tripwire.Finding("my_monitor", 0, "train", "manual stop", severity="error"))
    for step in range(100):
        if s.step("train", step, {"loss": (1.0 / (step + 1), "losses")}).stop:
            break
        time.sleep(0.03)
    s.close()
    assert tripwire.open_run(out).status == "stopped"
    assert main(["watch", str(out), "--once", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["checks"] == 1 and summary["unwatched_stops"] == []
