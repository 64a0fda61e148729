"""Trial 31d F5: a local-executor trial given to ``xgboost.dask`` (its callback copied into the Dask
workers) raised ``TrialDetachedError`` with Lightning's advice only (ddp_spawn, devices=1). It now
names the xgboost.dask case, and what works: ``Tuner(executor="dask")`` with the client taken from
``distributed.worker_client()`` inside ``train`` (checked here on a real cluster)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire.tune._trial as mod
from tripwire.tune import Categorical, RandomSearch, Tuner
from tripwire.tune._errors import TrialDetachedError
from tripwire.tune._trial import Trial


class _Channel:
    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        return False, ""


def _foreign_copy(trial: Trial) -> Trial:
    """``trial`` as unpickled in another process (the channel does not travel: detached)."""
    raw = pickle.dumps(trial)
    original = mod.os.getpid
    try:
        mod.os.getpid = lambda: original() + 1  # pretend to unpickle in another process
        return pickle.loads(raw)
    finally:
        mod.os.getpid = original


def test_outside_a_dask_worker_the_error_names_both_cases() -> None:
    foreign = _foreign_copy(Trial(1, {"x": 2}, 1, 10, channel=_Channel()))
    with pytest.raises(TrialDetachedError, match=r"report from the process that runs it only") as err:
        foreign.report(1, 0.5)
    text = str(err.value)
    assert "Lightning's ddp_spawn runs rank 0 in another process" in text
    assert 'xgboost.dask trains on Dask workers: run the tuner with executor="dask"' in text
    assert "distributed.worker_client()" in text
    with pytest.raises(TrialDetachedError, match=r"call rule_stopped from that process only \(rank 0; .*xgboost\.dask"):
        foreign.rule_stopped("overfit", "x")


def _report_in_worker(raw: bytes) -> str:
    trial = pickle.loads(raw)  # a Dask worker process: the local channel does not exist here
    try:
        trial.report(1, 0.5)
    except TrialDetachedError as exc:
        return str(exc)
    return "no error"


def test_in_a_dask_worker_the_error_says_what_works() -> None:
    distributed = pytest.importorskip("distributed")
    raw = pickle.dumps(Trial(3, {"x": 2}, 1, 10, channel=_Channel()))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        text = client.submit(_report_in_worker, raw, pure=False).result(timeout=120)
    assert text.startswith("trial 3 was copied into process"), text
    assert "this process is a Dask worker: xgboost.dask trains on the Dask workers" in text
    assert 'Tuner(..., executor="dask")' in text and "with worker_client() as client: dxgb.train(client" in text
    assert "ddp_spawn" not in text


def train_xgb_dask(params: dict[str, Any], trial: Any) -> dict[str, float]:
    """The documented way: xgboost.dask inside a Dask-executor trial, its client from worker_client()."""
    import dask.array as da
    from distributed import worker_client
    from xgboost import dask as dxgb

    from tripwire.integrations.xgboost import TripwireCallback

    with worker_client() as client:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(400, 4))
        y = ((X[:, 0] + rng.normal(size=400)) > 0).astype(float)
        dX, dy = da.from_array(X, chunks=(200, 4)), da.from_array(y, chunks=200)
        dtr = dxgb.DaskDMatrix(client, dX[:300], dy[:300])
        dva = dxgb.DaskDMatrix(client, dX[300:], dy[300:])
        cb = TripwireCallback(trial=trial, trial_metric="validation-logloss",
                              out_dir=os.path.join(params["out"], f"trial-{trial.number}"))
        out = dxgb.train(client, {"objective": "binary:logistic", "nthread": 1, "eta": params["eta"]}, dtr,
                         trial.max_resource, evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb])
        return {"objective": float(out["history"]["validation"]["logloss"][-1]),
                "rounds": float(out["booster"].num_boosted_rounds())}


def test_the_advice_works_xgboost_dask_in_a_dask_executor_trial(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    pytest.importorskip("xgboost")
    result = Tuner(train_xgb_dask, {"eta": Categorical([0.3]), "out": Categorical([str(tmp_path / "runs")])}, objective="objective", mode="min",
                   strategy=RandomSearch(max_resource=3), max_jobs=1, max_parallel_jobs=1, seed=0,
                   journal=str(tmp_path / "t.db"), executor="dask").fit()
    (t,) = result.trials
    assert t.status == "completed", t.error
    assert t.resource == 3 and t.metrics["rounds"] == 3.0
