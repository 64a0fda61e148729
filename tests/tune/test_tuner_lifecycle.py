"""The tuning process's life and its workers' (real processes): SIGTERM and SIGKILL of the tuner
leave no worker behind, a script without a ``__main__`` guard runs (the issue's own snippet), a
journal whose job never started a trial does not block the next run, ``__main__:train`` resumes in
its own script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import tune_trainables

from tripwire.tune import Continuous, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal

HERE = Path(tune_trainables.__file__).parent

HANG = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import tune_trainables as tt
    from tripwire.tune import Continuous, RandomSearch, Tuner

    if __name__ == "__main__":
        Tuner(tt.train_sleeps, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=3), max_jobs=4,
              max_parallel_jobs=2, seed=0, journal={journal!r}, trial_timeout=60).fit()
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_hanging_job(tmp_path: Path) -> tuple[subprocess.Popen, Path, list[int]]:
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    journal = tmp_path / "hang.db"
    script = tmp_path / "hang.py"
    script.write_text(HANG.format(here=str(HERE), journal=str(journal)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": "", "TRIPWIRE_TUNE_PIDS": str(pids_dir)})
    deadline = time.monotonic() + 60
    while len(os.listdir(pids_dir)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    workers = [int(p) for p in os.listdir(pids_dir)]
    assert len(workers) == 2 and proc.poll() is None, proc.stderr.read().decode() if proc.poll() is not None else workers
    return proc, journal, workers


def _gone(pids: list[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _kill_left(pids: list[int]) -> None:
    for p in pids:  # the test's own workers, should a fix regress
        if _alive(p):
            os.kill(p, signal.SIGKILL)


def test_sigterm_stops_the_workers_and_leaves_the_trials_pending(tmp_path: Path) -> None:
    proc, journal, workers = _start_hanging_job(tmp_path)
    try:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - t0
        left = _gone(workers, 5)
    finally:
        _kill_left(workers)
    stderr = proc.stderr.read().decode()
    assert proc.returncode == -signal.SIGTERM, stderr       # the signal still ends the process, after the clean-up
    assert left == [], f"workers {left} outlived the tuner"
    assert took < 10
    assert "SIGTERM: the workers were stopped" in stderr
    with Journal(journal, readonly=True) as j:
        trials = j.trials()
        assert j._db.execute("SELECT COUNT(*) FROM lock").fetchone() == (0,)   # released
    assert [(t["number"], t["status"], t["attempt"]) for t in trials] == [(0, "pending", 2), (1, "pending", 2)]
    pending = Tuner.resume(journal, max_jobs=2)                      # resume reruns them under their numbers
    assert pending.max_jobs == 2


def test_sigkill_of_the_tuner_kills_its_workers(tmp_path: Path) -> None:
    proc, journal, workers = _start_hanging_job(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        left = _gone(workers, 5)
    finally:
        _kill_left(workers)
    assert left == [], f"workers {left} outlived the SIGKILLed tuner"
    with Journal(journal, readonly=True) as j:                       # resume semantics unchanged: rerun later
        assert [t["status"] for t in j.trials()] == ["running", "running"]
    # the workers' stack files (for a timed-out trial's stack) were left behind; the next job's
    # executor removes those of workers that are gone, and keeps a live process's
    from tripwire.tune._executor import _stack_file, _sweep_stack_files

    stale = [_stack_file(pid) for pid in workers]
    assert all(os.path.exists(p) for p in stale)
    live = _stack_file(os.getpid())
    Path(live).write_text("")
    try:
        removed = _sweep_stack_files()
        assert sorted(p for p in removed if p in stale) == sorted(stale) and os.path.exists(live)
    finally:
        os.unlink(live)


UNGUARDED = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import tune_trainables as tt
    from tripwire.tune import Continuous, RandomSearch, Tuner

    tuner = Tuner(tt.train_curve, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=3), max_jobs=3,
                  max_parallel_jobs=2, seed=0, journal={journal!r})
    {call}
""")


ISSUE_SNIPPET = textwrap.dedent("""
    from tripwire.tune import Tuner, Integer, Continuous, Hyperband

    SEEN = []  # module state the workers build as the script runs up to Tuner.fit()

    class Scale:  # a class of the script: trials return its instances
        def __init__(self, value):
            self.value = value

    def train(params: dict, trial) -> float:
        val = 0.0
        for epoch in range(1, trial.max_resource + 1):
            val = 1 - (params["eta"] - 0.3) ** 2 - 0.01 * params["max_depth"] + 0.001 * epoch
            if trial.report(step=epoch, value=val):
                break
        return {{"objective": val, "scale": Scale(params["max_depth"]).value}}

    tuner = Tuner(train, space={{"eta": Continuous(0.01, 1, scale="log"), "max_depth": Integer(1, 10)}},
                  objective="objective", mode="max",
                  strategy=Hyperband(min_resource=1, max_resource=9, reduction_factor=3),
                  max_jobs=8, max_parallel_jobs=2, seed=0, journal={journal!r})
    result = tuner.fit()
    print("trials", len(result.trials), "best", result.best.number)
    open({after!r}, "a").write("after fit\\n")  # the script's code after fit: the tuning process only
""")


def test_an_unguarded_script_runs_as_the_issue_writes_it(tmp_path: Path) -> None:
    """Issue 8's snippet has no ``if __name__ == "__main__":`` guard. spawn re-ran the script in every
    worker, whose Tuner.fit() then failed the job (a TuneError naming the guard); a worker now runs
    the script itself up to its Tuner.fit(), with what it defined above."""
    journal, after = tmp_path / "tuning.db", tmp_path / "after.txt"
    script = tmp_path / "job.py"
    script.write_text(ISSUE_SNIPPET.format(journal=str(journal), after=str(after)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("trials 8 best "), done.stdout
    assert after.read_text() == "after fit\n"  # once: no worker ran past Tuner.fit()
    assert "Traceback" not in done.stderr, done.stderr
    result = TuningResult.from_journal(journal)
    assert [t.status for t in result.trials].count("failed") == 0


def test_unguarded_script_with_train_from_a_module_runs_and_the_guarded_one_too(tmp_path: Path) -> None:
    journal = tmp_path / "tuning1.db"
    script = tmp_path / "job.py"
    env = {**os.environ, "PYTHONPATH": ""}
    script.write_text(UNGUARDED.format(here=str(HERE), journal=str(journal), call="print(len(tuner.fit().trials))"))
    first = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "3" and "Traceback" not in first.stderr

    journal.unlink()
    script.write_text(UNGUARDED.format(here=str(HERE), journal=str(journal),
                                       call='if __name__ == "__main__":\n        print(len(tuner.fit().trials))'))
    second = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "3"


def test_a_job_that_never_started_a_trial_is_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "j.db"
    with Journal(path, create=True) as j:
        j.init_job({"train": "old:train", "objective": "objective", "mode": "max"})
    with caplog.at_level("INFO", logger="tripwire.tune"):
        result = Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3),
                       max_jobs=2, seed=0, journal=str(path)).fit()
    assert len(result.trials) == 2 and result.job["train"] == "tune_trainables:train_curve"
    assert "held a tuning job that never started a trial; the new job replaces it" in caplog.text


def test_resume_resolves_main_train_in_the_running_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.db"
    Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=2, seed=0,
          journal=str(path)).fit()
    with Journal(path) as j:   # as a script's job journals it: train defined in __main__
        j.set_meta("job", {**j.job, "train": "__main__:train", "setup": "__main__:setup"})
    monkeypatch.setattr(sys.modules["__main__"], "train", tune_trainables.train_curve, raising=False)
    monkeypatch.setattr(sys.modules["__main__"], "setup", tune_trainables.setup_data, raising=False)
    tuner = Tuner.resume(path, max_jobs=3)
    assert tuner.train is tune_trainables.train_curve and tuner.setup is tune_trainables.setup_data
    assert [t.status for t in tuner.fit().trials] == ["completed"] * 3
    monkeypatch.delattr(sys.modules["__main__"], "train")           # a script without it: the clear error stays
    with pytest.raises(ValueError, match=r"the journal names train='__main__:train', which cannot be imported here"):
        Tuner.resume(path, max_jobs=4).fit()
    assert TuningResult.from_journal(path).trials[2].attempt == 1
    # trial 24d: a finished job's result needs no train: returned from a script without it
    assert [t.number for t in Tuner.resume(path).fit().trials] == [0, 1, 2]
    monkeypatch.delattr(sys.modules["__main__"], "setup")  # nor a setup, which was left out silently before
    monkeypatch.setattr(sys.modules["__main__"], "train", tune_trainables.train_curve, raising=False)
    assert len(Tuner.resume(path).fit().trials) == 3
    with pytest.raises(ValueError, match=r"the journal names setup='__main__:setup', which cannot be found here; "
                                         r"pass Tuner.resume\(journal, setup=...\)"):
        Tuner.resume(path, max_jobs=4).fit()
    assert len(TuningResult.from_journal(path).trials) == 3


def test_resume_refuses_another_scripts_train(tmp_path: Path) -> None:
    # trial 17b: a second script with its own `train` resumed the first script's journal: its
    # function ran the new trials (1000.0 each), mixed into the job without a word
    job = tmp_path / "a.py"
    job.write_text(textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(HERE)!r})
        from tripwire.tune import Continuous, RandomSearch, Tuner
        def train(params, trial):
            return params["x"]
        if __name__ == "__main__":
            Tuner(train, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(3), max_jobs=2, seed=0,
                  journal={str(tmp_path / "a.db")!r}).fit()
    """))
    other = tmp_path / "b.py"
    other.write_text(textwrap.dedent(f"""
        from tripwire.tune import Tuner
        def train(params, trial):
            return 1000.0
        if __name__ == "__main__":
            print(len(Tuner.resume({str(tmp_path / "a.db")!r}).fit().trials))  # finished: its result (trial 24d)
            try:
                Tuner.resume({str(tmp_path / "a.db")!r}, max_jobs=4).fit()
            except ValueError as e:
                print(e)
            r = Tuner.resume({str(tmp_path / "a.db")!r}, max_jobs=4, train=train).fit()  # on purpose: allowed
            print(sorted(t.value for t in r.trials))
    """))
    same = tmp_path / "a_again.py"
    same.write_text(job.read_text().replace("Tuner(train,", "Tuner.resume(").split("Tuner.resume(")[0]
                    + f"    print(len(Tuner.resume({str(tmp_path / 'a.db')!r}, max_jobs=3).fit().trials))\n")
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    first = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    out = subprocess.run([sys.executable, str(other)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    finished, said, values = out.stdout.strip().splitlines()
    assert finished == "2", out.stdout
    assert f"the journal's train is __main__:train defined in {os.path.realpath(job)}" in said, said
    assert f"train is defined in {os.path.realpath(other)}" in said and "train=..." in said, said
    assert values.endswith("1000.0, 1000.0]"), values
