"""``tripwire report JOURNAL --full-only`` is ``tune-report JOURNAL --full-only`` (trial 29c F5 added
the option to tune-report; report, which reports a journal as tune-report does, took no such flag),
and a run directory refuses it by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trial29c_trainables as tr

from tripwire import Session
from tripwire._cli import main
from tripwire.tune import Continuous, Hyperband, Tuner


def test_report_passes_full_only_to_a_journal_and_refuses_it_for_a_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hb.db"
    Tuner(tr.train_worsens, {"x": Continuous(0.1, 1.0)}, objective="loss", mode="min",
          strategy=Hyperband(1, 9, 3), max_jobs=12, max_parallel_jobs=1, seed=0, journal=str(path)).fit()
    capsys.readouterr()
    assert main(["tune-report", str(path), "--top", "3", "--full-only", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["report", str(path), "--top", "3", "--full-only", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected
    assert main(["report", str(path), "--top", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["top"] != expected["top"]  # (this job's best stopped below 9)

    run = tmp_path / "run"
    with Session({"out_dir": str(run), "rules": []}) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    capsys.readouterr()
    assert main(["report", str(run), "--full-only"]) == 2
    assert "--full-only: " in capsys.readouterr().err
