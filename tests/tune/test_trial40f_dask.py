"""Trial 40f F1: a Dask-executor trial whose tripwire rule stopped it from another worker process than
its task (``xgboost.dask`` runs rank 0's callback on the worker it picks) was journaled ``completed``
and could be ranked best: ``Trial.rule_stopped`` kept the stop in that process's memory, which the
task's end never read. It now tells the tuning process through the trial's channel, as a report does.
Checked on a real cluster, the stop made by a task pinned to the other worker."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tripwire.tune import Categorical, RandomSearch, Tuner


def _stop_elsewhere(trial: Any, why: str) -> int:
    if why == "rule":
        trial.rule_stopped("planted_40f", "stopped on another worker")
    else:
        trial.note_early_end("EarlyStopping on another worker")
    return os.getpid()


def train_stopped_on_another_worker(params: dict[str, Any], trial: Any) -> float:
    from distributed import get_worker, worker_client

    here = get_worker().address
    with worker_client() as client:
        other = next(a for a in client.scheduler_info()["workers"] if a != here)
        pid = client.submit(_stop_elsewhere, trial, params["why"], workers=[other], allow_other_workers=False,
                            pure=False).result()
    assert pid != os.getpid()  # (the stop was made in another process than this task's)
    trial.report(1, 0.5)
    return 0.5


@pytest.mark.parametrize("why", ["rule", "early_end"])
def test_a_stop_made_on_another_dask_worker_reaches_the_journal(tmp_path: Path, why: str) -> None:
    pytest.importorskip("distributed")
    result = Tuner(train_stopped_on_another_worker, {"why": Categorical([why])}, mode="min",
                   strategy=RandomSearch(max_resource=3), max_jobs=1, max_parallel_jobs=2, seed=0,
                   journal=str(tmp_path / "t.db"), executor="dask").fit()
    (t,) = result.trials
    if why == "rule":
        assert (t.status, t.rule) == ("stopped", "planted_40f"), (t.status, t.rule, t.reason)
        assert "stopped on another worker" in t.reason
        assert result.best is None  # (a trial a rule stopped never ranks best)
    else:
        assert t.status == "completed" and t.reason == "completed: EarlyStopping on another worker", t.reason
