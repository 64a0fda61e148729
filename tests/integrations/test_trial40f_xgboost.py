"""Trial 40f F3: after ``xgboost.dask`` training, the client's callback printed ``not trained`` beside
the findings and the stop its workers' copies wrote. A callback that was copied (as ``xgboost.dask``
sends it to the workers) prints the run's state as they left it. Here the copy trains in this process,
as a worker's would."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def test_a_copied_callback_prints_the_state_its_copy_left(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "r", save_interval=1,
                          rules=[{"name": "tree_depth", "max_depth": 2, "actions": ["stop_training"]}])
    assert ", not trained, findings=0)" in repr(cb)
    worker_copy = pickle.loads(pickle.dumps(cb))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + rng.normal(size=300) > 0).astype(float)
    xgb.train({"max_depth": 5, "nthread": 1}, xgb.DMatrix(X, label=y), 10, callbacks=[worker_copy])
    assert "run stopped" in repr(worker_copy)
    shown = repr(cb)
    assert ", run stopped, findings=1, stopped_by='tree_depth')" in shown, shown
    # (a callback never copied, whose out_dir holds another run, has not trained)
    fresh = TripwireCallback(out_dir=tmp_path / "r", save_interval=1)
    assert ", not trained, " in repr(fresh)


def test_a_copy_of_a_callback_that_trained_prints_its_runs_state(tmp_path: Path) -> None:
    """Trial 43h: a model pickled with the callback that trained it (or a deepcopy of the callback)
    printed ``not trained`` beside the findings and ``stopped_by`` it reads from the run."""
    import copy

    cb = TripwireCallback(out_dir=tmp_path / "r", save_interval=1,
                          rules=[{"name": "tree_depth", "max_depth": 2, "actions": ["stop_training"]}])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + rng.normal(size=300) > 0).astype(float)
    xgb.train({"max_depth": 5, "nthread": 1}, xgb.DMatrix(X, label=y), 10, callbacks=[cb])
    for other in (pickle.loads(pickle.dumps(cb)), copy.deepcopy(cb)):
        assert ", run stopped, findings=1, stopped_by='tree_depth')" in repr(other), repr(other)
