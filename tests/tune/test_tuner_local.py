"""The tuner end to end on the local process pool (real worker processes, spawn)."""

from __future__ import annotations

import logging
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._errors import ConfigError
from tripwire.tune import (Continuous, GridSearch, Hyperband, Integer, JournalError, JournalLockedError,
                           LocalExecutor, RandomSearch, Tuner, TuningResult)
from tripwire.tune._journal import Journal

SPACE = {"x": Continuous(0.0, 1.0)}


def _tuner(tmp_path: Path, name: str = "j.db", **kw) -> Tuner:
    base = dict(space=SPACE, strategy=Hyperband(1, 27, 3), max_jobs=24, max_parallel_jobs=2, seed=0,
                journal=str(tmp_path / name))
    base.update(kw)
    train = base.pop("train", tt.train_curve)
    return Tuner(train, **base)


def test_hyperband_job_end_to_end(tmp_path: Path) -> None:
    result = _tuner(tmp_path).fit()
    assert len(result.trials) == 24 and [t.number for t in result.trials] == list(range(24))
    c = result.counts()
    assert c["failed"] == 0 and c["stopped"] > 0 and c["completed"] > 0
    for t in result.trials:
        if t.status == "completed":
            assert t.resource == 27 and t.reason == "reached max_resource=27"
        else:
            assert t.resource in (1, 3, 9) and "rung" in t.reason
        assert t.value == pytest.approx(tt.curve(t.params, t.resource))
    assert result.resource_used < result.resource_without_early_stopping == 24 * 27
    best = result.best
    assert best is not None and best.value == max(t.value for t in result.trials)
    df = result.dataframe()
    assert list(df.columns[:2]) == ["number", "x"] and len(df) == 24
    assert {"status", "objective", "resource", "bracket", "rung", "start", "end", "elapsed_s"} <= set(df.columns)
    assert (df["elapsed_s"] >= 0).all()
    again = TuningResult.from_journal(tmp_path / "j.db")
    assert [(t.number, t.status, t.value) for t in again.trials] == [(t.number, t.status, t.value)
                                                                     for t in result.trials]
    with Journal(tmp_path / "j.db", readonly=True) as j:
        reports = j.reports()
        assert sum(1 for r in reports if r[4]) == 24  # every trial got exactly one stop decision
        assert len(reports) == result.resource_used   # one report per resource unit
        assert j.load_scheduler_state()["type"] == "hyperband"
        assert len(j.rung_records()) == len(j.load_scheduler_state()["records"])


def test_same_seed_same_configurations(tmp_path: Path) -> None:
    a = _tuner(tmp_path, "a.db", max_jobs=8).fit()
    b = _tuner(tmp_path, "b.db", max_jobs=8).fit()
    c = _tuner(tmp_path, "c.db", max_jobs=8, seed=1).fit()
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    assert [t.bracket for t in a.trials] == [t.bracket for t in b.trials]
    assert [t.params for t in a.trials] != [t.params for t in c.trials]


def test_failures_are_isolated(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_sometimes_fails, max_jobs=9, strategy=RandomSearch(5)).fit()
    failed = [t for t in result.trials if t.status == "failed"]
    assert [t.number for t in failed] == [1, 4, 7]
    assert all("RuntimeError: boom in trial" in t.error and "Traceback" in t.error for t in failed)
    assert all(t.status == "completed" for t in result.trials if t.number % 3 != 1)


def test_dead_worker_is_replaced(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_dies, max_jobs=5, strategy=RandomSearch(3)).fit()
    t1 = result.trials[1]
    assert t1.status == "failed" and "died with exit code 13" in t1.error and t1.reason == "failed (worker_died)"
    assert [t.status for t in result.trials if t.number != 1] == ["completed"] * 4


def test_trial_timeout_kills_the_trial(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_hangs, max_jobs=3, strategy=RandomSearch(3), trial_timeout=1.5).fit()
    t0 = result.trials[0]
    assert t0.status == "failed" and "trial_timeout=1.5" in t0.error and t0.elapsed < 10
    assert [t.status for t in result.trials[1:]] == ["completed", "completed"]
    if hasattr(signal, "SIGUSR2"):  # trial 20c: the error says where the trial hung (faulthandler's dump)
        assert "where its threads were when it was stopped" in t0.error, t0.error
        assert 'tune_trainables.py", line' in t0.error and "in train_hangs" in t0.error, t0.error
        from tripwire.tune._errors import error_summary

        # the one line the summary and fail_fast's WARNING quote: the message, not the stack's last frame
        assert error_summary(t0.error) == t0.error.splitlines()[0] and "trial_timeout=1.5" in error_summary(t0.error)


def test_dict_objective_setup_and_warm_workers(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_with_context, setup=tt.setup_data, max_jobs=8,
                    strategy=RandomSearch(3)).fit()
    pids = {t.metrics["own_pid"] for t in result.trials}
    assert len(pids) <= 2  # two warm workers ran all eight trials
    assert all(t.metrics["worker_pid"] == t.metrics["own_pid"] for t in result.trials)
    missing = _tuner(tmp_path, "m.db", train=tt.train_dict, max_jobs=2, strategy=RandomSearch(3)).fit()
    assert all(t.status == "failed" and "without the objective (key 'objective')" in t.error for t in missing.trials)
    # the objective under its own name, or under "objective" whatever the name
    named = _tuner(tmp_path, "n.db", train=tt.train_dict, max_jobs=2, strategy=RandomSearch(3),
                   objective="validation:auc").fit()
    generic = _tuner(tmp_path, "g.db", train=tt.train_with_context, setup=tt.setup_data, max_jobs=2, strategy=RandomSearch(3),
                     objective="validation:auc").fit()
    for result in (named, generic):
        assert [t.status for t in result.trials] == ["completed", "completed"]
    assert named.trials[0].value == pytest.approx(1 - named.trials[0].metrics["train:loss"])
    wrong = _tuner(tmp_path, "w.db", train=tt.train_dict, max_jobs=1, strategy=RandomSearch(3), objective="auc").fit()
    assert "without the objective (key 'auc' or 'objective'); keys: ['train:loss', 'validation:auc']" in wrong.trials[0].error


def test_fresh_process_per_trial(tmp_path: Path) -> None:
    ex = LocalExecutor(reuse_workers=False)
    result = _tuner(tmp_path, train=tt.train_with_context, setup=tt.setup_data, max_jobs=4,
                    strategy=RandomSearch(2), executor=ex).fit()
    assert len({t.metrics["own_pid"] for t in result.trials}) == 4
    assert ex.worker_starts >= 4 + 2 - 1


def test_duplicate_step_fails_the_trial(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_duplicate_step, max_jobs=1, max_parallel_jobs=1).fit()
    assert "ReportError: trial 0: duplicate step=1 after step=1" in result.trials[0].error


@pytest.mark.parametrize(
    ("kw", "check"),
    [
        ({"target_value": 0.5, "max_jobs": 40}, lambda r: r.best.value >= 0.5 and len(r.trials) < 40),
        ({"max_total_resource": 60, "max_jobs": 100}, lambda r: r.resource_used <= 60 + 2 * 27),
        ({"max_no_improvement": 3, "max_jobs": 200}, lambda r: len(r.trials) < 200),
    ],
)
def test_completion_criteria(tmp_path: Path, kw: dict, check) -> None:
    result = _tuner(tmp_path, **kw).fit()
    assert check(result)


def test_grid_search_runs_every_point_once(tmp_path: Path) -> None:
    result = _tuner(tmp_path, space={"x": Continuous(0, 1), "k": Integer(1, 2)}, strategy=GridSearch(4, 3),
                    max_jobs=None).fit()
    assert sorted((t.params["k"], round(t.params["x"], 6)) for t in result.trials) == \
        [(k, x) for k in (1, 2) for x in (0.0, 0.5, 1.0)]


def test_journal_refuses_second_job_and_second_tuner(tmp_path: Path) -> None:
    _tuner(tmp_path, max_jobs=2).fit()
    with pytest.raises(JournalError, match=r"already holds a tuning job; continue it with Tuner.resume\(journal\) "
                                           r"\(CLI: tripwire tune --resume\)"):
        _tuner(tmp_path, max_jobs=2).fit()
    with pytest.raises(ConfigError, match=r"progress='rich' is not one of: None or False \(no progress view\), "
                                          r"True \(the live view .*\), a callable"):
        _tuner(tmp_path, "other.db", max_jobs=2).fit(progress="rich")  # type: ignore[arg-type]
    assert not (tmp_path / "other.db").exists()  # refused before the job was written: a plain rerun works
    # a live holder (this process's parent) refuses; a dead one does not
    db = sqlite3.connect(tmp_path / "j.db")
    with db:
        db.execute("INSERT OR REPLACE INTO lock VALUES (1, ?, ?, NULL, 0, 0)", (os.getppid(), os.uname().nodename))
    with pytest.raises(JournalLockedError, match=rf"held by another tuner \(pid {os.getppid()}"):
        Tuner.resume(tmp_path / "j.db").fit()
    with db:
        db.execute("UPDATE lock SET pid=999999999")
    assert len(Tuner.resume(tmp_path / "j.db", max_jobs=3).fit().trials) == 3
    db.close()


def test_warm_start_reads_earlier_journals(tmp_path: Path) -> None:
    # the earlier job searched near the optimum (x = 0.3): its values beat most new ones at every level
    _tuner(tmp_path, "old.db", max_jobs=20, space={"x": Continuous(0.28, 0.32)}).fit()
    result = _tuner(tmp_path, "new.db", max_jobs=10, seed=3, warm_start=[str(tmp_path / "old.db")]).fit()
    with Journal(tmp_path / "new.db", readonly=True) as j:
        priors = j.get_meta("priors")
        assert priors and all(step in (1, 3, 9) for step, _ in priors)
    cold = _tuner(tmp_path, "cold.db", max_jobs=10, seed=3).fit()
    assert result.resource_used < cold.resource_used  # the priors raise the bar at every rung
    with pytest.raises(ConfigError, match=r"tunes objective='objective' mode='max', not 'objective' 'min'"):
        _tuner(tmp_path, "bad.db", mode="min", warm_start=[str(tmp_path / "old.db")]).fit()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"mode": "maximize"}, r"mode='maximize' is not one of 'max', 'min'"),
        ({"max_jobs": 0}, r"max_jobs=0 must be an int >= 1"),
        ({"max_jobs": None}, r"max_jobs=None: set max_jobs"),
        ({"max_parallel_jobs": -1}, r"max_parallel_jobs=-1 must be an int >= 1"),
        ({"seed": -3}, r"seed=-3 must be an int >= 0"),
        ({"strategy": "hyperband"}, r"strategy='hyperband' is not one of Hyperband, RandomSearch, GridSearch"),
        ({"executor": "ray"}, r"executor='ray' is not one of 'local', 'dask'"),
        ({"trial_timeout": 0}, r"trial_timeout=0 must be a positive finite number"),
        ({"warm_start": ["nope.db"]}, r"warm_start journal 'nope.db' does not exist"),
    ],
)
def test_tuner_validation(tmp_path: Path, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _tuner(tmp_path, **kw)


def test_unpicklable_train_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot be sent to worker processes .* define it at module level"):
        _tuner(tmp_path, train=lambda p, t: 0.0, max_jobs=1).fit()


def test_total_resource_limit_stops_the_trial_that_spends_it(tmp_path: Path) -> None:
    # one worker: trial 0 runs its 10 units, trial 1 is stopped by the report that reaches 15 units
    result = _tuner(tmp_path, strategy=RandomSearch(10), max_jobs=5, max_parallel_jobs=1,
                    max_total_resource=15).fit()
    assert result.resource_used == 15 and len(result.trials) == 2
    last = result.trials[1]
    assert last.status == "stopped" and last.resource == 5 and "max_total_resource=15" in last.reason


def test_fail_fast_stops_a_job_whose_first_trials_fail_alike(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tripwire.tune"):
        result = _tuner(tmp_path, train=tt.train_same_error, max_jobs=12, strategy=RandomSearch(3)).fit()
    assert 2 <= len(result.trials) <= 3 and all(t.status == "failed" for t in result.trials)
    # 2, or 3 when a third trial started on the free worker before the second failure arrived
    assert re.match(r"fail_fast: [23] trials failed with the same error before any trial succeeded: ", result.halt)
    assert result.halt.endswith("ConfigError: trial_metric: 'val_los' was not logged by validation; logged: val_loss")
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warning) == 1 and "no trial returned an objective" in warning[0]
    assert f"{len(result.trials)} of {len(result.trials)} trials failed and the job stopped early (fail_fast" \
        in warning[0] and "ConfigError: trial_metric: 'val_los'" in warning[0]
    assert "ended early: fail_fast" in TuningResult.from_journal(tmp_path / "j.db").summary()
    # without fail fast every trial runs, and the warning still tells
    caplog.clear()
    with caplog.at_level("WARNING", logger="tripwire.tune"):
        every = _tuner(tmp_path, "all.db", train=tt.train_same_error, max_jobs=4, strategy=RandomSearch(3),
                       fail_fast=False).fit()
    assert len(every.trials) == 4 and every.halt is None and every.best is None
    assert "no trial returned an objective: 4 of 4 trials failed; the first error (trial 0): " in caplog.text
    # an error that may be one configuration's (a ValueError) never ends the job
    valued = _tuner(tmp_path, "value.db", train=tt.train_same_value_error, max_jobs=4, strategy=RandomSearch(3)).fit()
    assert len(valued.trials) == 4 and valued.halt is None
    # a job whose first trial succeeded goes on through the same repeated error
    mixed = _tuner(tmp_path, "mixed.db", train=tt.train_first_succeeds, max_jobs=5, max_parallel_jobs=1,
                   strategy=RandomSearch(3)).fit()
    assert [t.status for t in mixed.trials] == ["completed"] + ["failed"] * 4 and mixed.halt is None
    with pytest.raises(ConfigError, match=r"fail_fast='yes' must be True or False"):
        _tuner(tmp_path, fail_fast="yes")


def test_a_trial_stopped_by_a_rule_is_never_the_best(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_rule_stopped, max_jobs=3, strategy=RandomSearch(3)).fit()
    ruled = result.trials[0]
    assert (ruled.status, ruled.rule, ruled.value) == ("stopped", "oscillating_loss", 10.0)
    assert ruled.reason.startswith("rule oscillating_loss: loss oscillates: 12 sign changes in 20 steps loss")
    assert ruled.reason.endswith("...") and len(ruled.reason) < 240              # the message, shortened
    assert result.best is not None and result.best.number != 0 and result.best.value < 10.0
    assert [t.status for t in result.trials[1:]] == ["completed", "completed"]
    again = Tuner.resume(tmp_path / "j.db", max_jobs=4).fit()                     # a resume keeps it
    assert again.trials[0].rule == "oscillating_loss" and again.best.number != 0 and len(again.trials) == 4


def test_returned_metrics_keep_their_json_types_and_get_columns(tmp_path: Path) -> None:
    result = _tuner(tmp_path, train=tt.train_extra_metrics, max_jobs=2, strategy=RandomSearch(3)).fit()
    m = result.trials[0].metrics
    assert m == {"objective": 1.0, "note": "hello", "n": 3, "flag": True, "none": None, "np_int": 7, "x": 0.5,
                 "pair": "[1, 2]"}
    assert type(m["n"]) is int and type(m["np_int"]) is int and type(m["flag"]) is bool
    df = result.dataframe()
    metric_cols = [c for c in df.columns if c.startswith("metric:")]
    assert metric_cols == ["metric:flag", "metric:n", "metric:none", "metric:note", "metric:np_int",
                           "metric:objective", "metric:pair", "metric:x"]
    assert "x" in df.columns and df["metric:x"].tolist() == [0.5, 0.5]           # no clash with the parameter
    assert df["metric:note"].tolist() == ["hello", "hello"] and df.columns[-9] == "rule"


def test_summary_of_an_empty_and_of_a_failed_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from tripwire.tune._cli import register

    with Journal(tmp_path / "empty.db", create=True) as j:
        j.init_job({"objective": "objective", "mode": "max", "strategy": {}})
    empty = TuningResult.from_journal(tmp_path / "empty.db").summary()
    assert empty.splitlines()[0] == "tuning job: 0 trials" and "best: none yet" in empty
    _tuner(tmp_path, "failed.db", train=tt.train_same_error, max_jobs=2, strategy=RandomSearch(3)).fit()
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["tune-report", str(tmp_path / "failed.db")])
    assert args.func(args) == 1  # (trial 22k: exits as tripwire tune does for a job whose every trial failed)
    out = capsys.readouterr().out
    assert "tuning job: 2 trials (failed 2)" in out and "best: none: no trial returned an objective" in out
    assert "none yet" not in out


def test_summary_names_the_seed_drawn_for_seed_none(tmp_path: Path) -> None:
    # trial 24g: with seed=None the drawn seed was in the journal only, named by no summary or report
    result = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=1,
                   journal=str(tmp_path / "j.db")).fit()
    seed = result.job["seed"]
    assert f"seed: {seed} (Tuner(seed=...) with it draws the same configurations)" in result.summary().splitlines()


def test_a_trial_may_start_processes_of_its_own(tmp_path: Path) -> None:
    # a DataLoader with num_workers > 0 inside a trial: daemonic workers could not have children
    # ("daemonic processes are not allowed to have children", every trial failed)
    result = _tuner(tmp_path, train=tt.train_with_child_processes, max_jobs=2, strategy=RandomSearch(1)).fit()
    assert [t.status for t in result.trials] == ["completed", "completed"], [t.error for t in result.trials]
    assert [t.objective for t in result.trials] == pytest.approx([t.params["x"] ** 2 for t in result.trials])


def _one_argument(params):  # type: ignore[no-untyped-def]
    return 0.0


def test_a_train_that_cannot_take_params_and_trial_is_refused_before_any_worker(tmp_path: Path) -> None:
    # every trial failed alike with a TypeError, which fail_fast does not count: 20 of 20 trials
    with pytest.raises(ConfigError, match=r"train=_one_argument\(params\) cannot be called as train\(params, "
                                          r"trial\): too many positional arguments"):
        _tuner(tmp_path, train=_one_argument)
    assert not (tmp_path / "j.db").exists()


def test_warm_start_from_a_job_with_the_same_seed_and_space_is_named(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    _tuner(tmp_path, "old.db", max_jobs=4, strategy=RandomSearch(3)).fit()
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        # (warm start needs Hyperband's rungs; its configurations are RandomSearch's of the same seed)
        hb = Hyperband(min_resource=1, max_resource=3, reduction_factor=3)
        again = _tuner(tmp_path, "same.db", max_jobs=4, strategy=hb, warm_start=str(tmp_path / "old.db")).fit()
        other = _tuner(tmp_path, "other.db", max_jobs=4, strategy=hb, seed=1,
                       warm_start=str(tmp_path / "old.db")).fit()
    said = [r.getMessage() for r in caplog.records if "proposes the same configurations again" in r.getMessage()]
    assert len(said) == 1 and "old.db' ran seed=0 over the same space" in said[0]
    old = TuningResult.from_journal(tmp_path / "old.db")
    assert [t.params for t in again.trials] == [t.params for t in old.trials]  # what it warned of
    assert [t.params for t in other.trials] != [t.params for t in old.trials]
