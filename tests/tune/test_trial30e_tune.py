"""Trial 30e (tripwire.tune's less common features), findings 1-5, 8 and 9 (6: test_trial30e_dask.py).

1. ``max_total_resource`` as the only limit, with no ``max_resource`` and a ``train`` that does not
   report, could never be reached: the job ran 110,694 trials. Refused at construction.
2. ``sampler="tpe"`` never learned from a ``train`` that returns its score without reporting (its
   proposals were random search's), nor from reports between rung levels.
3. Warm start took priors from a journal over another search space (renamed or narrower parameters,
   another ``train``) without a word.
4. The same warm-start journal twice, or a copy of it, counted its values twice.
5. After ``kill -9`` the report counted the interrupted attempts' units as used, with no ``resource
   lost`` line; after the resume they were lost.
8. The ``target_value`` halt named a best value that the summary's ``best:`` line contradicted.
9. ``tune-report --csv``; a ``GridSearch`` cut short by ``max_total_resource`` said nothing.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import shutil
from pathlib import Path

import pytest
import trial30e_trainables as t30
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Categorical, Continuous, GridSearch, Hyperband, Integer, RandomSearch, Tuner, TuningResult
from tripwire.tune._bohb import TPESampler
from tripwire.tune._errors import ConfigError
from tripwire.tune._format import format_value
from tripwire.tune._journal import Journal
from tripwire.tune._space import Space

SPACE = {"x": Continuous(0.0, 1.0)}


# ---- 1. max_total_resource that can never be reached -------------------------------------------------
def test_max_total_resource_alone_without_a_max_resource_is_refused(tmp_path: Path) -> None:
    # the repro: RandomSearch() (no max_resource), a train that does not report, max_total_resource=10 alone
    with pytest.raises(ConfigError, match=r"^max_total_resource=10 is the only completion criterion, and the "
                                          r"strategy RandomSearch\(max_resource=None\) has no max_resource: .* one "
                                          r"that returns without reporting 0 units, .* never ends; accepted: a "
                                          r"strategy with a max_resource \(RandomSearch\(max_resource=N\)"):
        Tuner(t30.train_returns_without_reporting, SPACE, objective="loss", mode="min", max_total_resource=10,
              journal=str(tmp_path / "inf.db"), seed=0)
    assert not (tmp_path / "inf.db").exists()
    # with a max_resource (a trial that does not report is charged it), or another limit beside it: accepted
    Tuner(t30.train_returns_without_reporting, SPACE, max_total_resource=10, max_jobs=100)
    Tuner(t30.train_returns_without_reporting, SPACE, max_total_resource=10, max_wall_time=60)


def test_with_a_max_resource_such_a_job_ends_on_its_budget(tmp_path: Path) -> None:
    result = Tuner(t30.train_returns_without_reporting, SPACE, objective="loss", mode="min",
                   strategy=RandomSearch(max_resource=3), max_total_resource=7, seed=0,
                   journal=str(tmp_path / "fin.db")).fit()
    assert result.halt == "max_total_resource=7 reached"
    assert len(result.trials) == 3 and result.resource_used == 9  # (charged at the end: up to max_resource over)


# ---- 2. TPE learns from returned objectives and from reports between levels ---------------------------
def test_tpe_counts_a_report_between_levels_at_the_level_it_reached() -> None:
    s = TPESampler(Space(SPACE), 0, [1, 3, 9, 27], "min", 0.0, 2)
    for number, x in ((0, 0.1), (1, 0.9)):
        for step in (2, 4, 6, 8, 10, 27):  # a train reporting every 2 epochs, then at max_resource
            s.observe(number, {"x": x}, step, x + 1.0 / step)
    assert s._obs == {1: {0: 0.1 + 1 / 2, 1: 0.9 + 1 / 2}, 3: {0: 0.1 + 1 / 4, 1: 0.9 + 1 / 4},
                      9: {0: 0.1 + 1 / 10, 1: 0.9 + 1 / 10}, 27: {0: 0.1 + 1 / 27, 1: 0.9 + 1 / 27}}
    assert s.model_level() == 27
    s.observe(2, {"x": 0.5}, 0, 0.5)      # below the lowest level: no observation
    s.observe(3, {"x": 0.5}, 5, math.nan)  # NaN: none
    assert all(2 not in v and 3 not in v for v in s._obs.values())


def test_tpe_observes_the_objective_of_a_trial_that_returned_without_reporting() -> None:
    s = TPESampler(Space(SPACE), 0, [1, 3, 9], "min", 0.0, 2)
    s.trial_ended(0, {"x": 0.2}, "completed", 0.01, 9)
    s.trial_ended(1, {"x": 0.8}, "completed", 0.25, 9)
    s.trial_ended(2, {"x": 0.5}, "failed", None, 0)
    assert s._obs == {9: {0: 0.01, 1: 0.25}} and s.model_level() == 9
    # one that reported is observed through its reports only (its returned value is not added)
    s.observe(3, {"x": 0.3}, 1, 0.7)
    s.trial_ended(3, {"x": 0.3}, "completed", 0.0, 9)
    assert 3 not in s._obs[9] and s._obs[1] == {3: 0.7}


def test_a_tpe_job_whose_train_does_not_report_gets_model_proposals(tmp_path: Path) -> None:
    # the repro: 25 of 25 proposals were random search's; min_points = 1 + 2 = 3, one worker
    result = Tuner(t30.train_returns_without_reporting, SPACE, objective="loss", mode="min",
                   strategy=Hyperband(1, 3, 3, sampler="tpe", random_fraction=0.0), max_jobs=6, seed=0,
                   journal=str(tmp_path / "tpe.db")).fit()
    space = Space(SPACE)
    assert [t.params for t in result.trials[:3]] == [space.sample(0, n) for n in range(3)]
    assert all(t.params != space.sample(0, t.number) for t in result.trials[3:]), [t.params for t in result.trials]
    # a resumed job replays them: the next proposal is what the uninterrupted job would propose
    resumed = Tuner.resume(tmp_path / "tpe.db", max_jobs=7).fit()
    s = TPESampler(space, 0, [1, 3], "min", 0.0, None)
    for t in result.trials:
        s.trial_ended(t.number, t.params, t.status, t.value, t.resource)
    assert resumed.trials[6].params == s(6)


def test_tpe_says_once_when_the_trials_give_it_nothing_to_learn(caplog: pytest.LogCaptureFixture) -> None:
    s = TPESampler(Space(SPACE), 0, [3, 9], "max", 0.0, 2)
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        for number in range(4):  # each reported at step 1 only (below the lowest level, 3), then returned
            s.observe(number, {"x": 0.5}, 1, 0.5)
            s.trial_ended(number, {"x": 0.5}, "completed", 0.5, 1)
    said = [r.getMessage() for r in caplog.records if "sampler='tpe' has no model" in r.getMessage()]
    assert len(said) == 1, said
    assert ("2 trials ended with an objective, but no resource level (3, 9) holds min_points=2 values" in said[0]
            and "report the metric at least once at or past that level" in said[0])


# ---- 3 and 4. warm start: the earlier journal's space, train and identity -------------------------------
@pytest.fixture(scope="module")
def old_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warm") / "old.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=10, seed=0, journal=str(path)).fit()
    return path


def _warm(tmp_path: Path, warm: object, space: dict | None = None, train: object = tt.train_curve) -> Tuner:
    return Tuner(train, space or SPACE, strategy=Hyperband(1, 9, 3), max_jobs=3, seed=5,
                 journal=str(tmp_path / "new.db"), warm_start=warm)


def test_warm_start_from_a_journal_of_other_parameters_is_refused(tmp_path: Path, old_journal: Path) -> None:
    renamed = {"xx": Continuous(0.0, 1.0)}
    with pytest.raises(ConfigError, match=r"^warm_start journal '.*old\.db' tuned the parameters \['x'\], and this "
                                          r"job tunes \['xx'\] \(\['x'\] is not in this job's space; \['xx'\] was not "
                                          r"in that job's\): .*; accepted: an earlier journal of the same objective "
                                          r"and mode over the same parameter names"):
        _warm(tmp_path, str(old_journal), renamed)
    with pytest.raises(ConfigError, match=r"\(\['lr'\] was not in that job's\)"):
        _warm(tmp_path, str(old_journal), {**SPACE, "lr": Continuous(0.01, 1.0)})
    assert not (tmp_path / "new.db").exists()


def test_warm_start_leaves_out_the_trials_outside_this_jobs_ranges(tmp_path: Path, old_journal: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    narrow = {"x": Continuous(0.2, 0.4)}
    old = TuningResult.from_journal(old_journal)
    inside = {t.number for t in old.trials if 0.2 <= t.params["x"] <= 0.4}
    assert 0 < len(inside) < len(old.trials)
    with Journal(old_journal, readonly=True) as j:
        expected = sorted([float(step), value] for t, step, value, *_ in j.reports() if t in inside and step in (1, 3))
    tuner = _warm(tmp_path, str(old_journal), narrow)
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        priors = tuner._load_priors(tuner.strategy.scheduler("max", 5))
    assert sorted(map(list, priors)) == expected
    said = [r.getMessage() for r in caplog.records if "params outside this job's space" in r.getMessage()]
    outside = len(old.trials) - len(inside)
    assert len(said) == 1 and f"{outside} of its {len(old.trials)} trials have params outside this job's space" \
        in said[0] and "outside Continuous(low=0.2, high=0.4, scale='auto'))" in said[0], said
    assert f"their values are left out of the priors ({len(inside)} trial(s) kept)" in said[0]


def test_warm_start_priors_of_reports_between_levels_take_the_first_report_past_each_level(tmp_path: Path) -> None:
    old = tmp_path / "every2.db"
    Tuner(t30.train_reports_every_two, SPACE, objective="loss", mode="min", strategy=RandomSearch(9), max_jobs=2,
          seed=0, journal=str(old)).fit()
    tuner = Tuner(t30.train_reports_every_two, SPACE, objective="loss", mode="min", strategy=Hyperband(1, 9, 3),
                  max_jobs=1, seed=1, journal=str(tmp_path / "new.db"), warm_start=str(old))
    priors = tuner._load_priors(tuner.strategy.scheduler("min", 1))
    xs = [t.params["x"] for t in TuningResult.from_journal(old).trials]
    # steps 2, 4, 6, 8, 9: level 1 takes step 2's value, level 3 step 4's (only an equal step counted before)
    assert sorted(map(tuple, priors)) == sorted((lvl, (x - 0.3) ** 2 + 1.0 / step) for x in xs
                                                for lvl, step in ((1, 2), (3, 4)))


def test_warm_start_from_another_train_is_named(tmp_path: Path, old_journal: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    tuner = _warm(tmp_path, str(old_journal), train=tt.train_five_steps)
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        tuner._load_priors(tuner.strategy.scheduler("max", 5))
    said = [r.getMessage() for r in caplog.records if "this job runs train=" in r.getMessage()]
    assert len(said) == 1 and "ran train=tune_trainables:train_curve, and this job runs " \
                               "train=tune_trainables:train_five_steps" in said[0], said


def test_the_same_warm_start_journal_twice_or_a_copy_is_refused(tmp_path: Path, old_journal: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"lists the journal '.*old\.db' twice: its values would count twice in "
                                          r"the rungs; accepted: each earlier journal once"):
        _warm(tmp_path, [str(old_journal), str(old_journal)])
    monkeypatch.chdir(old_journal.parent)  # the same file spelled two ways
    with pytest.raises(ConfigError, match=r"twice \(as '.*old\.db' and 'old\.db'\)"):
        _warm(tmp_path, [str(old_journal), "old.db"])
    copy = tmp_path / "copy.db"
    shutil.copy(old_journal, copy)
    with pytest.raises(ConfigError, match=r"^warm_start journals '.*old\.db' and '.*copy\.db' hold the same job "
                                          r"\(created at .*: one is a copy of the other\), whose values would count "
                                          r"twice in the rungs; accepted: each earlier job once"):
        _warm(tmp_path, [str(old_journal), str(copy)])
    assert not (tmp_path / "new.db").exists()
    # another job of the same problem is fine
    other = tmp_path / "other.db"
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=2, seed=1, journal=str(other)).fit()
    tuner = _warm(tmp_path, [str(old_journal), str(other)])
    assert len(tuner._load_priors(tuner.strategy.scheduler("max", 5))) > 0


# ---- 5. the report of a killed tuner's journal ------------------------------------------------------
def _killed(path: Path, told_to_stop: bool = False) -> None:
    """A job as kill -9 leaves it: trial 1 still running (its 5 reports journaled), no tuner holding it."""
    Tuner(tt.train_five_steps, SPACE, strategy=RandomSearch(5), max_jobs=2, seed=0, journal=str(path)).fit()
    with Journal(path) as j:
        j._db.execute("UPDATE trials SET status='running', ended=NULL, value=NULL, reason=NULL WHERE number=1")
        if not told_to_stop:
            j._db.execute("UPDATE reports SET stop=0 WHERE trial=1")


def test_a_killed_jobs_report_counts_the_interrupted_units_as_lost(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "killed.db"
    _killed(path)
    before = TuningResult.from_journal(path)
    assert (before.resource_used, before.resource_lost, before.resource_interrupted) == (5, 5, 5)
    line = ("resource lost: 5 (attempts interrupted; 1 trial(s) will rerun on resume, from scratch; "
            "used and lost: 10 in all)")
    assert line in before.summary().splitlines()
    assert "resource used: 5 of 5 without early stopping (100.0%)" in before.summary().splitlines()
    assert main(["tune-report", str(path), "--json"]) == 0
    assert '"resource_lost": 5' in capsys.readouterr().out
    after = Tuner.resume(path).fit()  # what the report said: trial 1 reruns, its 5 units lost
    assert (after.resource_used, after.resource_lost) == (10, 5)


def test_a_killed_jobs_trial_told_to_stop_already_counts_as_used(tmp_path: Path) -> None:
    path = tmp_path / "told.db"
    _killed(path, told_to_stop=True)  # its report at max_resource=5 was journaled with stop set
    before = TuningResult.from_journal(path)
    assert (before.resource_used, before.resource_lost) == (10, 0)
    assert not any(ln.startswith("resource lost:") for ln in before.summary().splitlines())
    after = Tuner.resume(path).fit()  # ended with its units as used, not rerun
    assert (after.resource_used, after.resource_lost) == (10, 0) and after.trials[1].attempt == 1


# ---- 8. the target_value halt and the best line -----------------------------------------------------
def test_the_target_value_halt_names_the_trial_and_says_it_is_the_best_then(tmp_path: Path) -> None:
    result = Tuner(t30.train_value_is_x, SPACE, objective="v", mode="min", max_jobs=50, target_value=0.2, seed=0,
                   journal=str(tmp_path / "target.db")).fit()
    best = result.best
    assert best is not None and best.value <= 0.2
    assert result.halt == (f"target_value=0.2 reached when trial {best.number} ended with {format_value(best.value)} (the "
                           "best then; trials still running may end better)")
    assert f"ended early: {result.halt}" in result.summary().splitlines()


# ---- 9. tune-report --csv; a grid cut short by max_total_resource -------------------------------------
def test_tune_report_csv_has_the_columns_and_values_of_the_dataframe(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "csv.db"
    Tuner(tt.train_dict, SPACE, objective="validation:auc", strategy=Hyperband(1, 9, 3), max_jobs=5, seed=0,
          journal=str(path)).fit()
    df = TuningResult.from_journal(path).dataframe()
    assert main(["tune-report", str(path), "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == list(df.columns) and len(rows) == len(df) + 1
    assert "metric:train:loss" in rows[0] and "x" in rows[0]
    col = {name: i for i, name in enumerate(rows[0])}
    for row, (_, want) in zip(rows[1:], df.iterrows()):
        assert int(row[col["number"]]) == want["number"] and row[col["status"]] == want["status"]
        assert float(row[col["objective"]]) == want["objective"]          # full precision
        assert float(row[col["x"]]) == want["x"]
        assert row[col["rule"]] == "" and row[col["error"]] == ""
    for extra in (["--json"], ["--errors"], ["--full-only"]):
        assert main(["tune-report", str(path), "--csv", *extra]) == 2
        assert f"--csv with {extra[0]}" in capsys.readouterr().err


def test_a_grid_cut_short_by_max_total_resource_says_how_many_points_it_runs(caplog: pytest.LogCaptureFixture) -> None:
    space = {"x": Continuous(0.0, 1.0), "lr": Continuous(0.01, 1.0, scale="log"), "opt": Categorical(["a", "b"]),
             "n": Integer(8, 256, scale="log")}
    tuner = Tuner(tt.train_curve, space, strategy=GridSearch(max_resource=9, num_points=3), max_total_resource=40)
    with caplog.at_level(logging.INFO, logger="tripwire.tune"):
        tuner._warn_partial_grid()
    said = [r for r in caplog.records if r.getMessage().startswith("tripwire.tune: GridSearch: max_total_resource")]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    msg = said[0].getMessage()
    assert ("max_total_resource=40 runs about 5 of the grid's 54 points (each runs to max_resource=9: a grid stops "
            "no trial early), in lexicographic order of ['lr', 'n', 'opt', 'x'] ('x' takes all its values; 'opt' "
            "takes all 2 values (the 2nd at 2 points only); 'lr', 'n' stay at their first value); raise "
            "max_total_resource to 486 for the whole grid") in msg
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tripwire.tune"):
        Tuner(tt.train_curve, space, strategy=GridSearch(max_resource=9, num_points=3),
              max_total_resource=486)._warn_partial_grid()
        Tuner(tt.train_five_steps, space, strategy=GridSearch(num_points=3), max_total_resource=40)._warn_partial_grid()
    said = [r for r in caplog.records if r.getMessage().startswith("tripwire.tune: GridSearch:")]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "max_total_resource=40 may end the job before the grid's 54 points have run" in said[0].getMessage()


def test_a_partial_grid_says_how_far_each_parameter_gets(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 41c: 7 of 18 points said "the points run vary 'depth', 'lr', 'opt' only", every parameter,
    where 'depth' took its second value at the 7th point alone."""
    space = {"depth": Integer(1, 3), "lr": Continuous(0.01, 1.0, scale="log"), "opt": Categorical(["a", "b"])}
    tuner = Tuner(tt.train_curve, space, strategy=GridSearch(max_resource=3, num_points=3), max_total_resource=20)
    with caplog.at_level(logging.INFO, logger="tripwire.tune"):
        tuner._warn_partial_grid()
    (msg,) = [r.getMessage() for r in caplog.records if "GridSearch: max_total_resource" in r.getMessage()]
    assert ("runs about 7 of the grid's 18 points (each runs to max_resource=3: a grid stops no trial early), in "
            "lexicographic order of ['depth', 'lr', 'opt'] ('lr', 'opt' take all their values; 'depth' takes its "
            "first 2 of 3 values (the 2nd at 1 point only)); raise max_total_resource to 54") in msg, msg


def test_a_last_value_reached_at_few_points_is_said(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 41k: 40 of 54 points said "'lr', 'n', 'opt', 'x' take all their values", 'lr' at its
    third value at 4 points only."""
    space = {"x": Continuous(0.0, 1.0), "lr": Continuous(0.01, 1.0, scale="log"), "opt": Categorical(["a", "b"]),
             "n": Integer(8, 256, scale="log")}
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        Tuner(tt.train_curve, space, strategy=GridSearch(max_resource=9, num_points=3), max_jobs=40)._warn_partial_grid()
    assert ("('n', 'opt', 'x' take all their values; 'lr' takes all 3 values (the 3rd at 4 points only))"
            in caplog.text), caplog.text
