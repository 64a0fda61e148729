"""Trial 42e F4: with ``evals=[(dtr, "train"), (dva, "valid"), (dte, "test")]`` a bare ``overfit``
read ``test-logloss`` (the last set), which steers a user to fit the test data; the tuner's
``trial_metric`` default did the same. Among several held-out sets the one named as a validation set
is the default now, else the last one not named as a test set; one held-out set stays the default
whatever its name."""

from __future__ import annotations

from pathlib import Path

import pytest

xgb = pytest.importorskip("xgboost")
pytest.importorskip("sklearn")

from sklearn.datasets import make_classification  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


@pytest.mark.parametrize(("names", "chosen"), [
    (["train", "valid", "test"], "valid"),
    (["train", "test", "valid"], "valid"),
    (["train", "test", "holdout"], "holdout"),  # (no validation name: the last, both test-named)
    (["train", "dev", "test_set"], "dev"),
    (["train", "test"], "test"),  # (one held-out set: whatever its name)
    (["train", "a", "b"], "b"),
    (["train", "b", "test"], "b"),
    (["train", "dvalid", "dtest"], "dvalid"),  # (trial 42i: XGBoost's own naming, and glued forms)
    (["train", "validset", "testset"], "validset"),
    (["train", "valSet", "testSet"], "valSet"),
    (["train", "a", "dtest"], "a"),
])
def test_the_default_validation_set(tmp_path: Path, names: list[str], chosen: str) -> None:
    x, y = make_classification(n_samples=300, n_features=5, random_state=0)
    mats = {"train": xgb.DMatrix(x[:150], y[:150])}
    for i, name in enumerate(names[1:]):
        lo = 150 + 50 * i
        mats[name] = xgb.DMatrix(x[lo:lo + 50], y[lo:lo + 50])
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["overfit"], save_interval=1)
    xgb.train({"objective": "binary:logistic", "nthread": 1}, mats["train"], 3,
              evals=[(mats[n], n) for n in names], callbacks=[cb], verbose_eval=False)
    inputs = tripwire.open_run(tmp_path / "run").rule_inputs
    assert inputs["overfit"] == {"train": "train-logloss", "validation": f"{chosen}-logloss"}


def test_the_tuners_default_metric_is_the_validation_sets(tmp_path: Path) -> None:
    """Trial 42i F1: with no ``trial_metric`` the trial was told the last set's metric, ``test``."""
    x, y = make_classification(n_samples=300, n_features=5, random_state=0)
    dtr, dva, dte = xgb.DMatrix(x[:150], y[:150]), xgb.DMatrix(x[150:225], y[150:225]), xgb.DMatrix(x[225:], y[225:])

    class Recorder:
        number, attempt, max_resource = 0, 1, None
        params: dict = {}

        def __init__(self) -> None:
            self.reports: list[tuple[int, float]] = []

        def report(self, step: int, value: float) -> bool:
            self.reports.append((step, value))
            return False

    trial = Recorder()
    result: dict = {}
    xgb.train({"objective": "binary:logistic", "nthread": 1}, dtr, 4,
              evals=[(dtr, "train"), (dva, "valid"), (dte, "test")], evals_result=result,
              callbacks=[TripwireCallback(out_dir=tmp_path / "run", trial=trial, rules=[])], verbose_eval=False)
    assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["logloss"])
    assert tripwire.open_run(tmp_path / "run").trial["metric"] == "valid-logloss"
