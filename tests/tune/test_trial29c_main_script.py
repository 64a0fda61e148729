"""Trial 29c, findings 1 and 2: a worker of the local executor runs the main script itself up to the
first ``Tuner.fit()`` it reaches, then looks ``train`` up there. A script that redefined ``train``
before a second ``fit()`` ran the FIRST ``train`` in the second job (wrong results, no warning); a
``train_b`` defined after the first ``fit()`` failed with a bare ``AttributeError: Can't get
attribute 'train_b' on <module '__mp_main__'>``. A worker now checks what it found against what the
tuning process runs, and the job fails with a TuneError that says what differs and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tripwire.tune import TuningResult

HEADER = textwrap.dedent("""\
    from tripwire.tune import Continuous, RandomSearch, Tuner

    def job(train, journal, **kw):
        return Tuner(train, space={"lr": Continuous(0.1, 1)}, objective="acc", strategy=RandomSearch(max_resource=1),
                     max_jobs=2, max_parallel_jobs=1, seed=0, journal=journal, **kw).fit()
    """)


def _run(script: Path, body: str) -> subprocess.CompletedProcess[str]:
    script.write_text(HEADER + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                          cwd=script.parent, env={**os.environ, "PYTHONPATH": ""})


def _line_of(script: Path, text: str, nth: int = 1) -> int:
    lines = [i for i, ln in enumerate(script.read_text().splitlines(), 1) if text in ln]
    return lines[nth - 1]


def test_a_train_redefined_before_a_second_fit_is_refused_not_run_in_its_place(tmp_path: Path) -> None:
    script = tmp_path / "two_same_name.py"
    done = _run(script, """
        def train(params, trial):          # job 1: objective 1.0
            return 1.0

        r1 = job(train, "same1.db")
        print("job 1", [t.value for t in r1.trials], flush=True)

        def train(params, trial):          # job 2: objective = lr
            return params["lr"]

        r2 = job(train, "same2.db")
        print("job 2", [t.value for t in r2.trials], flush=True)
    """)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "job 1 [1.0, 1.0]" in done.stdout and "job 2" not in done.stdout  # (before: job 2 [1.0, 1.0])
    first, second = _line_of(script, "def train"), _line_of(script, "def train", 2)
    fit1 = _line_of(script, 'r1 = job(train')
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"tripwire.tune._errors.TuneError: train 'train' (the function this job runs as train, defined at line "
        f"{second} of {script}) is not the 'train' the worker processes have: a worker runs the main script itself, "
        f"as '__mp_main__', up to the first Tuner.fit() it reaches (line {fit1} of {script}), and takes train and "
        f"setup from what it defined up to there, and there 'train' is the definition at line {first}, which would "
        "run in this job's trials instead. Give each job's train and setup a name of its own (train_a, train_b), "
        "defined at module level outside `if __name__ == \"__main__\":`, and put the code that runs the jobs (every "
        "Tuner.fit()) under `if __name__ == \"__main__\":`, or run each job from a script of its own")
    assert TuningResult.from_journal(tmp_path / "same2.db").trials == []  # no trial ran the wrong function


def test_a_train_defined_after_the_first_fit_names_the_cause_and_the_guard(tmp_path: Path) -> None:
    script = tmp_path / "two_jobs.py"
    done = _run(script, """
        def train_a(params, trial):
            return 1.0

        job(train_a, "a.db")

        def train_b(params, trial):
            return params["lr"]

        job(train_b, "b.db")
    """)
    assert done.returncode == 1
    assert "Can't get attribute" not in done.stderr
    assert (f"TuneError: train 'train_b' (the function this job runs as train, defined at line "
            f"{_line_of(script, 'def train_b')} of {script}) cannot be found in the worker processes: a worker runs "
            f"the main script itself, as '__mp_main__', up to the first Tuner.fit() it reaches (line "
            f"{_line_of(script, 'job(train_a')} of {script}), and takes train and setup from what it defined up to "
            "there, and there 'train_b' is not defined yet: it is defined below that fit(). Define 'train_b' at "
            "module level, outside `if __name__ == \"__main__\":`, and put the code that runs the jobs (every "
            "Tuner.fit()) under `if __name__ == \"__main__\":`, or run each job from a script of its own"
            ) in done.stderr


def test_a_second_unguarded_fit_is_refused_its_workers_hold_the_script_as_at_the_first(tmp_path: Path) -> None:
    # the same train, but module state set between the two fits: the workers would read SCALE = 1
    script = tmp_path / "two_fits.py"
    done = _run(script, """
        SCALE = 1

        def train(params, trial):
            return params["lr"] * SCALE

        job(train, "one.db")
        SCALE = 100
        job(train, "two.db")
    """)
    assert done.returncode == 1
    one, two = _line_of(script, 'job(train, "one.db")'), _line_of(script, 'job(train, "two.db")')
    assert (f"TuneError: this Tuner.fit() (line {two} of {script}) is not the "
            "one where the worker processes stop: a worker runs the main script itself, as '__mp_main__', up to the "
            f"first Tuner.fit() it reaches (line {one} of {script}), and takes "
            "train and setup from what it defined up to there, so their module would be the script as it was at "
            "that call (its data, settings and functions), not as it is at this one; put the code that runs the jobs "
            "(every Tuner.fit()) under `if __name__ == \"__main__\":`, or run each job from a script of its own"
            ) in done.stderr
    assert [t.status for t in TuningResult.from_journal(tmp_path / "one.db").trials] == ["completed"] * 2


def test_a_loops_second_fit_from_the_same_line_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    done = _run(script, """
        def train(params, trial):
            return params["lr"]

        for name in ("one.db", "two.db"):
            job(train, name)
    """)
    assert done.returncode == 1
    assert f"this Tuner.fit() (line {_line_of(script, 'job(train, name)')} of {script}, call 2 from that line) " \
           "is not the one where the worker processes stop" in done.stderr


def test_a_guarded_script_runs_both_jobs_each_with_its_own_train(tmp_path: Path) -> None:
    script = tmp_path / "guarded.py"
    done = _run(script, """
        def train_a(params, trial):
            return 1.0

        def train_b(params, trial):
            return params["lr"]

        if __name__ == "__main__":
            print("a", [t.value for t in job(train_a, "a.db").trials])
            r = job(train_b, "b.db")
            print("b", [t.value == t.params["lr"] for t in r.trials])
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["a [1.0, 1.0]", "b [True, True]"]


def test_a_guarded_script_that_redefines_train_at_module_level_is_refused_for_the_first_job(tmp_path: Path) -> None:
    # the worker runs all the module-level code outside the guard: it has the LAST train
    script = tmp_path / "guarded_redefined.py"
    done = _run(script, """
        def train(params, trial):
            return 1.0

        if __name__ == "__main__":
            job(train, "one.db")

        def train(params, trial):
            return params["lr"]
    """)
    assert done.returncode == 1
    assert (f"train 'train' (the function this job runs as train, defined at line {_line_of(script, 'def train')} "
            f"of {script}) is not the 'train' the worker processes have: a worker runs the main script's "
            "module-level code itself, as '__mp_main__' (not what is under `if __name__ == \"__main__\":`), and "
            "takes train and setup from what it defined, and there 'train' is the definition at line "
            f"{_line_of(script, 'def train', 2)}, which would run in this job's trials instead.") in done.stderr


def test_a_train_defined_under_the_guard_says_so(tmp_path: Path) -> None:
    script = tmp_path / "inside.py"
    done = _run(script, """
        if __name__ == "__main__":
            def train(params, trial):
                return 1.0

            job(train, "one.db")
    """)
    assert done.returncode == 1
    assert "Can't get attribute" not in done.stderr
    assert ("cannot be found in the worker processes: a worker runs the main script's module-level code itself, as "
            "'__mp_main__' (not what is under `if __name__ == \"__main__\":`), and takes train and setup from what it "
            "defined, and there 'train' is not defined (it is defined under `if __name__ == \"__main__\":`, or by code "
            "that only runs there). Define 'train' at module level, outside `if __name__ == \"__main__\":`"
            ) in done.stderr


def test_a_setup_and_a_partials_function_are_checked_too(tmp_path: Path) -> None:
    script = tmp_path / "setup_partial.py"
    done = _run(script, """
        import functools

        def setup():
            return 1.0

        def base(params, trial, k):
            return k

        job(functools.partial(base, k=1.0), "one.db", setup=setup)
        print("job 1 done", flush=True)

        def setup():
            return 2.0

        def base(params, trial, k):
            return -k

        job(functools.partial(base, k=1.0), "two.db", setup=setup)
    """)
    assert done.returncode == 1 and "job 1 done" in done.stdout
    # 'base' comes first (pickled with train); either is named with both its lines
    assert (f"'base' (which this job's train needs, defined at line {_line_of(script, 'def base', 2)} of {script}) "
            "is not the 'base' the worker processes have") in done.stderr
    assert f"there 'base' is the definition at line {_line_of(script, 'def base')}" in done.stderr


def test_a_script_with_annotations_runs_in_a_worker_as_python_runs_it(tmp_path: Path) -> None:
    # the worker compiled the script with the executor module's `from __future__ import annotations`:
    # its annotations were strings there, objects in the tuning process
    script = tmp_path / "annotations.py"
    done = _run(script, """
        def f(x: int) -> None:
            pass

        KIND = f.__annotations__["x"]

        def train(params, trial):
            return 1.0 if KIND is int else 0.0

        print([t.value for t in job(train, "one.db").trials])
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0, 1.0]"


IDENTITY = textwrap.dedent("""
    import sys
    from tripwire.tune._executor import _identity
    ns = {}
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec", dont_inherit=True), ns)
    print(_identity(ns["train"]))
""")


@pytest.mark.parametrize("seeds", [("1", "2")])
def test_the_identity_of_a_definition_is_the_same_in_two_processes_and_differs_for_another(
        tmp_path: Path, seeds: tuple[str, str]) -> None:
    # a frozenset constant's order depends on the process's string hash seed: not part of the identity
    src = tmp_path / "train_src.py"
    src.write_text("def train(params, trial):\n    return 1.0 if params['k'] in {'a', 'b', 'c', 'd'} else 2.0\n")
    other = tmp_path / "other_src.py"
    other.write_text("def train(params, trial):\n    return 1.0 if params['k'] in {'a', 'b', 'c', 'e'} else 2.0\n")
    probe = tmp_path / "probe.py"
    probe.write_text(IDENTITY)

    def ident(path: Path, seed: str) -> str:
        out = subprocess.run([sys.executable, str(probe), str(path)], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": ""})
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert ident(src, seeds[0]) == ident(src, seeds[1])
    assert ident(src, seeds[0]) != ident(other, seeds[0])


def test_a_wrapped_function_is_told_apart_by_what_it_wraps() -> None:
    import functools

    from tripwire.tune._executor import _identity

    def deco(fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def wrapper(*a):  # type: ignore[no-untyped-def]
            return fn(*a)
        return wrapper

    def define(body: str):  # type: ignore[no-untyped-def]
        ns: dict = {}
        exec(compile(f"def train(params, trial):\n    return {body}\n", "job.py", "exec"), ns)
        return ns["train"]

    # the same name, line and bytecode: only a constant differs, behind the same wrapper
    assert _identity(deco(define("1.0"))) != _identity(deco(define("2.0")))
    assert _identity(deco(define("1.0"))) == _identity(deco(define("1.0")))


def test_only_main_functions_and_classes_are_recorded() -> None:
    import tune_trainables as tt

    from tripwire.tune._executor import _main_objects

    assert _main_objects("train", tt.train_curve) == []
