"""Trial 31d F7: the README's ``history.value`` call matches the API (it said ``value(name, step)``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from tripwire import History

xgb = pytest.importorskip("xgboost")

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_readme_history_value_names_every_required_parameter() -> None:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    calls = re.findall(r"history\.value\(([^)]*)\)", text)
    assert calls, "the README no longer shows history.value"
    required = [p for p in list(inspect.signature(History.value).parameters.values())[1:]
                if p.default is inspect.Parameter.empty]
    assert [p.name for p in required] == ["tensor", "reduction", "step"]
    for args in calls:
        assert len([a for a in args.split(",") if a.strip()]) >= len(required), args


def test_readme_history_value_example_runs(tmp_path: Path) -> None:
    X = np.random.default_rng(0).normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(float)
    d = xgb.DMatrix(X, label=y)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    ev: dict = {}
    xgb.train({"nthread": 1, "objective": "binary:logistic"}, d, 5, evals=[(d, "train")], evals_result=ev,
              callbacks=[cb], verbose_eval=False)
    assert cb.history.value("train-logloss", "raw", 3) == pytest.approx(ev["train"]["logloss"][3], rel=1e-6)
    assert cb.history.latest("train-logloss") == (4, pytest.approx(ev["train"]["logloss"][4], rel=1e-6))
