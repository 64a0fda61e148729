"""Fixes from a fresh user's trial of the tuner on Dask and the CLI (trial 16a): a failed trial's
error summed up by its exception line (a Dask deserialization error ended in a URL) and counted
towards fail fast; an unreachable scheduler address named in one line; strategy values named
under ``strategy``; ``--resume`` naming the nested key that changed; ``error:`` in the CLI's
messages. (The killed tuner's trials freeing their workers: tests/tune/test_dask_forms.py.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tripwire.tune import Continuous, Hyperband, RandomSearch, Tuner
from tripwire.tune._cli import register
from tripwire.tune._errors import ConfigError, TuneError, error_summary
from tripwire.tune._strategy import strategy_from_dict
from tripwire.tune._tuner import _certain_to_repeat

DASK_TRACEBACK = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/distributed/scheduler.py", line 5020, in update_graph
    expr = deserialize(expr_ser.header, expr_ser.frames)
    ^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/distributed/protocol/pickle.py", line 95, in loads
    return pickle.loads(x)
AttributeError: Can't get attribute 'train2' on <module 'mod3' from '/tmp/mod3.py'>

The above exception was the direct cause of the following exception:

RuntimeError: Error during deserialization of the task graph. This frequently
occurs if the Scheduler and Client have different environments.
For more information, see
https://docs.dask.org/en/stable/deployment-considerations.html#consistent-software-environments
"""


def test_a_failed_trials_error_is_its_exception_line_with_its_cause() -> None:
    line = error_summary(DASK_TRACEBACK)
    assert line == ("RuntimeError: Error during deserialization of the task graph. (cause: AttributeError: Can't get "
                    "attribute 'train2' on <module 'mod3' from '/tmp/mod3.py'>)")
    assert _certain_to_repeat(line)  # every trial fails alike: the job ends (all 12 of 12 ran before)
    assert error_summary('Traceback (most recent call last):\n  File "t.py", line 3, in train\n    x()\n'
                         "ValueError: bad\n") == "ValueError: bad"
    during = ('Traceback (most recent call last):\n  File "t.py", line 1\nKeyError: 1\n\nDuring handling of the above '
              'exception, another exception occurred:\n\nTraceback (most recent call last):\n  File "t.py", line 2\n'
              "tripwire.ConfigError: trial_metric: 'auc' is not in the logs\n")
    assert error_summary(during) == "tripwire.ConfigError: trial_metric: 'auc' is not in the logs"  # (no cause: not direct)
    assert error_summary("trial 3 ran past trial_timeout=1 s") == "trial 3 ran past trial_timeout=1 s"
    assert not _certain_to_repeat("RuntimeError: CUDA out of memory")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command"))
    return parser


def _tune(args: list[str]) -> int:
    ns = _parser().parse_args(args)
    return int(ns.func(ns))


def test_an_unreachable_scheduler_address_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    cfg = {"train": "tune_trainables:train_curve", "space": {"x": {"type": "continuous", "low": 0, "high": 1}},
           "strategy": {"type": "random", "max_resource": 3}, "max_jobs": 2, "journal": str(tmp_path / "j.db"),
           "executor": "tcp://127.0.0.1:1"}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(cfg))
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert _tune(["tune", str(tmp_path / "tune.yaml"), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tripwire tune: error: executor: cannot connect to the Dask scheduler at 'tcp://127.0.0.1:1'")
    assert "Traceback" not in err and len(err.splitlines()) == 1
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(TuneError, match="cannot connect to the Dask scheduler"):
            Tuner(lambda p, t: 0.0, {"x": Continuous(0, 1)}, strategy=RandomSearch(), max_jobs=1,
                  executor="tcp://127.0.0.1:1").fit()


@pytest.mark.parametrize("data, match", [
    ({"type": "hyperbnd"}, r"strategy type='hyperbnd' is not one of random, grid, hyperband; did you mean 'hyperband'\?"),
    ({"type": "hyperband", "min_resource": 10, "max_resource": 9},
     r"^strategy \(hyperband\): max_resource=9 must be >= min_resource=10"),
    ({"type": "hyperband", "max_resource": 9, "reduction_factor": 1}, r"^strategy \(hyperband\): reduction_factor=1"),
    ({"type": "hyperband", "max_resource": 9, "rung_system": "perbracket"},
     r"^strategy \(hyperband\): rung_system='perbracket' is not one of 'per_bracket', 'shared'; did you mean 'per_bracket'\?"),
])
def test_strategy_values_are_named_under_strategy(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        strategy_from_dict(data)


def test_resume_names_the_nested_key_that_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {"train": "tune_trainables:train_curve",
           "space": {"x": {"type": "continuous", "low": 0, "high": 1}, "n": {"type": "integer", "low": 1, "high": 10}},
           "strategy": {"type": "hyperband", "min_resource": 1, "max_resource": 3}, "max_jobs": 2, "seed": 0,
           "journal": str(tmp_path / "j.db")}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert _tune(["tune", str(path), "--no-progress"]) == 0
    cfg["space"]["n"]["high"] = 12
    path.write_text(yaml.safe_dump(cfg))
    capsys.readouterr()
    assert _tune(["tune", str(path), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "(space.n.high: 12 in the YAML, 10 in the journal)" in err and "'low': 0" not in err


def test_hyperband_object_is_unchanged_by_the_yaml_prefix() -> None:
    # the prefix is the YAML's: Hyperband(...) itself says what it always said
    with pytest.raises(ConfigError, match=r"^max_resource=9 must be >= min_resource=10"):
        Hyperband(min_resource=10, max_resource=9)


@pytest.mark.parametrize("source, said", [
    ("def train(params, trial)\n    return 1\n", r"SyntaxError: expected ':' \(.*broken_\w+\.py, line 1\)"),
    ("import json\nDATA = json.load(open('no-such-file.json'))\n",
     r"FileNotFoundError: \[Errno 2\] No such file or directory: 'no-such-file.json' \(.*broken_\w+\.py, line 2\)"),
])
def test_a_training_module_that_fails_to_import_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch, source: str,
                                                             said: str) -> None:
    # trial 17b: a SyntaxError (or any error raised at import) in the train module was a raw
    # traceback and exit 1; a missing module was one line and exit 2
    name = f"broken_{abs(hash(source)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = {"train": f"{name}:train", "space": {"x": {"type": "continuous", "low": 0, "high": 1}}, "max_jobs": 2,
           "journal": str(tmp_path / "j.db")}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(cfg))
    assert _tune(["tune", str(tmp_path / "tune.yaml"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert re.search(f"^tripwire tune: error: train='{name}:train': module '{name}' raised when imported: {said}$",
                     err), err


def test_resuming_a_finished_job_gives_the_jobs_time_in_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 23c: --resume of a finished job printed "(0.0 s)" for a job that had run for seconds
    cfg = {"train": "tune_trainables:train_curve", "space": {"x": {"type": "continuous", "low": 0, "high": 1}},
           "strategy": {"type": "random", "max_resource": 2}, "max_jobs": 2, "seed": 0,
           "journal": str(tmp_path / "j.db")}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert _tune(["tune", str(path), "--no-progress"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(rf"journal: {re.escape(cfg['journal'])}  \(\d+\.\d s\)", first), first
    assert _tune(["tune", str(path), "--resume", "--no-progress"]) == 0
    again = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(rf"journal: {re.escape(cfg['journal'])}  \(\d+\.\d s; the job \d+\.\d s in all\)", again), again
