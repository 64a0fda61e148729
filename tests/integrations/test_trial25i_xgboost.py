"""Trial 25i: an XGBoost fit with a validation set alone hears once that its loss rules read nothing
(the first round's WARNING names them and the fix), not again at the end ("says so once", as
docs/xgboost.md promises): close named each of them a second time."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def test_a_fit_without_its_training_data_among_the_evals_names_the_loss_rules_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = (x[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        xgb.XGBClassifier(n_estimators=20, max_depth=3, callbacks=[cb]).fit(
            x[:150], y[:150], eval_set=[(x[150:], y[150:])], verbose=False)
    said = [r.getMessage() for r in caplog.records if "loss_not_decreasing" in r.getMessage()]
    assert len(said) == 1, said
    assert "no evaluation set is the training data" in said[0]
