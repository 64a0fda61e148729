"""Trial 43h F1: ``overfit`` read a validation metric whose name tells no direction (a custom metric
``skill``, an R^2, better high) as better low without a word, and missed its overfitting. A WARNING
now says the direction was taken, once per metric, and how to give it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tripwire


def _run(names: tuple[str, str], caplog: pytest.LogCaptureFixture, **params: object) -> list[str]:
    train, val = names
    session = tripwire.Session(write=False, save={"interval": 1}, collections=["metrics"],
                               rules=[{"name": "overfit", "train": train, "validation": val, **params}])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(6):
            session.step("train", step, {train: (np.float64(0.5 + 0.05 * step), "metrics")})
            session.step("eval", step, {val: (np.float64(0.4 - 0.01 * step), "metrics")})
    return [r.getMessage() for r in caplog.records if "reads" in r.getMessage() and "better low" in r.getMessage()]


def test_a_metric_whose_name_tells_no_direction_is_said_to_be_read_better_low(caplog: pytest.LogCaptureFixture) -> None:
    said = _run(("train-skill", "validation-skill"), caplog)
    assert said == ["tripwire: overfit reads 'validation-skill' as better low: neither its name nor the training "
                    "metric's tells a direction (loss, error, rmse: low; auc, accuracy, f1: high); give "
                    "higher_is_better: true where it is better high"]


@pytest.mark.parametrize(("names", "params"), [(("train-auc", "validation-auc"), {}),
                                                (("train-skill", "validation-skill"), {"higher_is_better": True}),
                                                (("train_loss", "val_kappa"), {}), (("train_auc", "val_skill"), {})])
def test_a_direction_told_is_not_said(caplog: pytest.LogCaptureFixture, names: tuple[str, str], params: dict) -> None:
    assert _run(names, caplog, **params) == []


@pytest.mark.parametrize(("name", "higher"), [
    ("val_auroc", True), ("val_BinaryAUROC", True), ("val_prc", True), ("val_specificity_at_sensitivity", True),
    ("val_PeakSignalNoiseRatio", True), ("val_ExplainedVariance", True), ("val_mean_io_u", True),
    ("val_ConcordanceCorrCoef", True), ("val_cosine_similarity", True), ("val_kappa", True), ("val_mcc", True),
    ("validation-rmsle", False), ("validation-mphe", False), ("validation-aft-nloglik", False),
    ("val_kl_divergence", False), ("cosine_distance", False), ("val_brier", False), ("val_cer", False),
    ("val_skill", None), ("val_audio", None)])
def test_metric_names_tell_their_direction(name: str, higher: bool | None) -> None:
    """Trials 43k, 43n: torchmetrics' AUROC, Keras's PRC and cosine similarity, XGBoost's RMSLE, ...
    told no direction (or the wrong one), and a rising AUROC stopped a healthy fit as overfitting."""
    from tripwire.rules.overfit import told_direction

    assert told_direction(name) is higher
