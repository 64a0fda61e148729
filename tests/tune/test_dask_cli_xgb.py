"""The Dask executor on a real LocalCluster, the CLI, and a real XGBoost training loop."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tune_trainables as tt
import yaml

from tripwire.tune import Continuous, Hyperband, Integer, RandomSearch, Tuner, TuningResult
from tripwire.tune._cli import register

HERE = Path(tt.__file__).parent


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


def test_dask_executor_on_local_cluster(cluster, tmp_path: Path) -> None:
    from test_dask_forms import distributed_errors

    from tripwire.tune import DaskExecutor

    with distributed_errors() as errors:  # the scheduler runs in this process, the workers do not
        result = Tuner(tt.train_with_context, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3),
                       max_jobs=12, max_parallel_jobs=2, seed=0, journal=str(tmp_path / "d.db"),
                       setup=tt.setup_data, executor=DaskExecutor(cluster)).fit()
    assert [r.getMessage() for r in errors] == []   # no timed-out queue_get between reports
    assert len(result.trials) == 12 and result.counts()["failed"] == 0
    assert result.counts()["stopped"] > 0                           # decisions crossed processes
    import os

    import distributed

    with distributed.Client(cluster) as client:
        worker_pids = {float(p) for p in client.run(os.getpid).values()}
    pids = {t.metrics["own_pid"] for t in result.trials}
    assert pids <= worker_pids and os.getpid() not in pids                 # ran in the Dask worker processes
    assert all(t.metrics["worker_pid"] == t.metrics["own_pid"] for t in result.trials)  # setup ran per worker
    local = Tuner(tt.train_with_context, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3), max_jobs=12,
                  seed=0, journal=str(tmp_path / "l.db"), setup=tt.setup_data).fit()
    assert [t.params for t in local.trials] == [t.params for t in result.trials]


def test_dask_failure_isolated(cluster, tmp_path: Path) -> None:
    from tripwire.tune import DaskExecutor

    result = Tuner(tt.train_sometimes_fails, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=4,
                   max_parallel_jobs=2, seed=0, journal=str(tmp_path / "f.db"), executor=DaskExecutor(cluster)).fit()
    assert [t.status for t in result.trials] == ["completed", "failed", "completed", "completed"]
    assert "boom in trial 1" in result.trials[1].error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def _config(tmp_path: Path, **over) -> Path:
    cfg = {"train": "tune_trainables:train_dict", "objective": "validation:auc", "mode": "max",
           "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}},
           "strategy": {"type": "hyperband", "min_resource": 1, "max_resource": 9, "reduction_factor": 3},
           "max_jobs": 10, "max_parallel_jobs": 2, "seed": 4, "journal": str(tmp_path / "cli.db")}
    cfg.update(over)
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_tune_resume_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    args = _parser().parse_args(["tune", str(_config(tmp_path))])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "tuning job: 10 trials" in out and "best so far" in out and "resource used" in out
    # extend the job through --resume with a larger max_jobs
    args = _parser().parse_args(["tune", str(_config(tmp_path, max_jobs=14)), "--resume", "--no-progress"])
    assert args.func(args) == 0
    assert len(TuningResult.from_journal(tmp_path / "cli.db").trials) == 14
    capsys.readouterr()
    args = _parser().parse_args(["tune-report", str(tmp_path / "cli.db"), "--top", "2"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "tuning job: 14 trials" in out and out.count("  trial ") == 2 and "validation:auc=" in out
    # the same YAML again without --resume: bad input (exit 2, as a wrong journal path), not a failed job (1)
    args = _parser().parse_args(["tune", str(_config(tmp_path, max_jobs=14)), "--no-progress"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "cli.db' already holds a tuning job; continue it with tripwire tune --resume " in err
    assert len(TuningResult.from_journal(tmp_path / "cli.db").trials) == 14


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["tune", str(_config(tmp_path, max_job=3))])
    assert args.func(args) == 2
    assert "unknown key 'max_job'; did you mean 'max_jobs'?; accepted: train, setup" in capsys.readouterr().err
    args = _parser().parse_args(["tune", str(_config(tmp_path, train="tune_trainables:train_curv"))])
    assert args.func(args) == 2
    # the functions defined in the module, not what it imported (Any, math, os ...)
    err = capsys.readouterr().err
    assert "has no attribute 'train_curv'; did you mean 'train_curve'?; defined there: curve, " in err
    assert " os," not in err and "math" not in err
    for bad in ("-3", "two"):  # trial 19c: --top -3 listed every trial but the last 3
        with pytest.raises(SystemExit) as exit_info:
            _parser().parse_args(["tune-report", str(tmp_path / "cli.db"), "--top", bad])
        assert exit_info.value.code == 2
        assert f"argument --top: got '{bad}'; accepted: an integer >= 0" in capsys.readouterr().err
    args = _parser().parse_args(["tune-report", str(tmp_path / "missing.db")])
    assert args.func(args) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_job_whose_trials_all_fail_exits_1_with_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.chdir(tmp_path.parent)  # a relative journal lies next to the YAML, not in the working directory
    args = _parser().parse_args(["tune", str(_config(tmp_path, objective="auc", max_jobs=3, journal="rel.db")),
                                 "--no-progress"])
    assert args.func(args) == 1
    captured = capsys.readouterr()
    # the same error twice before any success: fail fast starts no further trial (a third may have
    # started, on the free worker, before the second failure arrived)
    assert re.search(r"first error \(trial 0, [23] failed\): train returned a dict without the objective \(key 'auc'",
                     captured.out), captured.out
    assert "ended early: fail_fast: 2 trials failed with the same error" in captured.out
    # said once, by the summary: the tuner's own closing warning is not logged again on stderr
    assert "every finished trial failed; their tracebacks: tripwire tune-report" in captured.err
    assert "no trial returned an objective" not in captured.err and "stopped early" not in captured.err
    assert (tmp_path / "rel.db").is_file() and not (tmp_path.parent / "rel.db").exists()


def test_cli_in_a_subprocess(tmp_path: Path) -> None:
    cfg = _config(tmp_path, max_jobs=4)
    code = ("import argparse, sys; from tripwire.tune._cli import register; p = argparse.ArgumentParser(); "
            "register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
    proc = subprocess.run([sys.executable, "-c", code, "tune", str(cfg)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(HERE), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    # piped: the live view's last table ends its line before the summary
    assert "\ntuning job: 4 trials" in proc.stdout and "┘\n" in proc.stdout


def test_real_xgboost_callback_reports_from_the_worker(tmp_path: Path) -> None:
    pytest.importorskip("xgboost")
    pytest.importorskip("sklearn")
    result = Tuner(tt.train_xgboost, {"eta": Continuous(0.01, 1, scale="log"), "max_depth": Integer(1, 6)},
                   objective="validation:auc", strategy=Hyperband(1, 9, 3), max_jobs=8, max_parallel_jobs=2,
                   seed=0, journal=str(tmp_path / "x.db")).fit()
    assert result.counts()["failed"] == 0, [t.error for t in result.trials]
    for t in result.trials:
        assert t.metrics["rounds"] == t.resource     # the callback's True stopped boosting at that round
        assert 0.5 < t.value <= 1.0
    assert result.counts()["stopped"] > 0 and any(t.resource == 9 for t in result.trials)
