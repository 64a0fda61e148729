"""Fixes from a fresh user's trial of the tuner (trial 13b): rule-stopped trials leave the rungs,
resume keeps raised limits, foreign or bad journal paths are refused before anything is written,
forkserver workers, Dask resume, ``tune-report --errors`` and its ranking, ``--resume`` with a
changed YAML, the progress rate, a ``train`` in a non-importable ``__main__``, YAML paths and
numbers, ``dataframe()`` dtypes, ``stopped`` without a max_resource, and polish (read-only
commands leave no WAL files, a finished job's resume leaves the journal as it was, Categorical
duplicates, YAML messages)."""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt
import yaml

from tripwire._errors import ConfigError
from tripwire.tune import (Categorical, Continuous, Hyperband, Integer, JournalError, LocalExecutor, RandomSearch,
                           Space, TrialRecord, Tuner, TuningResult)
from tripwire.tune._cli import build_tuner, load_job_config, register
from tripwire.tune._journal import Journal
from tripwire.tune._scheduler import HyperbandScheduler

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}
KINDS = {"kind": Categorical(["broken", "healthy"]), "x": Integer(0, 99)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _rule_job(journal: Path, max_jobs: int = 12) -> Tuner:
    return Tuner(tt.train_broken_or_healthy, KINDS, strategy=Hyperband(1, 9, 3), max_jobs=max_jobs, seed=0,
                 journal=str(journal))


# ---- 1. a trial a tripwire rule stopped leaves the rungs --------------------------------------------------
def test_rule_stopped_trials_leave_the_rungs_and_stop_no_healthy_trial(tmp_path: Path) -> None:
    journal = tmp_path / "rr.db"
    result = _rule_job(journal).fit()
    kinds = {t.number: t.params["kind"] for t in result.trials}
    broken = [t for t in result.trials if kinds[t.number] == "broken"]
    healthy = [t for t in result.trials if kinds[t.number] == "healthy"]
    assert broken and healthy
    assert all(t.status == "stopped" and t.rule == "nan_or_inf" for t in broken)
    # every healthy trial reports the same values: ties continue, so none is stopped (before the fix,
    # the broken runs' 0.901 at resource 1 stopped trial 7)
    assert [(t.status, t.reason) for t in healthy] == [("completed", "reached max_resource=9")] * len(healthy)
    with Journal(journal, readonly=True) as j:
        rung_trials = {r[2] for r in j.rung_records()}
        state = j.load_scheduler_state()
    assert rung_trials == {t.number for t in healthy}
    assert {r[2] for r in state["records"]} == rung_trials          # persisted in the scheduler's state too


def test_a_resumed_job_judges_without_the_rule_stopped_trials_as_an_uninterrupted_one(tmp_path: Path) -> None:
    whole = _rule_job(tmp_path / "whole.db").fit()
    _rule_job(tmp_path / "parts.db", max_jobs=6).fit()
    parts = Tuner.resume(tmp_path / "parts.db", max_jobs=12).fit()   # the rungs are rebuilt from the journal
    assert [(t.params, t.bracket, t.status, t.reason, t.resource, t.rule) for t in parts.trials] == \
        [(t.params, t.bracket, t.status, t.reason, t.resource, t.rule) for t in whole.trials]


def test_scheduler_forget_removes_a_trials_values_from_the_pools_and_the_state() -> None:
    s = HyperbandScheduler(Hyperband(1, 9, 3).plan, mode="max", seed=0)
    b0 = [n for n in range(40) if s.bracket(n) == 0][:3]
    s.on_report(b0[0], 1, 0.9)      # a broken run's report ...
    s.forget(b0[0])                 # ... dropped when its rule stops it
    s.end(b0[0])
    assert not s.on_report(b0[1], 1, 0.5).stop       # judged as if the 0.9 had never been there
    assert all(r[2] != b0[0] for r in s.state_dict()["records"])


def test_warm_start_leaves_out_the_rule_stopped_trials_of_the_earlier_job(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    _rule_job(old).fit()
    new = Tuner(tt.train_broken_or_healthy, KINDS, strategy=Hyperband(1, 9, 3), max_jobs=1, seed=1,
                journal=str(tmp_path / "new.db"), warm_start=str(old))
    priors = new._load_priors(new.strategy.scheduler("max", 1))
    assert priors and all(v < 0.9 for _level, v in priors)


# ---- 2. limits raised by resume are journaled ----------------------------------------------------------
def test_limits_raised_by_resume_survive_a_crash(tmp_path: Path) -> None:
    journal = tmp_path / "lim.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 3, 3), max_jobs=2, seed=0, journal=str(journal)).fit()

    def crash(snapshot: dict[str, Any]) -> None:  # the tuning process dies mid-session
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Tuner.resume(journal, max_jobs=5, max_wall_time=600.0).fit(progress=crash)
    with Journal(journal, readonly=True) as j:
        assert (j.job["max_jobs"], j.job["max_wall_time"]) == (5, 600.0)
    result = Tuner.resume(journal).fit()           # a plain resume keeps the raised limits
    assert [t.number for t in result.trials] == list(range(5)) and result.halt is None


# ---- 3 and 6. journal paths that cannot hold a journal -------------------------------------------------
def _foreign_db(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE studies (study_id INTEGER PRIMARY KEY, name TEXT);"
                     "CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, state TEXT);"
                     "CREATE TABLE meta (key TEXT, value TEXT);"
                     "INSERT INTO studies VALUES (1, 's'); INSERT INTO trials VALUES (1, 'COMPLETE');")
    db.commit()
    db.close()


@pytest.mark.parametrize("kind", ["optuna_like", "other_sqlite", "not_sqlite"])
def test_an_existing_file_that_is_not_a_journal_is_refused_untouched(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "user.db"
    if kind == "optuna_like":
        _foreign_db(path)
    elif kind == "other_sqlite":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE mine (a, b)")
        db.commit()
        db.close()
    else:
        path.write_text("train: x\n")
    before = _md5(path)
    with pytest.raises(ConfigError, match=rf"{path.name}' is not a tripwire journal"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(path))
    with pytest.raises(JournalError, match="is not a tripwire journal"):
        Journal(path, create=True)
    assert _md5(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["user.db"]


def test_an_empty_file_or_database_is_a_new_journal(tmp_path: Path) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    sqlite3.connect(tmp_path / "blank.db").close()
    for name in ("empty.db", "blank.db"):
        result = Tuner(tt.train_curve, SPACE, strategy=RandomSearch(2), max_jobs=1, seed=0,
                       journal=str(tmp_path / name)).fit()
        assert result.counts()["completed"] == 1


def test_a_journal_in_a_missing_folder_or_a_directory_is_a_config_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"journal '.*nodir/t.db': its folder '.*nodir' does not exist"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(tmp_path / "nodir" / "t.db"))
    with pytest.raises(ConfigError, match=rf"journal '{tmp_path}' is a directory; pass a file path"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=tmp_path)
    with pytest.raises(ConfigError, match=r"journal=3 is not one of"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=3)  # type: ignore[arg-type]
    monkeypatch.syspath_prepend(str(HERE))
    cfg = tmp_path / "nd.yaml"
    cfg.write_text(yaml.safe_dump({"train": "tune_trainables:train_curve", "journal": "nodir/t.db",
                                   "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}}, "max_jobs": 1}))
    args = _parser().parse_args(["tune", "--no-progress", str(cfg)])
    assert args.func(args) == 2
    assert "nodir' does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nodir").exists()


# ---- 4 and 11. start methods -------------------------------------------------------------------------
def test_forkserver_workers_run_trials(tmp_path: Path) -> None:
    result = Tuner(tt.train_curve, SPACE, strategy=RandomSearch(2), max_jobs=2, seed=0, journal=str(tmp_path / "f.db"),
                   executor={"type": "local", "start_method": "forkserver"}).fit()
    assert result.counts()["completed"] == 2


def test_the_early_death_message_blames_the_guard_only_for_a_main_script() -> None:
    ex = LocalExecutor("spawn")
    ex._train = tt.train_curve
    msg = ex._early_death_message(1)
    assert "'tune_trainables' imports in a fresh process" in msg and "__main__" not in msg
    ex._train = type("F", (), {"__module__": "__main__"})()
    assert "if __name__ == '__main__'" in ex._early_death_message(1)


def test_a_train_in_an_interactive_main_is_named_up_front(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        from tripwire.tune import Tuner, Integer
        def train(p, t):
            return float(p['x'])
        try:
            Tuner(train, space={{'x': Integer(1, 9)}}, max_jobs=3, journal={str(tmp_path / 'c.db')!r}).fit()
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    for how in ("-c", "stdin"):
        argv = [sys.executable, "-c", code] if how == "-c" else [sys.executable, "-"]
        proc = subprocess.run(argv, input=None if how == "-c" else code, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("ConfigError train=<function train") and \
            "is defined in a __main__ that worker processes cannot import" in proc.stdout, proc.stdout
        assert "'start_method': 'fork'" in proc.stdout and "Can't get attribute" not in proc.stderr


# ---- 5. Dask resume ------------------------------------------------------------------------------------
def test_resume_rebuilds_a_dask_job_that_started_its_own_cluster(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from tripwire.tune import DaskExecutor

    for name, executor in (("new.db", "dask"), ("obj.db", DaskExecutor(type("OtherCluster", (), {
            "scheduler_address": "tcp://10.0.0.1:8786"})()))):
        tuner = Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(tmp_path / name), executor=executor)
        with Journal(tmp_path / name, create=True) as j:
            j.init_job(tuner._job())
    resumed = Tuner.resume(tmp_path / "new.db")
    assert isinstance(resumed.executor, DaskExecutor) and resumed.executor.cluster is None
    with pytest.raises(ConfigError, match=r"ran on a Dask OtherCluster object, which cannot be rebuilt"):
        Tuner.resume(tmp_path / "obj.db").fit()  # (a trial to run: refused when it would start; trial 17b)


# ---- 7 and 10. tune-report --------------------------------------------------------------------------
def test_tune_report_errors_shows_the_tracebacks_the_cli_points_to(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    cfg = tmp_path / "fail.yaml"
    cfg.write_text(yaml.safe_dump({"train": "tune_trainables:train_same_value_error", "journal": "fail.db",
                                   "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}},
                                   "max_jobs": 2, "seed": 0}))
    args = _parser().parse_args(["tune", "--no-progress", str(cfg)])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert f"their tracebacks: tripwire tune-report --errors {tmp_path / 'fail.db'}" in err
    args = _parser().parse_args(["tune-report", str(tmp_path / "fail.db"), "--errors"])
    assert args.func(args) == 1  # (trial 22k: exits as tripwire tune does for a job whose every trial failed)
    out = capsys.readouterr().out
    assert out.count("Traceback (most recent call last):") == 2
    assert "--- trial 0 (attempt 1) failed (error)" in out and "ValueError: this configuration diverged" in out


def test_tune_report_does_not_rank_rule_stopped_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "rr.db"
    result = _rule_job(journal).fit()
    ruled = [t.number for t in result.trials if t.rule is not None]
    args = _parser().parse_args(["tune-report", str(journal), "--top", "20"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    listed = [int(line.split()[1]) for line in out.splitlines() if line.startswith("  trial ")]
    assert listed and not set(listed) & set(ruled)
    assert listed[0] == result.best.number  # type: ignore[union-attr]
    assert f"({len(ruled)} trial(s) stopped by a tripwire rule are not ranked" in out


# ---- 8. --resume with a changed YAML ----------------------------------------------------------------
def test_resume_refuses_a_yaml_that_changes_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    base = {"train": "tune_trainables:train_dict", "objective": "validation:auc", "mode": "max",
            "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}},
            "strategy": {"type": "hyperband", "min_resource": 1, "max_resource": 3, "reduction_factor": 3},
            "max_jobs": 2, "seed": 4, "journal": "k.db"}
    cfg = tmp_path / "k.yaml"
    cfg.write_text(yaml.safe_dump(base))
    args = _parser().parse_args(["tune", "--no-progress", str(cfg)])
    assert args.func(args) == 0
    changed = {**base, "objective": "loss", "mode": "min", "seed": 8, "max_jobs": 3,
               "space": {"x": {"type": "continuous", "low": 0.5, "high": 1.0}},
               "strategy": {**base["strategy"], "reduction_factor": 2}}
    cfg2 = tmp_path / "kchg.yaml"
    cfg2.write_text(yaml.safe_dump(changed))
    capsys.readouterr()
    args = _parser().parse_args(["tune", "--no-progress", "--resume", str(cfg2)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "differs from the job journaled in" in err
    assert "['objective', 'mode', 'space', 'strategy', 'seed']" in err and "'loss' in the YAML" in err
    assert len(TuningResult.from_journal(tmp_path / "k.db").trials) == 2     # nothing ran
    cfg2.write_text(yaml.safe_dump({**base, "max_jobs": 3}))                  # a changed limit goes on
    args = _parser().parse_args(["tune", "--no-progress", "--resume", str(cfg2)])
    assert args.func(args) == 0
    assert len(TuningResult.from_journal(tmp_path / "k.db").trials) == 3


# ---- 9. the progress callback's rate ----------------------------------------------------------------
def test_progress_is_called_at_most_five_times_a_second(tmp_path: Path) -> None:
    calls: list[float] = []
    snaps: list[dict[str, Any]] = []

    def progress(snapshot: dict[str, Any]) -> None:
        calls.append(time.monotonic())
        snaps.append(snapshot)

    result = Tuner(tt.train_slow, SPACE, strategy=RandomSearch(20), max_jobs=4, seed=0,
                   journal=str(tmp_path / "p.db")).fit(progress=progress)   # 80 reports over > 1.6 s
    # the last two calls: every trial ended, before the workers stop, and the final one (trial 27b)
    gaps = [b - a for a, b in zip(calls[:-2], calls[1:-2])]
    assert gaps and min(gaps) >= 0.199, gaps
    assert [s["phase"] for s in snaps[-3:]] == ["running", "shutting down", "ended"]
    assert snaps[-1]["completed"] == 4 and result.counts()["completed"] == 4


# ---- 11 (YAML). warm_start beside the YAML, 1e-4 -----------------------------------------------------
def test_yaml_warm_start_is_relative_to_the_yaml_and_1e_4_is_a_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    folder = tmp_path / "t07"
    folder.mkdir()
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 3, 3), max_jobs=1, seed=0,
          journal=str(folder / "tuning.db")).fit()
    (folder / "ws.yaml").write_text(textwrap.dedent("""
        train: tune_trainables:train_curve
        journal: ws.db
        warm_start: tuning.db
        space:
          x: {type: continuous, low: 1e-4, high: 1.0, scale: log}
        strategy: {type: hyperband, min_resource: 1, max_resource: 3}
        max_jobs: 1
    """))
    monkeypatch.chdir(tmp_path)
    cfg = load_job_config("t07/ws.yaml")
    assert cfg["warm_start"] == str(folder / "tuning.db") and cfg["journal"] == str(folder / "ws.db")
    space = Space.from_dict(cfg["space"])
    assert space.ranges["x"].low == 1e-4 and isinstance(space.ranges["x"].low, float)
    tuner = build_tuner(cfg, resume=False)
    assert tuner.warm_start == [str(folder / "tuning.db")]
    (folder / "list.yaml").write_text((folder / "ws.yaml").read_text().replace("warm_start: tuning.db",
                                                                                "warm_start: [tuning.db]"))
    assert load_job_config("t07/list.yaml")["warm_start"] == [str(folder / "tuning.db")]


# ---- 14. dataframe dtypes --------------------------------------------------------------------------
def _record(number: int, status: str, value: float | None, started: float | None, ended: float | None,
            error: str | None = None) -> TrialRecord:
    return TrialRecord(number, {"x": 0.5}, status, value, None, 1 if ended else 0, 0, 0,
                       None if status == "pending" else status, error, 1, started, ended)


def test_dataframe_dtypes_do_not_depend_on_how_the_job_went() -> None:
    pytest.importorskip("pandas")
    now = time.time()
    jobs = {
        "ok": [_record(0, "completed", 0.5, now, now + 1), _record(1, "failed", None, now, now + 2, "E")],
        "all_failed": [_record(0, "failed", None, now, now + 1, "E"), _record(1, "failed", None, now, now + 1, "E")],
        "pending_only": [_record(0, "pending", None, None, None), _record(1, "pending", None, None, None)],
    }
    dtypes = {}
    for name, trials in jobs.items():
        df = TuningResult(trials, "objective", "max", 3).dataframe()
        dtypes[name] = {c: str(df[c].dtype) for c in ("objective", "start", "end", "elapsed_s", "resource")}
    assert dtypes["ok"] == {"objective": "float64", "start": "datetime64[us, UTC]", "end": "datetime64[us, UTC]",
                            "elapsed_s": "float64", "resource": "int64"}
    assert dtypes["all_failed"] == dtypes["ok"] and dtypes["pending_only"] == dtypes["ok"]
    df = TuningResult(jobs["ok"], "objective", "max", 3).dataframe()
    assert df["start"][0].timestamp() == pytest.approx(now, abs=1e-5) and df["elapsed_s"][0] == pytest.approx(1.0)


# ---- 15. stopped without a max_resource ---------------------------------------------------------------
def test_a_trial_cut_short_by_max_total_resource_is_stopped_without_max_resource(tmp_path: Path) -> None:
    result = Tuner(tt.train_five_steps, SPACE, max_jobs=3, seed=0, max_total_resource=7,
                   journal=str(tmp_path / "tr.db")).fit()
    assert [(t.status, t.resource) for t in result.trials] == [("completed", 5), ("stopped", 2)]
    assert result.trials[1].reason == "tuning job complete: max_total_resource=7 reached"


# ---- 16. polish --------------------------------------------------------------------------------------
def test_read_only_commands_leave_no_wal_files_and_a_finished_resume_leaves_the_journal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "t.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 3, 3), max_jobs=2, seed=0, journal=str(journal)).fit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]
    before = _md5(journal)
    TuningResult.from_journal(journal)
    args = _parser().parse_args(["tune-report", str(journal)])
    assert args.func(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]
    Tuner.resume(journal).fit()                                   # finished: nothing to do, nothing written
    assert _md5(journal) == before and sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]


def _as_nobody() -> list[str] | None:
    """A command prefix that runs as user nobody (root with setpriv only), else None."""
    import shutil

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_a_journal_without_write_access_is_read_from_a_copy_and_refused_for_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 17c: in a read-only folder a report said "is not a tripwire journal: attempt to write a
    readonly database"; a read-only file left -wal/-shm files of the reader's next to it; a Tuner
    took the path and fit() died with sqlite3's "unable to open database file", naming no path."""
    journal = tmp_path / "t.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 3, 3), max_jobs=3, seed=0, journal=str(journal)).fit()
    before = _md5(journal)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) in (journal, tmp_path)
                        else real_access(path, mode, **kw))  # (root writes anywhere: as another user would see it)
    result = TuningResult.from_journal(journal)
    assert len(result.trials) == 3 and result.best is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"] and _md5(journal) == before
    with pytest.raises(ConfigError, match=r"journal '.*new\.db' cannot be written: this user cannot write in its "
                                          r"folder"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(tmp_path / "new.db"))
    with pytest.raises(JournalError, match=r"cannot be written: this user cannot write the file"):
        Journal(journal)
    prefix = _as_nobody()
    if prefix is None:
        return
    # the real thing: an unprivileged user, a folder and a file that are root's
    import shutil
    import tempfile

    monkeypatch.setattr(os, "access", real_access)
    ro = Path(tempfile.mkdtemp(prefix="tw-ro-"))  # (pytest's folders are root's alone: none a user can enter)
    (ro / "t.db").write_bytes(journal.read_bytes())
    ro.chmod(0o755)
    (ro / "t.db").chmod(0o644)
    try:
        _nobody_reads_and_cannot_tune(prefix, ro)
    finally:
        shutil.rmtree(ro, ignore_errors=True)


def _nobody_reads_and_cannot_tune(prefix: list[str], ro: Path) -> None:
    cli = [sys.executable, "-m", "tripwire._cli"]
    env = {**os.environ, "HOME": "/tmp"}
    report = subprocess.run([*prefix, *cli, "tune-report", str(ro / "t.db")], capture_output=True, text=True,
                            env=env, timeout=120)
    assert report.returncode == 0 and "tuning job: 3 trials" in report.stdout, report.stderr
    assert sorted(p.name for p in ro.iterdir()) == ["t.db"]
    cfg = ro / "tune.yaml"
    cfg.write_text(yaml.safe_dump({"train": "tune_trainables:train_curve", "journal": "new.db", "max_jobs": 1,
                                   "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}}}))
    cfg.chmod(0o644)
    tune = subprocess.run([*prefix, *cli, "tune", "--no-progress", str(cfg)], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(Path(tt.__file__).parent)}, cwd=ro, timeout=120)
    assert tune.returncode == 2, tune.stderr
    assert "cannot be written: this user cannot write in its folder" in tune.stderr and "Traceback" not in tune.stderr


def test_a_trial_a_criterion_cut_below_min_resource_is_best_only_when_no_trial_reached_it() -> None:
    """Trial 17c: with max_total_resource, result.best was a trial stopped after 3 units against
    min_resource=5 (a completion criterion stops running trials wherever they are)."""
    from tripwire.tune._result import TrialRecord, TuningResult

    def rec(number: int, value: float, resource: int) -> TrialRecord:
        return TrialRecord(number, {}, "stopped", value, None, resource, 0, 0, "tuning job complete", None, 1, 0.0, 1.0)

    job = {"strategy": {"type": "hyperband", "min_resource": 5, "max_resource": 15, "reduction_factor": 3}}
    trials = [rec(0, 0.9, 3), rec(1, 0.7, 5), rec(2, 0.8, 15)]
    assert TuningResult(trials, "objective", "max", 15, job).best.number == 2
    assert TuningResult(trials[:1], "objective", "max", 15, job).best.number == 0  # none reached it: the best there is
    assert TuningResult(trials, "objective", "max", 15, {"strategy": {"type": "random"}}).best.number == 0


def test_report_without_max_resource_and_a_journal_under_a_file(tmp_path: Path) -> None:
    result = Tuner(tt.train_five_steps, SPACE, max_jobs=2, seed=0, journal=str(tmp_path / "r.db")).fit()
    assert result.max_resource is None and result.counts()["completed"] == 2
    assert "resource used: 10 (reported steps; the strategy has no max_resource)" in result.summary()
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match=r"'.*data\.csv' is not a folder \(a file of that name exists\)"):
        Tuner(tt.train_dict, SPACE, max_jobs=1, journal=str(tmp_path / "data.csv" / "x.db"))


def test_categorical_refuses_equal_values_and_nan() -> None:
    with pytest.raises(ConfigError, match=r"holds True and 1, which are equal in Python \(1 == True\)"):
        Categorical([1, True])
    with pytest.raises(ConfigError, match=r"holds 1.0 and 1, which are equal"):
        Categorical([1, 1.0])
    with pytest.raises(ConfigError, match=r"holds nan, which equals no value"):
        Categorical([float("nan"), 1.0])
    with pytest.raises(ConfigError, match=r"holds 'a' twice"):
        Categorical(["a", "a"])
    assert Categorical([0, "0", None, 0.5]).values == [0, "0", None, 0.5]


def test_a_yaml_range_without_a_required_key_names_the_key_not_a_signature() -> None:
    with pytest.raises(ConfigError) as info:
        Space.from_dict({"opt": {"type": "categorical"}})
    assert str(info.value) == "space['opt']: categorical range {'type': 'categorical'} is missing the key(s) ['values']"
    with pytest.raises(ConfigError, match=r"is missing the key\(s\) \['high'\]"):
        Space.from_dict({"x": {"type": "integer", "low": 1}})
    with pytest.raises(ConfigError, match=r"\{type: continuous, low: 0.01, high: 0.1\} for a range\)"):
        Space.from_dict({"lr": [0.01, 0.1]})
    with pytest.raises(ConfigError, match=r"\(in YAML: strategy: \{type: grid, num_points: N\}\)"):
        Space.from_dict({"lr": {"type": "continuous", "low": 0.01, "high": 0.1}}).grid_size()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_cli_names_the_cli_resume(tmp_path: Path, sig: signal.Signals) -> None:
    cfg = tmp_path / "ci.yaml"
    cfg.write_text(yaml.safe_dump({"train": "tune_trainables:train_sleeps", "journal": "ci.db", "max_jobs": 2,
                                   "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}}}))
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {**os.environ, "PYTHONPATH": str(HERE), "TRIPWIRE_TUNE_PIDS": str(pids)}
    proc = subprocess.Popen([sys.executable, "-m", "tripwire._cli", "tune", "--no-progress", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not any(pids.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert f"continue the job with tripwire tune --resume {cfg}" in err, err
    assert proc.returncode == (130 if sig == signal.SIGINT else -signal.SIGTERM)
    with Journal(tmp_path / "ci.db", readonly=True) as j:
        assert [t["status"] for t in j.trials()] == ["pending"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (Linux)")
def test_a_folder_that_refuses_new_files_is_refused_by_the_tuner_not_at_fit(tmp_path: Path) -> None:
    # as root, os.access says yes to /proc: Tuner(...) passed and fit() failed (tripwire tune: exit 1)
    with pytest.raises(ConfigError, match=r"^journal '/proc/j\.db' cannot be written: creating a file in its folder failed \(.+\); pass a "
                                          r"path in a folder you can write$"):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal="/proc/j.db")
    Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(tmp_path / "new.db"))
    assert not (tmp_path / "new.db").exists()  # the check leaves nothing behind
