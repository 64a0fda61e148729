"""Trial 30f finding 2 (a data scientist in Jupyter): ``executor={'type': 'local', 'start_method':
'fork'}``, which the refusal of a notebook's ``train`` suggested, hung every trial once torch had
trained anything in the kernel.

What hung (gdb on the forked worker): its only thread waited in ``gomp_team_barrier_wait_end``
(torch's bundled GNU OpenMP, ``libgomp``) inside ``log_softmax``: GNU OpenMP's thread pool does not
survive ``fork``, so the child's first parallel region waits for pool threads that exist only in the
tuning process. A forked worker now runs torch and every GNU OpenMP runtime the tuning process had
loaded on one thread (as torch's own DataLoader workers do); the refusal names that, and names CUDA
instead of suggesting fork where the tuning process has initialised it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tripwire.tune import Integer, Tuner
from tripwire.tune import _executor
from tripwire.tune._errors import ConfigError

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork on this platform")

FORK = {"type": "local", "start_method": "fork"}


def _torch_work() -> None:
    """Work that runs OpenMP parallel regions in torch (above its grain size): softmax, a matmul."""
    import torch

    x = torch.randn(4096, 512)
    torch.log_softmax(x, 1)
    (x @ x.T).sum()


def torch_train(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    import torch

    _torch_work()
    return {"objective": float(params["x"]), "threads": torch.get_num_threads()}


@pytest.fixture
def warm_torch() -> Any:
    """torch's OpenMP pool started in this (the tuning) process, as after a notebook's first fit."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # (a pool of 2 threads even on a 1-CPU host)
    _torch_work()
    yield torch
    torch.set_num_threads(before)


def test_forked_workers_run_torch_after_the_tuning_process_used_its_thread_pool(tmp_path: Path,
                                                                                  warm_torch: Any) -> None:
    result = Tuner(torch_train, space={"x": Integer(1, 9)}, max_jobs=2, max_parallel_jobs=2, seed=0,
                   journal=str(tmp_path / "t.db"), executor=FORK, trial_timeout=30).fit()
    df = result.dataframe()
    assert list(df["status"]) == ["completed", "completed"], list(df["reason"])
    assert [t.metrics["threads"] for t in result.trials] == [1, 1]   # one intra-op thread in a forked worker
    assert warm_torch.get_num_threads() == 2                          # the tuning process keeps its own


XGB_SCRIPT = """
import numpy as np, xgboost as xgb
from tripwire.tune import Integer, Tuner

def train(params, trial):
    X = np.random.default_rng(0).random((20000, 20))
    booster = xgb.train({}, xgb.DMatrix(X, label=X[:, 0] > 0.5), 3)
    return float(booster.num_boosted_rounds() + params["x"])

if __name__ == "__main__":
    X = np.random.default_rng(1).random((20000, 20))
    xgb.train({}, xgb.DMatrix(X, label=X[:, 0] > 0.5), 3)   # its OpenMP pool started here
    with open("/proc/self/maps") as fh:
        if "libgomp" not in fh.read():
            raise SystemExit("no GNU OpenMP")
    result = Tuner(train, space={"x": Integer(1, 9)}, max_jobs=2, max_parallel_jobs=2, seed=0,
                   journal="x.db", executor={"type": "local", "start_method": "fork"}, trial_timeout=30).fit()
    print(list(result.dataframe()["reason"]))
    print(list(result.dataframe()["status"]))
"""


def test_forked_workers_run_another_gnu_openmp_runtime_the_tuning_process_used(tmp_path: Path) -> None:
    """xgboost (GNU OpenMP of scikit-learn's wheel here), in a process without torch."""
    pytest.importorskip("xgboost")
    (tmp_path / "xgb_job.py").write_text(XGB_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}   # (a pool of 2 threads: tests/conftest.py sets 1)
    proc = subprocess.run([sys.executable, "xgb_job.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    if "no GNU OpenMP" in proc.stderr:
        pytest.skip("xgboost does not use GNU OpenMP here")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "['completed', 'completed']", proc.stdout


def test_the_tuning_process_logs_that_forked_workers_run_openmp_on_one_thread(tmp_path: Path, warm_torch: Any,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire.tune"):
        Tuner(torch_train, space={"x": Integer(1, 9)}, max_jobs=1, seed=0, journal=str(tmp_path / "l.db"),
              executor=FORK, trial_timeout=30).fit()
    said = [r.getMessage() for r in caplog.records if "one thread" in r.getMessage()]
    assert len(said) == 1 and "start_method='fork'" in said[0] and "torch" in said[0], said


# ---- the refusal of a train defined in a notebook's (an unimportable) __main__ --------------------------------
def test_the_refusal_of_an_unimportable_train_names_what_fork_changes() -> None:
    code = textwrap.dedent("""
        import torch
        torch.set_num_threads(2); torch.log_softmax(torch.randn(4096, 512), 1)   # a notebook that trained
        from tripwire.tune import Tuner, Integer
        def train(p, t):
            return float(p['x'])
        try:
            Tuner(train, space={'x': Integer(1, 9)}, max_jobs=1).fit()
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("ConfigError train=<function train"), out
    assert "'start_method': 'fork'" in out and "one thread" in out and "where threads and CUDA allow it" not in out


def _notebook_train(params: dict[str, Any], trial: Any) -> float:
    return 0.0


_notebook_train.__module__ = "__main__"


def test_the_refusal_does_not_suggest_fork_where_this_process_initialised_cuda(
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_executor, "main_is_importable", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(ConfigError, match=r"train=.*is defined in a __main__ that worker processes cannot import") \
            as info:
        _executor.LocalExecutor("spawn").start(_notebook_train, None, 1)
    assert "'start_method': 'fork'" not in str(info.value)
    assert "CUDA" in str(info.value) and "forked worker cannot use" in str(info.value)


def test_fork_after_cuda_was_initialised_is_warned(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    ex = _executor.LocalExecutor("fork")
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        ex.start(torch_train, None, 1)
    ex.shutdown()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("CUDA" in m and "start_method='fork'" in m and "Cannot re-initialize CUDA" in m for m in said), said


def test_a_forked_worker_limits_only_the_runtimes_the_tuning_process_had_loaded() -> None:
    """Where no GNU OpenMP runtime and no torch is loaded, nothing is limited (a worker that imports
    torch itself has a fresh OpenMP runtime: its threads are left alone)."""
    code = textwrap.dedent("""
        import os
        from tripwire.tune import _executor
        print('torch' in __import__('sys').modules, _executor._gnu_openmp_runtimes(), _executor._one_openmp_thread())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False [] []", proc.stdout
