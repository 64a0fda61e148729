"""Trial 31d F6: feature_importance_overweight never judges a model with fewer than nfeatures + 2
features, and said nothing (a 2-feature model, one feature the label plus noise, 100% of the
importance, no finding and no word). It now says once, in a WARNING, that it cannot judge the model
and why."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from tripwire.rules import FeatureImportanceOverweight


def _importance(round_: int, shares: dict[str, float], itype: str = "total_gain") -> Any:
    return ("train", round_, {f"feature_importance/{itype}/{f}": (v, "feature_importance") for f, v in shares.items()})


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "cannot judge this model" in r.getMessage()]


def test_a_model_of_two_features_is_said_once_not_judged(feed, caplog) -> None:
    recs = [_importance(r, {"leak": 1.0, "noise": 0.0}) for r in range(20)]
    with caplog.at_level(logging.INFO, logger="tripwire"):
        found = feed(FeatureImportanceOverweight(start_step=2), recs)
    assert found == []
    said = _said(caplog)
    assert len(said) == 1, said
    assert "rule 'feature_importance_overweight' cannot judge this model: it has 2 features" in said[0]
    assert "at least nfeatures + 2 = 3" in said[0] and "from round 2 on" in said[0]
    assert "no nfeatures judges a model of fewer than 3 features" in said[0]
    assert "feature_importance/total_gain/<feature>" in said[0]


def test_a_lower_nfeatures_is_named_where_one_would_judge(feed, caplog) -> None:
    recs = [_importance(r, {"a": 0.5, "b": 0.3, "c": 0.1, "d": 0.1}) for r in range(12)]
    with caplog.at_level(logging.INFO, logger="tripwire"):
        assert feed(FeatureImportanceOverweight(nfeatures=3), recs) == []
    said = _said(caplog)
    assert len(said) == 1 and "it has 4 features" in said[0] and "nfeatures + 2 = 5" in said[0], said
    assert "nfeatures=2 would judge it" in said[0]


def test_a_model_it_judges_is_not_said_to_be_unjudged(feed, caplog) -> None:
    recs = [_importance(r, {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1}) for r in range(12)]
    with caplog.at_level(logging.INFO, logger="tripwire"):
        assert feed(FeatureImportanceOverweight(), recs) == []
    assert _said(caplog) == []


def test_the_trial_booster_says_it(tmp_path, caplog) -> None:
    xgb = pytest.importorskip("xgboost")
    from tripwire.integrations.xgboost import TripwireCallback

    rng = np.random.default_rng(0)
    y = (rng.random(800) > 0.5).astype(float)
    X = np.column_stack([y + rng.normal(scale=0.05, size=800), rng.normal(size=800)])
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "feature_importance_overweight", "start_step": 2, "actions": ["log"]}])
    d = xgb.DMatrix(X[:600], label=y[:600])
    dv = xgb.DMatrix(X[600:], label=y[600:])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, d, 8,
                  evals=[(d, "train"), (dv, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.findings == []
    said = _said(caplog)
    assert len(said) == 1 and "it has 2 features" in said[0], said
