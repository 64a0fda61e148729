"""Session 43 (trial 43a), the core's readers and writers:

- A step of 2**63 or more was taken by ``begin_step``; its record made the run unreadable at close
  (a raw ``OverflowError`` from every reader, the good steps before it lost to them). Such a step is
  now refused where it is given, as -1 is; 2**63 - 1 is kept.
- ``tripwire.request_stop`` on a path that holds no run (a mistyped one) made a directory there and
  wrote a request no training reads, without a word. It is now a ``RunNotFoundError``.
- ``wall_times``, ``global_steps`` and ``steps_between`` read a mode that is none (a tensor's name
  given by mistake) as one with no records; they now name it, as ``steps`` does.
- ``tripwire inspect --tensors`` drew a name holding a newline as two rows; control characters are
  now written as escapes.
- ``wall_times``, ``global_steps`` and ``steps_between`` read a worker the run does not have as one with
  no records (trial 43f); they now name it, as ``series`` does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError


def test_a_step_beyond_64_bits_is_refused_and_the_run_stays_readable(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses"])
    session.step("train", 5, {"loss": (np.float32(0.5), "losses")})
    with pytest.raises(ConfigError, match=r"begin_step: step=9223372036854775808; accepted: an integer from 0 to "
                                          r"2\*\*63 - 1"):
        session.begin_step("train", 2**63)
    session.step("train", 2**63 - 1, {"loss": (np.float32(0.25), "losses")})
    with pytest.raises(ConfigError, match=r"begin_step: the next train step counted is 9223372036854775808, past the "
                                          r"last a run holds \(2\*\*63 - 1\)"):
        session.begin_step("train")  # (counted on: trial 43f)
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    assert [int(s) for s in run.series("loss")[0]] == [5, 2**63 - 1]


def test_request_stop_refuses_a_path_that_holds_no_run(tmp_path: Path) -> None:
    finding = tripwire.Finding("manual", 0, "train", "stop please")
    with pytest.raises(tripwire.RunNotFoundError, match=r"request_stop: no tripwire run at '.*no_such_run': the "
                                                        r"directory does not exist; accepted: the directory of a run"):
        tripwire.request_stop(tmp_path / "no_such_run", finding)
    assert not (tmp_path / "no_such_run").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(tripwire.RunNotFoundError, match=r"run\.json is missing"):
        tripwire.request_stop(tmp_path / "empty", finding)
    assert list((tmp_path / "empty").iterdir()) == []


def test_the_step_readers_name_a_mode_that_is_none(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses"])
    session.step("train", 0, {"loss": (np.float32(0.5), "losses")})
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    for read in (lambda: run.wall_times("loss"), lambda: run.global_steps("loss"),
                 lambda: run.steps_between("loss", 0, 5)):
        with pytest.raises(ConfigError, match=r"^mode: got 'loss'; accepted: train, eval, test, predict"):
            read()
    # (a mode with no records is still an empty answer)
    assert len(run.wall_times("eval")[0]) == 0 and len(run.global_steps("test")) == 0
    assert run.steps_between("eval", None, 3) == [] and list(run.wall_times("train")[0]) == [0]


def test_inspect_tensors_writes_control_characters_of_a_name_as_escapes(tmp_path: Path, capsys) -> None:
    from tripwire._cli import main

    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["metrics"])
    session.step("train", 0, {"new\nline": (np.float32(1.0), "metrics"), "tab\tname": (np.float32(2.0), "metrics")})
    session.close()
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "run"), "--tensors"]) == 0
    out = capsys.readouterr().out
    assert "new\\nline" in out and "tab\\tname" in out
    assert not any(line.strip() == "line" or line.startswith(" line") for line in out.splitlines())


def test_the_step_readers_name_a_worker_the_run_does_not_have(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses"])
    session.step("train", 0, {"loss": (np.float32(0.5), "losses")})
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    for worker in (7, "0"):
        for read in (lambda: run.wall_times("train", worker), lambda: run.global_steps("train", worker),
                     lambda: run.steps_between("train", 0, 5, worker)):
            with pytest.raises(ConfigError, match=r"^worker: got .*; accepted: one of the run's workers \(0\)"):
                read()
    assert list(run.wall_times("train", 0)[0]) == [0] and run.wall_times("eval", 0)[0].size == 0


def test_request_stop_says_a_file_is_a_file(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses"])
    session.close()
    finding = tripwire.Finding("manual", 0, "train", "stop please")
    with pytest.raises(tripwire.RunNotFoundError, match=r"run\.json': it is a file \(its folder '.*run' is a run\); "
                                                        r"accepted: the directory of a run"):
        tripwire.request_stop(tmp_path / "run" / "run.json", finding)
