"""Trial 29c, findings 4 and 5: the summary's ``resource lost`` line said "rerun on resume" right
after Ctrl-C, before any resume, while the trials were pending; and ``result.best`` could be a trial
stopped at the lowest rung, with no way to rank only the trials that ran their full budget
(``TuningResult.best_full``, ``ranked(full_only=True)``, ``tune-report --full-only``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trial29c_trainables as tr
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, Hyperband, RandomSearch, Tuner, TuningResult
from tripwire.tune._errors import ConfigError
from tripwire.tune._journal import Journal
from tripwire.tune._result import TrialRecord


# ---- 4. resource lost: what will happen, while the interrupted trials wait ----------------------------
def _interrupted(path: Path) -> None:
    """A job as Ctrl-C leaves it: trial 1 was running (its 5 reports journaled), the tuner requeued it."""
    Tuner(tt.train_five_steps, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(5), max_jobs=2, seed=0,
          journal=str(path)).fit()
    with Journal(path) as j:
        j._db.execute("UPDATE trials SET status='running' WHERE number=1")
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=1")
        j.requeue_running()  # (what fit()'s clean-up does with the trials that were running)


def test_resource_lost_says_the_pending_trials_will_rerun_before_a_resume_and_rerun_after(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lost.db"
    _interrupted(path)
    before = TuningResult.from_journal(path)
    assert before.counts()["pending"] == 1 and before.resource_lost == 5
    line = ("resource lost: 5 (attempts interrupted; 1 trial(s) will rerun on resume, from scratch; "
            "used and lost: 10 in all)")
    assert line in before.summary().splitlines()
    assert main(["tune-report", str(path)]) == 0
    assert line in capsys.readouterr().out.splitlines()

    after = Tuner.resume(path).fit()
    assert after.counts()["pending"] == 0
    assert ("resource lost: 5 (attempts interrupted and rerun on resume; used and lost: 15 in all)"
            in after.summary().splitlines())


def test_resource_lost_counts_running_trials_of_a_killed_tuner_as_waiting(tmp_path: Path) -> None:
    # after a SIGKILL the journal keeps its trials running, and no tuner runs them
    path = tmp_path / "killed.db"
    _interrupted(path)
    with Journal(path) as j:
        j._db.execute("UPDATE trials SET status='running' WHERE number=0")
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=0")  # (not told to stop: a resume reruns it)
    lines = TuningResult.from_journal(path).summary().splitlines()
    # (trial 30e: the units of the running trial count as lost, as the resume will count them, not as used)
    assert any(ln.startswith("resource lost: 10 (attempts interrupted; 2 trial(s) will rerun on resume")
               for ln in lines), lines


# ---- 5. the best of the trials that ran their full budget ---------------------------------------------
def _record(number: int, status: str, value: float | None, resource: int, rule: str | None = None) -> TrialRecord:
    return TrialRecord(number, {"x": number}, status, value, None, resource, 0, 0, None, None, 1, 0.0, 1.0, rule)


def test_best_full_leaves_out_the_trials_stopped_below_max_resource() -> None:
    trials = [_record(0, "stopped", 0.1, 1), _record(1, "completed", 0.5, 27), _record(2, "completed", 0.3, 27),
              _record(3, "completed", 0.2, 9),       # returned on its own before max_resource: not full
              _record(4, "completed", 0.05, 27, rule="loss_not_decreasing"), _record(5, "failed", None, 27)]
    result = TuningResult(trials, "loss", "min", 27)
    assert result.best is not None and result.best.number == 0          # unchanged: stopped at the lowest rung
    assert result.best_full is not None and result.best_full.number == 2
    assert [t.number for t in result.ranked()] == [0, 3, 2, 1]
    assert [t.number for t in result.ranked(full_only=True)] == [2, 1]
    assert TuningResult(trials[:1], "loss", "min", 27).best_full is None
    # without a max_resource, every completed trial ran its budget
    assert [t.number for t in TuningResult(trials, "loss", "min", None).ranked(full_only=True)] == [3, 2, 1]
    with pytest.raises(ConfigError, match=r"TuningResult.ranked: full_only='yes'; accepted: True \(only the trials "
                                          r"completed at max_resource\) or False"):
        result.ranked(full_only="yes")  # type: ignore[arg-type]


def test_tune_report_full_only_ranks_the_full_budget_trials_of_a_real_hyperband_job(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hb.db"
    result = Tuner(tr.train_worsens, {"x": Continuous(0.1, 1.0)}, objective="loss", mode="min",
                   strategy=Hyperband(1, 9, 3), max_jobs=12, max_parallel_jobs=1, seed=0, journal=str(path)).fit()
    assert result.best is not None and result.best.resource < 9   # the reproducer's case: best at a low rung
    full = result.best_full
    assert full is not None and (full.status, full.resource) == ("completed", 9)
    ranked = result.ranked(full_only=True)
    assert ranked[0] is full and all(t.resource == 9 and t.status == "completed" for t in ranked)
    assert [t.number for t in ranked] == [t.number for t in sorted(ranked, key=lambda t: (t.value, t.number))]

    capsys.readouterr()
    assert main(["tune-report", str(path), "--top", "2", "--full-only"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"best: trial {result.best.number} " in "\n".join(out)   # the summary's best line stays
    best_line = next(ln for ln in out if ln.startswith("best at full budget"))
    assert best_line.startswith(f"best at full budget (completed at max_resource=9): trial {full.number} loss=")
    listed = [ln for ln in out if ln.startswith("  trial ")]
    assert [int(ln.split()[1]) for ln in listed] == [t.number for t in ranked[:2]]
    assert all(" completed " in ln and "resource=9 " in ln for ln in listed)

    assert main(["tune-report", str(path), "--top", "3", "--full-only", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["top"] == [t.number for t in ranked[:3]]
    assert data["best"]["number"] == result.best.number
    assert main(["tune-report", str(path), "--top", "3", "--json"]) == 0   # the default is unchanged
    assert json.loads(capsys.readouterr().out)["top"][0] == result.best.number


def test_tune_report_full_only_says_when_no_trial_ran_its_full_budget(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "none.db"
    Tuner(tr.train_worsens, {"x": Continuous(0.1, 1.0)}, objective="loss", mode="min",
          strategy=Hyperband(1, 9, 3), max_jobs=2, max_parallel_jobs=1, seed=0, journal=str(path)).fit()
    with Journal(path) as j:  # as a job cut short by a completion criterion leaves it
        j._db.execute("UPDATE trials SET status='stopped', resource=1")
    capsys.readouterr()
    assert main(["tune-report", str(path), "--full-only"]) == 0
    out = capsys.readouterr().out
    assert ("best at full budget (completed at max_resource=9): none: no trial ran its full budget (2 completed or "
            "stopped below it)") in out.splitlines()
    assert "  trial " not in out
