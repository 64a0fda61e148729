"""Trial 35d: the known last round (xgb.train's num_boost_round, the sklearn API's n_estimators)
records the validation labels and predictions too, as every other collection, off their interval."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 4))
    return x, (x[:, 0] > 0).astype(int)


def test_the_last_round_of_xgb_train_records_labels_and_predictions(tmp_path: Path) -> None:
    x, y = _data()
    dtr, dva = xgb.DMatrix(x[:200], label=y[:200]), xgb.DMatrix(x[200:], label=y[200:])
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["labels", "predictions"])
    booster = xgb.train({"objective": "binary:logistic", "nthread": 1, "max_depth": 2}, dtr, 15,
                        evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("labels").steps(mode="eval") == [0, 10, 14]
    assert run.tensor("predictions").steps(mode="eval") == [0, 10, 14]
    np.testing.assert_allclose(run.tensor("predictions").value(14, mode="eval").reshape(-1),
                               booster.predict(dva), rtol=1e-6)
    np.testing.assert_array_equal(run.tensor("labels").value(14, mode="eval").reshape(-1), y[200:])


def test_the_last_round_of_the_sklearn_api_records_predictions(tmp_path: Path) -> None:
    x, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=5, include_collections=["predictions"])
    model = xgb.XGBClassifier(n_estimators=15, max_depth=2, n_jobs=1, callbacks=[cb])
    model.fit(x[:200], y[:200], eval_set=[(x[200:], y[200:])], verbose=False)
    assert tripwire.open_run(tmp_path / "run").tensor("predictions").steps(mode="eval") == [0, 5, 10, 14]
