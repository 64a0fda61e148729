"""Trial 26b: ``max_no_improvement`` on resume (end order; requeued trials after a met criterion),
failed trials counted, the XGBoost example's run folders, a driver script read from standard input,
and values shown with the digits that tell them apart."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire.tune import Continuous, GridSearch, Integer, RandomSearch, Tuner, TuningResult
from tripwire.tune._format import format_value
from tripwire.tune._hyperband import HyperbandPlan
from tripwire.tune._journal import Journal
from tripwire.tune._result import TrialRecord
from tripwire.tune._scheduler import HyperbandScheduler

HERE = Path(tt.__file__).parent
ROOT = HERE.parent.parent


def _killed_journal(path: Path, ended: dict[int, float], running: list[int], **limits: Any) -> None:
    """The journal a tuner leaves when it is killed with ``kill -9``: trials ``ended`` (number ->
    end time) completed with ``VALUE_OF_I[number]``, trials ``running`` still running."""
    tuner = Tuner(tt.train_value_of_i, {"i": Integer(0, 7)}, strategy=GridSearch(max_resource=3),
                  max_parallel_jobs=2, seed=0, journal=path, **limits)
    with Journal(path, create=True) as j:
        j.init_job(tuner._job())
        j.set_meta("priors", [])
        for n in sorted({*ended, *running}):
            j.start_trial(n, {"i": n}, 0, 100.0)
        for n, when in ended.items():
            j.end_trial(n, "completed", tt.VALUE_OF_I[n], None, 3, 0, "reached max_resource=3", None, when, 5.0)


# ---- 1. a resume counts max_no_improvement in the order the trials ended --------------------------
def test_resume_counts_no_improvement_in_end_order_and_reruns_the_interrupted(tmp_path: Path) -> None:
    # the reproducer's journal: trial 0 (the best) ended after 1-3, then 4 ended: 1 trial since
    # the best, not 4 (number order); 5 and 6 were running when the tuner was killed
    journal = tmp_path / "noimp.db"
    _killed_journal(journal, {1: 101.0, 2: 102.0, 3: 103.0, 0: 104.0, 4: 105.0}, [5, 6], max_no_improvement=4)
    result = Tuner.resume(journal).fit()
    # the interrupted trials were rerun (attempt 2), and the last point of the grid ran: the count
    # reached 4 only when the third of them ended
    assert [(t.number, t.status, t.attempt) for t in result.trials[5:]] == [
        (5, "completed", 2), (6, "completed", 2), (7, "completed", 1)]
    assert result.halt == "best not improved for max_no_improvement=4 trials"
    assert not result.counts()["pending"] and not result.counts()["running"]
    assert "no tuner is running this job" not in result.summary()
    assert result.best is not None and result.best.number == 0


@pytest.mark.parametrize("limits", [{"max_no_improvement": 3}, {"target_value": 10.0}])
def test_a_resume_whose_criterion_is_met_reruns_the_interrupted_trials_and_stops_them(
        tmp_path: Path, limits: dict[str, Any]) -> None:
    # met already (0 the best, then 3 ended without improving it; or the target reached) while 4
    # and 5 were running: a live job stops its running trials at their next report, so the resume
    # reruns them and stops them at their first; none is left pending, no new trial starts
    journal = tmp_path / "met.db"
    _killed_journal(journal, {0: 101.0, 1: 102.0, 2: 103.0, 3: 104.0}, [4, 5], **limits)
    result = Tuner.resume(journal).fit()
    assert result.halt is not None
    assert sorted(t.number for t in result.trials) == [0, 1, 2, 3, 4, 5]
    for t in result.trials[4:]:
        assert (t.status, t.attempt, t.resource) == ("stopped", 2, 1)
        assert t.reason == f"tuning job complete: {result.halt}"
    assert "no tuner is running this job" not in result.summary()
    again = Tuner.resume(journal).fit()  # a finished job: returned as it is
    assert [(t.number, t.status) for t in again.trials] == [(t.number, t.status) for t in result.trials]


def _row(number: int, status: str, value: float | None, ended: float | None, rule: str | None = None) -> dict:
    return {"number": number, "status": status, "value": value, "ended": ended, "rule": rule}


def test_end_order_ties_put_the_best_last_and_unknown_end_times_first() -> None:
    from tripwire.tune._tuner import _in_end_order

    rows = [_row(0, "completed", 0.9, 5.0), _row(1, "completed", 0.2, 5.0), _row(2, "failed", None, 5.0),
            _row(3, "completed", 0.5, None), _row(4, "running", None, None), _row(5, "completed", 0.1, 4.0),
            _row(6, "stopped", 0.99, 5.0, rule="nan_loss")]
    # same end time: the one that cannot improve (failed, rule-stopped) first, the best last, so the
    # count after them is the smallest the live job may have had; no end time: first; running: left out
    assert [r["number"] for r in _in_end_order(rows, "max")] == [3, 5, 2, 6, 1, 0]
    assert [r["number"] for r in _in_end_order(rows, "min")] == [3, 5, 2, 6, 0, 1]


# ---- 2. a failed trial counts towards max_no_improvement ------------------------------------------
def test_failed_trials_count_towards_max_no_improvement(tmp_path: Path) -> None:
    # trial 0 succeeds, every later one raises a ValueError (not certain to repeat: no fail fast)
    result = Tuner(tt.train_first_succeeds, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=3),
                   max_jobs=10, max_no_improvement=2, seed=0, journal=tmp_path / "f.db").fit()
    assert result.halt == "best not improved for max_no_improvement=2 trials"
    assert [t.status for t in result.trials] == ["completed", "failed", "failed"]


# ---- 3. the XGBoost example gives each attempt its own run folder ---------------------------------
class _Captured(Exception):
    pass


def test_xgboost_example_names_run_folders_with_the_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xgboost")
    import tripwire.integrations.xgboost as txgb

    seen: dict[str, Any] = {}

    def callback(**kw: Any) -> None:
        seen.update(kw)
        raise _Captured

    monkeypatch.setattr(txgb, "TripwireCallback", callback)
    spec = importlib.util.spec_from_file_location("tune_xgboost_example", ROOT / "examples" / "tune_xgboost.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)  # type: ignore[union-attr]
    trial = type("T", (), {"number": 3, "attempt": 2, "max_resource": 1, "context": {"dtrain": None, "dvalid": None}})
    with pytest.raises(_Captured):
        example.train({"eta": 0.1}, trial())
    assert seen["out_dir"] == "tune_xgboost_runs/trial-3-2"


# ---- 4. a driver script read from standard input ---------------------------------------------------
def _stdin(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-"], input=textwrap.dedent(script).format(here=str(HERE)),
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)


def test_a_driver_script_on_standard_input_runs_an_importable_train(tmp_path: Path) -> None:
    # spawn re-ran the '<stdin>' main script in each worker (FileNotFoundError), and the error
    # blamed the train function's module; a train function of an importable module needs no main
    done = _stdin(tmp_path, """
        import sys
        sys.path.insert(0, {here!r})
        import tune_trainables as tt
        from tripwire.tune import GridSearch, Integer, Tuner
        print(Tuner(tt.train_value_of_i, {{"i": Integer(0, 1)}}, strategy=GridSearch(), seed=0,
                    journal="j.db").fit().summary())
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tuning job: 2 trials (completed 2)" in done.stdout
    assert "FileNotFoundError" not in done.stderr


def test_a_train_defined_on_standard_input_is_refused_before_any_worker(tmp_path: Path) -> None:
    done = _stdin(tmp_path, """
        from tripwire.tune import Continuous, Tuner
        def train(params, trial):
            return 0.0
        Tuner(train, {{"x": Continuous(0.0, 1.0)}}, max_jobs=1, journal="j.db").fit()
    """)
    assert done.returncode == 1
    assert "ConfigError: train=<function train" in done.stderr
    assert "is defined in a __main__ that worker processes cannot import (python -c, standard input" in done.stderr


def test_dask_local_cluster_refuses_a_main_script_on_standard_input(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    done = _stdin(tmp_path, """
        import sys
        sys.path.insert(0, {here!r})
        import tune_trainables as tt
        from tripwire.tune import GridSearch, Integer, Tuner
        Tuner(tt.train_value_of_i, {{"i": Integer(0, 1)}}, strategy=GridSearch(), executor="dask",
              journal="j.db").fit()
    """)
    assert done.returncode == 1
    assert ("ConfigError: executor='dask': the main script is standard input (python - < script.py); the worker "
            "processes of Dask's LocalCluster start with 'spawn', which re-runs the main script in each of them, "
            "and cannot run it: save the script to a file and run that (python script.py), or use "
            "executor='local'") in done.stderr


# ---- 5. values shown with the digits that tell them apart -----------------------------------------
@pytest.mark.parametrize(("value", "shown"), [
    (0.99999999996, "0.99999999996"), (0.99991, "0.99991"), (1.0, "1"), (0.5, "0.5"), (1234567.0, "1234567"),
    (0.1 + 0.2, "0.3"), (0.3211989998817444, "0.321199"),  # np.float32(0.321199): read back as the float32
    (123.456789012345, "123.456789012"), (float("nan"), "nan"), (float("-inf"), "-inf")])
def test_format_value(value: float, shown: str) -> None:
    assert format_value(value) == shown


def _record(number: int, value: float) -> TrialRecord:
    return TrialRecord(number, {"lr": 0.1 * (number + 1)}, "completed", value, None, 3, 0, 0, "completed", None, 1,
                       1.0, 2.0)


def test_summary_top_live_view_and_reasons_tell_near_values_apart(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    result = TuningResult([_record(0, 0.99991), _record(1, 0.99999999996)], "acc", "max", 3)
    assert "best: trial 1 acc=0.99999999996 params=" in result.summary()
    # tune-report --top
    journal = tmp_path / "j.db"
    tuner = Tuner(tt.train_value_of_i, {"i": Integer(0, 7)}, strategy=GridSearch(max_resource=3), objective="acc",
                  journal=journal)
    with Journal(journal, create=True) as j:
        j.init_job(tuner._job())
        for n, v in ((0, 0.99991), (1, 0.99994), (2, 0.99999999996)):
            j.start_trial(n, {"i": n}, 0, 1.0)
            j.end_trial(n, "completed", v, None, 3, 0, "completed", None, 2.0, 1.0)
    from tripwire.tune._cli import _report
    from tripwire.tune._view import LiveView as _LiveView

    assert _report(argparse.Namespace(journal=str(journal), top=3, errors=False, command="tune-report")) == 0
    out = capsys.readouterr().out
    assert [line.split()[3] for line in out.splitlines() if line.startswith("  trial ")] == [
        "acc=0.99999999996", "acc=0.99994", "acc=0.99991"]
    # the live view's "best so far"
    pytest.importorskip("rich")
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(_LiveView("t")._render({"best": 0.99999999996}))
    assert "0.99999999996" in console.export_text()
    # a rung decision's reason
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    a, b = [n for n in range(500) if s.bracket(n) == 0][:2]
    s.on_report(a, 1, 0.99999999997)
    assert "value 0.99999999996 has 1 better of 2" in s.on_report(b, 1, 0.99999999996).reason
