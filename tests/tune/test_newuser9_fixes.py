"""Fixes from a fresh user's trial (session 9): a NaN objective fails its trial (and never counts
towards fail fast), fail fast sees a misused trial through its trial number, ``warm_start`` takes
one path, ``Trial.attempt``, reports past ``max_resource`` or after a stop, GridSearch thins Integer
ranges and warns when ``max_jobs`` cuts the grid, text columns of ``dataframe()`` keep None, rungs
named by their resource in reasons, TPE proposals the same after a resume, ``fit(progress=False)``."""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tune_trainables as tt
import yaml

from tripwire._errors import ConfigError
from tripwire.tune import (Categorical, Continuous, GridSearch, Hyperband, HyperbandPlan, HyperbandScheduler,
                           Integer, RandomSearch, ReportError, Space, Trial, TrialRecord, Tuner, TuningResult)
from tripwire.tune._bohb import TPESampler
from tripwire.tune._cli import register
from tripwire.tune._executor import TrialSpec
from tripwire.tune._journal import Journal
from tripwire.tune._strategy import strategy_from_dict
from tripwire.tune._tuner import _certain_to_repeat, _error_key

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}


# ---- 1. a NaN objective fails its trial -----------------------------------------------------------
def test_a_nan_objective_fails_the_trial_in_every_form_and_inf_stays_valid(tmp_path: Path) -> None:
    result = Tuner(tt.train_nan_forms, {"x": Continuous(0.1, 0.9)}, strategy=GridSearch(max_resource=1, num_points=4),
                   seed=0, journal=str(tmp_path / "j.db")).fit()
    by_x = {round(t.params["x"], 2): t for t in result.trials}
    assert sorted(by_x) == [0.1, 0.37, 0.63, 0.9]
    assert by_x[0.1].status == "completed" and by_x[0.1].value == pytest.approx(0.1)
    assert by_x[0.9].status == "completed" and by_x[0.9].value == -math.inf   # -inf is a value (as Optuna)
    returned_none = by_x[0.37]
    assert returned_none.status == "failed" and returned_none.value is None
    assert returned_none.reason == "failed (objective is nan)"
    assert returned_none.error == "the objective is nan: train returned None and its last report (step=1) was nan"
    in_dict = by_x[0.63]
    assert in_dict.status == "failed" and in_dict.reason == "failed (objective is nan)"
    assert math.isnan(in_dict.metrics["objective"]) and in_dict.metrics["loss"] == 1.0
    assert in_dict.error == "the objective is nan: train returned the objective nan under the key 'objective'"
    assert result.best is not None and result.best.number == by_x[0.1].number


def test_nan_objectives_warn_never_fail_fast_and_print_the_prefix_once(tmp_path: Path) -> None:
    """In a fresh interpreter with no logging configured (Python's last-resort handler prints the
    message alone): every trial runs (a NaN is one configuration's failure, not certain to repeat),
    each is failed, and the WARNING names the NaN once, with one ``tripwire.tune:`` prefix."""
    script = tmp_path / "nan_job.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(HERE)!r})
        import tune_trainables as tt
        from tripwire.tune import Continuous, RandomSearch, Tuner

        if __name__ == "__main__":
            r = Tuner(tt.train_nan, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=1), max_jobs=3,
                      seed=0, journal={str(tmp_path / "nan.db")!r}).fit()
            print(json.dumps({{"statuses": [t.status for t in r.trials], "halt": r.halt, "best": r.best is None,
                              "errors": [t.error for t in r.trials]}}))
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"statuses": ["failed"] * 3, "halt": None, "best": True,
                   "errors": ["the objective is nan: train returned the objective nan"] * 3}
    assert "tripwire.tune: no trial returned an objective: 3 of 3 trials failed; the first error (trial 0): " \
           "the objective is nan: train returned the objective nan" in proc.stderr, proc.stderr
    assert proc.stderr.count("tripwire.tune:") == 1 and "tripwire.tune: tripwire.tune" not in proc.stderr


def test_cli_exits_1_when_every_objective_is_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    cfg = {"train": "tune_trainables:train_nan", "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}},
           "strategy": {"type": "random", "max_resource": 1}, "max_jobs": 2, "seed": 0,
           "journal": str(tmp_path / "cli.db")}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(cfg))
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["tune", str(tmp_path / "tune.yaml"), "--no-progress"])
    assert args.func(args) == 1
    captured = capsys.readouterr()
    assert "first error (trial 0, 2 failed): the objective is nan: train returned the objective nan" in captured.out
    assert "every finished trial failed" in captured.err


def test_the_issue_loop_under_a_strategy_without_max_resource_fails_fast_with_the_way_out(tmp_path: Path) -> None:
    # RandomSearch() gives trials max_resource None: issue 8's loop raised a bare TypeError in all
    # 30 trials, fail fast never counted it, and nothing named RandomSearch(max_resource=...)
    result = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(), max_jobs=30,
                   max_parallel_jobs=1, seed=0, journal=str(tmp_path / "j.db")).fit()  # (one worker: exactly 2 start)
    assert result.counts()["failed"] == len(result.trials) == 2
    assert "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'" in (result.halt or "")
    assert "pass RandomSearch(max_resource=N)" in (result.halt or "")
    ok = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=3),
               max_jobs=3, seed=0, journal=str(tmp_path / "k.db")).fit()
    assert ok.counts()["completed"] == 3 and ok.halt is None
    # (a TypeError about None is one configuration's failure where trials have a max_resource)
    assert not _certain_to_repeat("TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'", 3)


def test_a_nan_error_is_not_certain_to_repeat() -> None:
    assert not _certain_to_repeat("the objective is nan: train returned the objective nan")
    assert _certain_to_repeat("train returned None and reported no value")


# ---- 2. fail fast sees a misused trial through its number -----------------------------------------
def test_error_key_masks_the_trial_number_and_pids() -> None:
    a = "tripwire.tune._errors.ReportError: trial 0: duplicate step=1 after step=1; steps must increase strictly"
    b = "tripwire.tune._errors.ReportError: trial 17: duplicate step=1 after step=1; steps must increase strictly"
    assert _error_key(a) == _error_key(b) and "trial <N>: duplicate step=1" in _error_key(a)
    assert _error_key("TrialDetachedError: trial 3 was copied into process 4242, which") == \
        _error_key("TrialDetachedError: trial 4 was copied into process 4343, which")
    assert _error_key("ValueError: step=1 differs") != _error_key("ValueError: step=2 differs")


@pytest.mark.parametrize("kind, error", [
    ("duplicate", r"ReportError: trial 0: duplicate step=1 after step=1"),
    ("value_str", r"ReportError: trial 0: value='0\.5' must be a real number"),
    ("beyond_max", r"ReportError: trial 0: step=4 is larger than max_resource=3"),
])
def test_fail_fast_ends_a_job_whose_trials_misuse_the_trial(tmp_path: Path, kind: str, error: str) -> None:
    result = Tuner(tt.train_misused, {"kind": Categorical([kind])}, strategy=RandomSearch(max_resource=3),
                   max_jobs=8, seed=0, journal=str(tmp_path / "j.db")).fit()
    assert len(result.trials) == 2 and result.counts()["failed"] == 2
    assert re.match(r"fail_fast: 2 trials failed with the same error before any trial succeeded: "
                    r"tripwire\.tune\._errors\." + error, result.halt or ""), result.halt
    assert "trial 1:" in (result.trials[1].error or "")


# ---- 3. warm_start takes one path -----------------------------------------------------------------
def test_warm_start_takes_one_path_or_a_list_and_names_a_bad_value(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=4, seed=0, journal=str(old)).fit()
    hb = Hyperband(1, 9, 3)
    for form in (str(old), old, [str(old)], (old,)):
        assert Tuner(tt.train_curve, SPACE, strategy=hb, max_jobs=1, warm_start=form).warm_start == [str(old)]
    result = Tuner(tt.train_curve, SPACE, strategy=hb, max_jobs=2, seed=1, journal=str(tmp_path / "new.db"),
                   warm_start=str(old)).fit()
    with Journal(tmp_path / "new.db", readonly=True) as j:
        assert j.job["warm_start"] == [str(old)] and len(j.get_meta("priors")) > 0
    assert len(result.trials) == 2
    for bad in (5, {"path": str(old)}, [str(old), 3], b"old.db", ""):
        with pytest.raises(ConfigError, match=r"warm_start=.* is not one of: None, a journal path \(str or "
                                              r"os\.PathLike\), a list of journal paths"):
            Tuner(tt.train_curve, SPACE, strategy=hb, max_jobs=1, warm_start=bad)
    with pytest.raises(ConfigError, match=r"warm_start journal '.*missing\.db' does not exist"):
        Tuner(tt.train_curve, SPACE, strategy=hb, max_jobs=1, warm_start=str(tmp_path / "missing.db"))


# ---- 4. Trial.attempt -----------------------------------------------------------------------------
def test_trial_attempt_is_read_only_and_pickles() -> None:
    assert Trial(0, {}).attempt == 1
    t = Trial(3, {"x": 1}, attempt=2)
    assert t.attempt == 2 and pickle.loads(pickle.dumps(t)).attempt == 2 and "attempt=2" in repr(t)
    with pytest.raises(AttributeError):
        t.attempt = 5  # type: ignore[misc]


def test_a_rerun_trial_sees_its_attempt_in_the_worker(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Tuner(tt.train_attempt, SPACE, strategy=RandomSearch(max_resource=2), max_jobs=2, seed=0, journal=str(path)).fit()
    # as a tuner SIGKILLed while trial 1 ran leaves it (tests/tune/test_resume.py kills one for real)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE trials SET status='running' WHERE number=1")
        db.execute("UPDATE reports SET stop=0 WHERE trial=1")  # (not told to stop yet: trial 27b)
    result = Tuner.resume(path).fit()
    assert [(t.number, t.status, t.attempt) for t in result.trials] == [(0, "completed", 1), (1, "completed", 2)]
    assert [t.metrics["attempt"] for t in result.trials] == [1, 2]


def test_the_attempt_reaches_a_dask_trial() -> None:
    pytest.importorskip("distributed")
    from tripwire.tune._dask import _run_trial

    out, _elapsed, _rule, _early = _run_trial(lambda params, trial: (trial.number, trial.attempt),
                                      TrialSpec(4, {"x": 0.5}, 0, 1, 3, attempt=3), "token")
    assert out == (4, 3)


# ---- 5. reports past max_resource, reports after a stop -------------------------------------------
class _Channel:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        self.calls.append(step)
        return step >= 2, "bracket 0, rung at resource 2: value 0.1 has 1 better of 2"


def test_a_step_past_max_resource_raises() -> None:
    t = Trial(2, {}, 1, 3)
    with pytest.raises(ReportError, match=r"trial 2: step=5 is larger than max_resource=3"):
        t.report(step=5, value=0.5)
    assert t.report(step=3, value=0.5) is True and t.stop_reason == "reached max_resource=3"
    # stopped at its budget, a framework that trains on (Lightning up to min_epochs) only gets True
    assert t.report(step=4, value=0.4) is True and t.report(step=5, value=0.4) is True


def test_a_report_after_the_stop_is_ignored() -> None:
    ch = _Channel()
    t = Trial(0, {}, 1, 9, channel=ch)
    assert t.report(1, 0.5) is False and t.report(2, 0.1) is True
    assert t.report(3, 0.9) is True and t.report(4, 0.9) is True
    assert ch.calls == [1, 2] and t.stop_reason.startswith("bracket 0, rung at resource 2") and t.last_step == 4
    with pytest.raises(ReportError, match="duplicate step=4"):   # still checked
        t.report(4, 0.9)


def test_a_trial_that_ignores_its_stop_keeps_the_resource_of_the_stop(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    result = Tuner(tt.train_ignores_stop, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=8, seed=0,
                   journal=str(path)).fit()
    stopped = [t for t in result.trials if t.status == "stopped"]
    assert stopped and result.counts()["failed"] == 0
    with Journal(path, readonly=True) as j:
        for t in stopped:
            steps = [s for _n, s, *_ in j.reports(t.number)]
            assert t.resource < 9 and steps[-1] == t.resource, (t, steps)
            assert t.reason.startswith(f"bracket {t.bracket}, rung at resource {t.resource}: ")


# ---- 6. GridSearch: Integer ranges thinned, a WARNING when max_jobs cuts the grid -----------------
def test_num_points_thins_integer_ranges_on_their_scale() -> None:
    assert Integer(8, 256).grid(4) == [8, 91, 173, 256]
    assert Integer(1, 1000, scale="log").grid(4) == [1, 10, 100, 1000]
    assert Integer(1, 10, scale="log").grid(8) == [1, 2, 3, 4, 5, 7, 10]       # rounded, deduplicated
    assert Integer(1, 3).grid(5) == [1, 2, 3] and Integer(8, 256).grid(None) == list(range(8, 257))
    assert Integer(8, 256).grid(4, "all") == list(range(8, 257))
    space = Space({"w": Integer(8, 256), "u": Integer(1, 3), "c": Categorical(["a", "b"])})
    assert space.grid_size(4) == len(space.grid(4)) == 4 * 3 * 2
    assert space.grid_size(4, "all") == 249 * 3 * 2
    assert GridSearch(num_points=4).to_dict()["integer_grid"] == "num_points"
    for s in (GridSearch(3, 4), GridSearch(3, 4, "all")):
        assert strategy_from_dict(s.to_dict()) == s
    with pytest.raises(ConfigError, match=r"GridSearch integer_grid='every' is not one of 'num_points', 'all'"):
        GridSearch(num_points=4, integer_grid="every")


def test_gridsearch_warns_when_max_jobs_runs_part_of_the_grid(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    space = {"x": Continuous(0.0, 1.0), "w": Integer(8, 256)}
    with caplog.at_level("WARNING", logger="tripwire.tune"):
        result = Tuner(tt.train_curve, space, strategy=GridSearch(max_resource=1, num_points=3), max_jobs=2,
                       seed=0, journal=str(tmp_path / "j.db")).fit()
    assert len(result.trials) == 2
    assert "GridSearch: max_jobs=2 runs 2 of the grid's 9 points, in lexicographic order of ['w', 'x'] " \
           "('x' takes its first 2 of 3 values; 'w' stays at its first value)" in caplog.text
    caplog.clear()
    # trial 17b: 4 points of a 2 x 2 x 2 grid vary the last two names, not the last one alone
    grid = {"b": Categorical(["gbtree", "dart"]), "eta": Continuous(0.01, 1.0, scale="log"), "md": Integer(1, 10)}
    with caplog.at_level("WARNING", logger="tripwire.tune"):
        result = Tuner(tt.train_constant, grid, strategy=GridSearch(max_resource=1, num_points=2), max_jobs=4,
                       seed=0).fit()
    assert {(t.params["eta"], t.params["md"]) for t in result.trials} == {(0.01, 1), (0.01, 10), (1.0, 1), (1.0, 10)}
    assert "('eta', 'md' take all their values; 'b' stays at its first value)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="tripwire.tune"):
        Tuner(tt.train_curve, {"w": Integer(1, 2)}, strategy=GridSearch(max_resource=1), seed=0,
              journal=str(tmp_path / "whole.db")).fit()
    assert "GridSearch" not in caplog.text


def test_a_grid_job_journaled_before_integer_grid_resumes_with_every_integer(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0), "w": Integer(1, 9)},
          strategy=GridSearch(max_resource=1, num_points=2), max_jobs=1, seed=0, journal=str(path)).fit()
    with Journal(path) as j:
        job = j.job
        assert job["strategy"]["integer_grid"] == "num_points"
        del job["strategy"]["integer_grid"]
        j.set_meta("job", job)
    tuner = Tuner.resume(path)
    assert tuner.strategy.integer_grid == "all" and tuner.max_jobs == 1


# ---- 7. dataframe: text columns keep None ---------------------------------------------------------
def test_dataframe_text_columns_keep_none() -> None:
    pytest.importorskip("pandas")
    rec = dict(params={"opt": "sgd"}, metrics=None, resource=1, bracket=0, rung=0, attempt=1, started=1.0, ended=2.0)
    trials = [TrialRecord(0, status="completed", value=0.5, reason="completed", error=None, rule=None, **rec),
              TrialRecord(1, status="failed", value=None, reason="failed (error)", error="Traceback...\nValueError: x",
                          rule=None, **rec),
              TrialRecord(2, status="stopped", value=0.1, reason="rule nan_loss: ...", error=None, rule="nan_loss",
                          **{**rec, "metrics": {"note": "diverged"}})]
    df = TuningResult(trials, "objective", "max", 9).dataframe()
    assert df["error"].tolist() == [None, "Traceback...\nValueError: x", None] and df["error"].dtype == object
    assert df["rule"].tolist() == [None, None, "nan_loss"] and df["metric:note"].tolist() == [None, None, "diverged"]
    assert df["status"].tolist() == ["completed", "failed", "stopped"]
    assert df["objective"].dtype.kind == "f" and math.isnan(df["objective"][1])


# ---- 8. a rung is named by its resource -----------------------------------------------------------
def test_reasons_name_a_rung_by_its_resource() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    t = [n for n in range(500) if s.bracket(n) == 0][:2]
    assert s.on_report(t[0], 1, 0.5).reason == "bracket 0: passed the rung at resource 1"
    assert s.on_report(t[1], 1, 0.4).reason == ("bracket 0, rung at resource 1: value 0.4 has 1 better of 2 "
                                                "(continue needs < 1 = max(1, 2//3))")
    assert s.on_report(t[0], 3, math.nan).reason == "bracket 0, rung at resource 3: value is NaN"


# ---- 9. TPE proposals do not depend on the sampler's history --------------------------------------
def _tpe() -> TPESampler:
    pytest.importorskip("optuna")
    space = Space({"lr": Continuous(1e-4, 1.0, scale="log"), "width": Integer(8, 256, scale="log")})
    return TPESampler(space, 5, [1, 3, 9], "max", 0.0, 3)


def _score(p: dict) -> float:
    return -abs(math.log10(p["lr"]) + 2) - abs(math.log2(p["width"]) - 6) / 4


def test_tpe_proposals_are_the_same_after_a_replay() -> None:
    uninterrupted = _tpe()
    proposals = []
    for n in range(12):
        p = uninterrupted(n)
        proposals.append(p)
        uninterrupted.observe(n, p, 9, _score(p))
    resumed = _tpe()   # a resumed job: the first 8 trials' reports replayed, then proposals
    for n in range(8):
        resumed.observe(n, proposals[n], 9, _score(proposals[n]))
    for n in range(8, 12):
        assert resumed(n) == proposals[n], n
        resumed.observe(n, proposals[n], 9, _score(proposals[n]))


def test_a_resumed_tpe_job_proposes_what_an_uninterrupted_one_does(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    kw = dict(strategy=Hyperband(1, 9, 3, sampler="tpe", min_points=3, random_fraction=0.2), seed=5)
    ref = Tuner(tt.train_curve, SPACE, max_jobs=10, journal=str(tmp_path / "ref.db"), **kw).fit()
    Tuner(tt.train_curve, SPACE, max_jobs=6, journal=str(tmp_path / "part.db"), **kw).fit()
    resumed = Tuner.resume(tmp_path / "part.db", max_jobs=10).fit()
    assert [(t.number, t.params, t.status, t.resource) for t in resumed.trials] == \
        [(t.number, t.params, t.status, t.resource) for t in ref.trials]


# ---- 10. fit(progress=False) ----------------------------------------------------------------------
def test_fit_progress_false_means_no_view(tmp_path: Path) -> None:
    tuner = Tuner(tt.train_curve, SPACE, strategy=RandomSearch(max_resource=1), max_jobs=1, seed=0,
                  journal=str(tmp_path / "j.db"))
    # (True is the built-in live view since trial 30f: tests/tune/test_trial30f_progress.py)
    with pytest.raises(ConfigError, match=r"progress='yes' is not one of: None or False \(no progress view\), "
                                          r"True \(the live view `tripwire tune` draws, in a terminal or a "
                                          r"notebook\), a callable taking a snapshot dict"):
        tuner.fit(progress="yes")  # type: ignore[arg-type]
    assert tuner.fit(progress=False).counts()["completed"] == 1


def test_a_trial_record_reads_its_objective_as_the_dataframe_names_it() -> None:
    from tripwire.tune import TrialRecord

    r = TrialRecord(number=0, params={}, status="completed", value=0.75, metrics=None, resource=3, bracket=0, rung=1,
                    reason=None, error=None, attempt=1, started=1.0, ended=3.5)
    assert r.objective == 0.75 and r.elapsed == 2.5
