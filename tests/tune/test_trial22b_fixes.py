"""Fixes from a new user's trial of the tuner (trial 22b): how a trial's return value reaches the
tuner, and issue 8's snippet with ``executor="dask"`` and no ``if __name__ == "__main__":`` guard.

- A 0-d or 1-element torch tensor (even one attached to the autograd graph, which torch refuses to
  pickle with a RuntimeError) or numpy array returned as the objective is the number it holds; a
  return value that does not pickle, whatever the pickler raises, fails its trial with an error that
  says what and why, and the worker lives on (it died, and the cause reached stderr only).
- A returned dict's tensors and arrays are numbers in ``metrics`` (not ``'tensor(0.6370)'``), and a
  value that does not pickle (a generator, a lock) is kept as its str: the trial keeps its objective.
- ``trial.report(value=np.array([x]))`` is accepted as a 1-element tensor is.
- An unguarded script with ``executor="dask"`` fails with one ConfigError that says to guard the
  entry point, before the journal is touched (JournalLockedError from Dask's workers, then
  "Nanny failed to start").
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tripwire.tune import Categorical, Continuous, GridSearch, LocalExecutor, RandomSearch, Tuner, TuningResult
from tripwire.tune._errors import ConfigError, ReportError
from tripwire.tune._trial import Trial

torch = pytest.importorskip("torch")


# ---- trainables (module level: the workers import them) ---------------------------------------
def train_returns_graph_tensor(params: dict[str, Any], trial: Any) -> Any:
    """``kind``: ``scalar`` returns a 0-d tensor attached to the graph (``loss.mean()`` style);
    ``one`` a 1-element one; ``vector`` a 2-element one (no objective: fails, the worker lives on)."""
    w = torch.tensor(float(params["x"]), requires_grad=True)
    loss = w * 2.0
    trial.report(step=1, value=loss)
    if params["kind"] == "scalar":
        return loss
    if params["kind"] == "one":
        return loss.reshape(1)
    return torch.stack([loss, loss])


def train_returns_rich_dict(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    """A dict as ``trainer.callback_metrics`` (tensors), with numpy arrays and values that do not
    pickle."""
    x = float(params["x"])
    trial.report(step=1, value=np.array([x]))  # a 1-element numpy array, as a 1-element tensor
    return {"val_loss": torch.tensor(x, requires_grad=True) * 1.0, "val_acc": torch.tensor(0.5),
            "epochs": torch.tensor(3), "np_one": np.array([0.25]), "np_0d": np.array(2.5),
            "batches": (b for b in range(3)), "lock": threading.Lock(), "vector": np.array([1.0, 2.0])}


# ---- finding 1: the return value as the objective -----------------------------------------------
def test_a_returned_tensor_on_the_graph_is_its_number_and_a_bad_one_fails_without_killing_the_worker(
        tmp_path: Path) -> None:
    # trial 22b: every trial was `failed (worker_died)`, its error "worker process (pid ...) died with
    # exit code 1"; the cause (RuntimeError: Cowardly refusing to serialize non-leaf tensor) on stderr
    executor = LocalExecutor()
    result = Tuner(train_returns_graph_tensor, space={"x": Categorical([0.25]),
                                                      "kind": Categorical(["vector", "scalar", "one", "vector again"])},
                   objective="loss", mode="min", strategy=GridSearch(max_resource=1), seed=0,
                   journal=str(tmp_path / "j.db"), executor=executor, fail_fast=False).fit()
    assert [t.params["kind"] for t in result.trials] == ["vector", "scalar", "one", "vector again"]
    for t in result.trials:
        if t.params["kind"].startswith("vector"):
            assert t.status == "failed" and t.reason == "failed (error)", (t.reason, t.error)
            assert t.error.startswith("train returned a torch.Tensor of shape (2,), which does not pickle "
                                      "(RuntimeError: Cowardly refusing to serialize non-leaf tensor"), t.error
            assert "a 0-d or 1-element numpy array or torch tensor" in t.error
        else:
            assert t.status == "completed", (t.params, t.reason, t.error)
            assert t.value == pytest.approx(2.0 * t.params["x"], rel=1e-6)
    assert executor.worker_starts == 1  # no worker died: the one worker ran every trial


def test_picklable_result_says_what_did_not_pickle_whatever_the_pickler_raised() -> None:
    from tripwire.tune._trial import number_like, picklable_result

    assert number_like(torch.tensor(0.5, requires_grad=True) * 2) == 1.0

    def dumps(obj: Any) -> bytes:  # a pickler that raises what torch's reduction raises
        if isinstance(obj, Refused) or (isinstance(obj, dict) and any(isinstance(v, Refused) for v in obj.values())):
            raise RuntimeError("refusing to serialize this")
        return pickle.dumps(obj)

    class Refused:
        def __str__(self) -> str:
            return "<refused>"

    out, error = picklable_result(Refused(), dumps)
    assert out is None and error.startswith(
        "train returned a test_trial22b_fixes.test_picklable_result_says_what_did_not_pickle_whatever_the_pickler_"
        "raised.<locals>.Refused, which does not pickle (RuntimeError: refusing to serialize this)"), error
    out, error = picklable_result({"objective": 0.5, "r": Refused()}, dumps)
    assert error is None and out == {"objective": 0.5, "r": "<refused>"}

    def strict(obj: Any) -> bytes:  # one value still refused as its str: the error names its key
        if obj == "<refused>" or (isinstance(obj, dict) and "<refused>" in obj.values()):
            raise TypeError("cannot pickle this str")
        return pickle.dumps(obj)

    out, error = picklable_result({"objective": 0.5, "r": Refused()}, strict)
    assert out is None and error.startswith("train returned a dict whose value under the key 'r' does not pickle "
                                            "(TypeError: cannot pickle this str)"), error


# ---- findings 3 and 6: a returned dict's values, report's value --------------------------------
def test_a_returned_dicts_tensors_are_numbers_and_what_does_not_pickle_is_its_str(tmp_path: Path) -> None:
    # trial 22b: {'val_loss': 'tensor(0.6370)', ...} (strings rounded to 4 digits); a generator in
    # the dict failed the whole trial, its objective lost
    result = Tuner(train_returns_rich_dict, space={"x": Continuous(0.1, 0.9)}, objective="val_loss", mode="min",
                   strategy=RandomSearch(max_resource=1), max_jobs=2, seed=0, journal=str(tmp_path / "j.db")).fit()
    for t in result.trials:
        assert t.status == "completed", (t.reason, t.error)
        assert t.value == pytest.approx(t.params["x"], rel=1e-6)
        m = t.metrics
        assert m["val_loss"] == pytest.approx(t.params["x"], rel=1e-6) and isinstance(m["val_loss"], float)
        assert m["val_acc"] == 0.5 and m["epochs"] == 3 and isinstance(m["epochs"], int)
        assert m["np_one"] == 0.25 and m["np_0d"] == 2.5
        assert m["batches"].startswith("<generator object") and "lock object" in m["lock"]
        assert m["vector"] == "[1. 2.]"  # (not one number: its str, as before)
    df = result.dataframe()
    assert df["metric:val_loss"].dtype == np.float64 and df["metric:val_acc"].dtype == np.float64


def test_report_takes_a_one_element_numpy_array_as_a_one_element_tensor() -> None:
    trial = Trial(0, {}, 1, 9)
    assert trial.report(1, np.array([0.4])) is False
    assert trial.report(2, torch.tensor([0.4])) is False
    assert trial.report(3, np.array(0.4)) is False and trial.report(4, np.float32(0.4)) is False
    with pytest.raises(ReportError, match=r"value=array\(\[1\., 2\.\]\) \(a numpy.ndarray of shape \(2,\)\) must be "
                                          r"a real number: a Python or numpy number, or a 0-d or 1-element numpy "
                                          r"array or torch tensor"):
        trial.report(5, np.array([1.0, 2.0]))
    with pytest.raises(ReportError, match=r"\(a torch.Tensor of shape \(2,\)\) must be a real number"):
        trial.report(5, torch.tensor([1.0, 2.0]))


# ---- finding 2: an unguarded script with executor="dask" ---------------------------------------
UNGUARDED = """
from tripwire.tune import Continuous, RandomSearch, Tuner

def train(params, trial):
    trial.report(step=1, value=params["x"])
    return params["x"]

tuner = Tuner(train, space={"x": Continuous(0, 1)}, strategy=RandomSearch(max_resource=1), max_jobs=2,
              max_parallel_jobs=2, seed=0, journal="tuning_dask.db", executor="dask")
result = tuner.fit()
print("best", result.best.number)
"""


def test_an_unguarded_script_with_executor_dask_says_to_guard_it_and_leaves_no_journal(tmp_path: Path) -> None:
    # trial 22b: each Dask worker re-ran the script: JournalLockedError naming the user's own process,
    # then "Nanny failed to start"; nothing said to guard the entry point
    pytest.importorskip("distributed")
    script = tmp_path / "snippet_dask.py"
    script.write_text(UNGUARDED)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("tripwire._errors.ConfigError: executor='dask' starts a Dask LocalCluster whose worker "
                           f"processes re-run the main script ({script}) as '__mp_main__', and its line 10 "
                           "('result = tuner.fit()') runs Tuner.fit() outside `if __name__ == \"__main__\":`"), out.stderr
    assert "guard the script's entry point" in last
    assert "JournalLockedError" not in out.stderr and "Nanny" not in out.stderr
    assert not (tmp_path / "tuning_dask.db").exists()  # nothing to block the rerun


def test_the_check_reads_the_guard() -> None:
    # (issue 8's snippet under `if __name__ == "__main__":` is left alone)
    import ast

    from tripwire.tune._tuner import _is_name_guard

    tree = ast.parse("if __name__ == '__main__':\n    fit()\nif x:\n    fit()\n")
    assert [_is_name_guard(n.test) for n in tree.body] == [True, False]


def test_a_guarded_script_with_executor_dask_runs_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    script = tmp_path / "snippet_dask.py"
    body = UNGUARDED.split("tuner = Tuner")
    script.write_text(body[0] + 'if __name__ == "__main__":\n' + textwrap.indent("tuner = Tuner" + body[1], "    "))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0 and "best " in out.stdout, out.stdout + out.stderr


def test_fit_in_a_process_multiprocessing_is_starting_says_to_guard(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # the fallback: a process started by another starter (Dask's nanny) re-running the main script
    monkeypatch.setattr(mp.current_process(), "_inheriting", True, raising=False)
    tuner = Tuner(train_returns_graph_tensor, space={"x": Continuous(0, 1), "kind": Categorical(["scalar"])},
                  strategy=RandomSearch(max_resource=1), max_jobs=1, journal=str(tmp_path / "j.db"))
    with pytest.raises(ConfigError, match=r"re-ran the main script as '__mp_main__': the script calls fit\(\) outside "
                                          r"`if __name__ == \"__main__\":`; guard the script's entry point"):
        tuner.fit()
    assert not (tmp_path / "j.db").exists()


def train_returns_a_lock(params: dict[str, Any], trial: Any) -> Any:
    trial.report(step=1, value=0.5)
    return threading.Lock()


def test_on_dask_a_returned_dicts_values_are_converted_and_a_return_that_does_not_pickle_fails(
        tmp_path: Path) -> None:
    # (the Dask executor's tasks convert the return value as the local workers do)
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        rich = Tuner(train_returns_rich_dict, space={"x": Continuous(0.1, 0.9)}, objective="val_loss", mode="min",
                     strategy=RandomSearch(max_resource=1), max_jobs=1, seed=0, journal=str(tmp_path / "d.db"),
                     executor=cluster).fit()
        lock = Tuner(train_returns_a_lock, space={"x": Continuous(0.1, 0.9)}, strategy=RandomSearch(max_resource=1),
                     max_jobs=1, seed=0, journal=str(tmp_path / "l.db"), executor=cluster).fit()
    t = rich.trials[0]
    assert t.status == "completed" and t.value == pytest.approx(t.params["x"], rel=1e-6), (t.reason, t.error)
    assert t.metrics["val_acc"] == 0.5 and t.metrics["np_one"] == 0.25 and "lock object" in t.metrics["lock"]
    assert t.metrics["batches"].startswith("<generator object")
    t = lock.trials[0]
    assert t.status == "failed" and t.reason == "failed (error)", (t.reason, t.error)
    assert t.error.startswith("train returned a _thread.lock, which does not pickle (TypeError: cannot pickle "
                              "'_thread.lock' object)"), t.error


# ---- finding 7: an interrupted attempt's reports are kept ---------------------------------------
def test_an_interrupted_attempts_reports_are_kept_apart_and_count_nowhere(tmp_path: Path) -> None:
    # trial 22b: after a SIGKILL and a resume, attempt 1's 22 reports of trial 37 were deleted (issue 8:
    # the journal keeps "every reported value"); only the meta resource_lost said they existed
    import tune_trainables

    from tripwire.tune import Hyperband
    from tripwire.tune._journal import Journal

    path = tmp_path / "j.db"
    first = Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3), max_jobs=3,
                  seed=0, journal=str(path)).fit()
    with Journal(path) as j:  # trial 2 as a killed tuner leaves it: running, its reports journaled
        j._db.execute("UPDATE trials SET status='running' WHERE number=2")
        # (not told to stop yet: a trial told so is ended on resume, not rerun, trial 27b)
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=2")
        j._db.commit()
        attempt1, rungs1 = j.reports(2), [r for r in j.rung_records() if r[2] == 2]
    assert attempt1
    again = Tuner.resume(path).fit()
    with Journal(path, readonly=True) as j:
        kept = j.earlier_reports()
        assert [(t, a, s, v, st, r) for t, a, s, v, _, st, r in kept] == [
            (2, 1, s, v, st, r) for _, s, v, _, st, r in attempt1]
        assert j.earlier_reports(0) == [] and j.earlier_reports(2) == kept
        rerun = j.reports(2)  # the rerun's own reports, afresh: the rungs and results read these only
        assert [r[1] for r in rerun] == [r[1] for r in attempt1]
        assert [r for r in j.rung_records() if r[2] == 2] == rungs1  # (the rerun's, once: attempt 1's are gone)
        assert j.get_meta("resource_lost") == attempt1[-1][1]
    t2 = again.trials[2]
    assert t2.attempt == 2 and t2.status == first.trials[2].status and t2.value == first.trials[2].value
    assert again.resource_used == first.resource_used
    # the public way to read them (trial 22e: the docs named Journal, which is not public)
    assert again.earlier_reports() == kept and again.earlier_reports(2) == kept and again.earlier_reports(0) == []
    assert TuningResult.from_journal(path).earlier_reports() == kept
    assert TuningResult([], "objective", "max", None).earlier_reports() == []
